# The offline suite's tests that need neither network nor Nix (checks/offline/sandbox_selection.py,
# markers in checks/conftest.py), run with nixpkgs' Python as a CPU flake check. The source and the
# package list are builtins-only, so checks/offline/test_sandbox_selection.py evaluates them with the
# real Nix and runs the selection over exactly this source, without network and without Nix.
let
  source = import ./lib/source-subset.nix {
    root = ../.;
    name = "python-offline-tests-source";
    include = [
      "README.md"
      "checks/conftest.py"
      "checks/golden/families.json"
      "checks/golden/h200/e2e-tiny-hybrid.json"
      "checks/golden/h200/e2e-tiny-hybrid-long.json"
      "checks/offline"
      "pkgs/bitexact/src"
      "pkgs/formats/src"
      "pkgs/gpu-checks/src"
      "checks/e2e"
      "checks/gpu"
      "checks/plans"
      "bench/kernels/bench_attn_prefetch.py"
      "bench/kernels/exact_gemm_table.py"
      "bench/kernels/gpu_timing.py"
      "bench/kernels/smallm_table.py"
      "bench/perf"
      "bench/upstream_eval"
      "docs/cards.md"
      "docs/e2e.md"
      "docs/evidence/attn-prefetch-h200-2026-12-03"
      "docs/evidence/batteries-h200-2026-12-03"
      "docs/evidence/capacity-h200-2026-12-03"
      "docs/evidence/closing-h200-2026-12-03"
      "docs/evidence/e2e-h200-2026-11-30/patched/server-no-spec.head.log"
      "docs/evidence/e2e-h200-2026-11-30/patched/server-recipe.head.log"
      "docs/evidence/exact-gemm-h200-2026-12-01/exact-gemm-sm90-132sm-60mib.json"
      "docs/evidence/finish-h200-2026-12-02"
      "docs/evidence/long-context-h200-2026-12-01"
      "docs/evidence/parity-targets-h200-2026-12-03"
      "docs/evidence/perf-h200-2026-11-30"
      "docs/evidence/perf-h200-2026-12-01"
      "docs/evidence/perf-h200-2026-12-01-long-context"
      "docs/evidence/perf-h200-2026-12-01-shipped-rule"
      "docs/evidence/perf-h200-2026-12-02-reuse"
      "docs/evidence/perf-h200-2026-12-02-targets"
      "docs/evidence/perf-h200-2026-12-03-closing"
      "docs/evidence/perf-h200-2026-12-03-loop-stages"
      "docs/evidence/perf-h200-2026-12-03-prefill640"
      "docs/evidence/radix-h200-2026-12-02"
      "docs/evidence/recheck-h200-2026-12-02"
      "docs/evidence/runner-h100-2026-12-06/goldens"
      "docs/evidence/smallm-h200-2026-11-30/smallm-sm90-132sm-60mib.json"
      "docs/kernels.md"
      "docs/performance.md"
      "docs/reliability.md"
      "images/entrypoint/src"
      "images/layer_sizes.py"
      "nix/recipes"
      "nix/tools"
      "patches"
      "pkgs/lock/src"
      "pkgs/server/src"
      "pkgs/server-env"
    ];
  };
  # python3Packages attributes: every third-party module the source imports (the offline test checks
  # this list against the imports), torch as nixpkgs builds it without cudaSupport (CPU).
  pythonPackages = [
    "gguf"
    "httpx"
    "huggingface-hub"
    "hypothesis"
    "numpy"
    "nvidia-ml-py"
    "packaging"
    "pytest"
    "safetensors"
    "tokenizers"
    "torch"
    "transformers"
  ];
in
{
  inherit source pythonPackages;

  check =
    {
      runCommand,
      python3,
      git,
      util-linux,
    }:
    runCommand "python-offline-tests"
      {
        # git: the lock tool's tests build throwaway repositories; util-linux: setsid, with which
        # checks/e2e/host.sh starts the runner in the background (test_e2e_host.py); patch, tar and cc (the
        # driver stand-ins of checks/offline/driver_standins.py are compiled) come with stdenv.
        nativeBuildInputs = [
          (python3.withPackages (ps: map (name: ps.${name}) pythonPackages))
          git
          util-linux
        ];
      }
      ''
        set -o pipefail
        export HOME=$TMPDIR PYTHONDONTWRITEBYTECODE=1
        cd ${source}
        python checks/offline/sandbox_selection.py -q 2>&1 | tee $TMPDIR/log
        tail -n 1 $TMPDIR/log > $out
      '';
}
