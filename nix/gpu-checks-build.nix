# The GPU flake checks and the record-golden app, both calls of the one runner (`bitexact-gpu-checks`,
# pkgs/gpu-checks) on the plan nix/lib/gpu-batteries.nix evaluates for the recipe.
#
# Shape: one derivation runs the runner whole on the card (`run`: kernel checks, references, batteries on
# the patched tree, the stock tree's stated expectations, golden checks), the same invocation a GPU host
# without Nix makes (lab/card/host.sh) and the device sessions prove. It asks for the `cuda` system
# feature, as nixpkgs' GPU tests do, and records the runner's exit status instead of failing, so that one
# difference does not hide the rest. Each flake check is then one step's verdict read from that run
# (`bitexact-gpu-checks verdict`), on any builder: a failed step shows by name. Why one run and not a
# derivation per step: the runner schedules servers (one card holds one 27B server), resumes, shares the
# JIT caches between steps, and what runs on the card is then exactly what the runner runs whole.
{
  lib,
  runCommand,
  writeShellApplication,
  writeText,
  coreutils,
  gcc,
  gnupatch,
  # The parsed recipe and its file (the same one the server's wrapper names).
  recipe,
  recipeFile,
  # `bitexact-server` in bin/ for the patched build (.#server) and for the released SGLang (the same
  # closure without the series); the runner and bitexact as programs; the hub cache with the weights.
  server,
  stockServer,
  runner,
  bitexact,
  weights,
  # The kernel checks' Python (torch, triton and pytest import in it), and the SGLang site-packages trees
  # (the folders holding sglang/) of the two builds.
  kernelPython,
  sglangTree,
  stockTree,
  # The repository's checks/ directory (checks/gpu, checks/golden) and the SGLang series.
  checksDir ? ../checks,
  seriesDir ? ../patches/sglang,
  port ? 30000,
}:
let
  batteries = import ./lib/gpu-batteries.nix;
  hf = import ./lib/hf-cache.nix;

  model = lib.findFirst (m: m.repo == recipe.model.repo) (throw "gpu-checks: no manifest for ${recipe.model.repo}") weights.manifests;
  modelSnapshot = "${weights}/${hf.snapshotDir model}";

  planFile = writeText "gpu-plan-${recipe.name}.json" (builtins.toJSON (batteries.plan recipe));

  # What the run and the record-golden app both give the runner.
  inputs = [
    "--plan"
    "${planFile}"
    "--recipe"
    "${recipeFile}"
    "--tree"
    "patched=${sglangTree}"
    "--launcher"
    "patched=${server}/bin/bitexact-server"
    "--model-snapshot"
    modelSnapshot
    "--hub-cache"
    "${weights}"
    "--bitexact"
    "${bitexact}/bin/bitexact"
  ];
  runArgs = inputs ++ [
    "--port"
    (toString port)
    "--tree"
    "stock=${stockTree}"
    "--launcher"
    "stock=${stockServer}/bin/bitexact-server"
    "--golden-dir"
    "${checksDir + "/golden"}"
    "--kernel-checks"
    "${checksDir + "/gpu"}"
    "--series"
    "${seriesDir}"
    "--python"
    "${kernelPython}/bin/python"
  ];

  # The whole plan on the card. No host binary runs here: the launcher finds the driver the sandbox
  # offers (/run/opengl-driver/lib), the runner reads the card through NVML from the same directory.
  run = runCommand "gpu-checks-run" {
    requiredSystemFeatures = [ "cuda" ];
    # Triton compiles its launcher stubs with a host C compiler; the kernel checks take patches off a
    # copy of a tree with GNU patch (checks/gpu/series.py).
    nativeBuildInputs = [
      runner
      gcc
      gnupatch
      coreutils
    ];
    passthru = { inherit planFile; };
  } ''
    export HOME="$TMPDIR/home" XDG_CACHE_HOME="$TMPDIR/cache"
    mkdir -p "$HOME" "$XDG_CACHE_HOME" "$out"
    cd "$TMPDIR"
    set +e
    bitexact-gpu-checks run ${lib.escapeShellArgs runArgs} --out "$out/results" > "$out/log" 2>&1
    echo "$?" > "$out/status"
    set -e
    cat "$out/log"
  '';

  # A step's flake check: its verdict in the run, on any builder (it only reads the run's files).
  verdict =
    name:
    runCommand name {
      nativeBuildInputs = [ runner ];
      passthru = {
        description = "step ${name} of bitexact-gpu-checks run";
        inherit run;
      };
    } ''
      if ! bitexact-gpu-checks verdict ${run}/results ${lib.escapeShellArg name}; then
        echo "${name} failed; the run's log, reports and server logs: ${run}" >&2
        tail -n 60 ${run}/log >&2
        exit 1
      fi
      ln -s ${run} "$out"
    '';

  # The references show in the batteries that need them; every other step is a check.
  checkNames = builtins.filter (n: !(lib.hasPrefix "reference-" n)) (batteries.stepNames recipe);
in
{
  checks = lib.genAttrs checkNames verdict;
  inherit run planFile checkNames;

  # `nix run .#record-golden` on the card, from the repository root: the runner's `record` with the
  # baked weights writes checks/golden/<card>/<recipe>.json and its history line, for you to commit.
  # Arguments go to each record command (e.g. --force, --build-id "$(git rev-parse HEAD)").
  record-golden = writeShellApplication {
    name = "record-golden";
    runtimeInputs = [
      runner
      coreutils
    ];
    text = ''
      if [ ! -f flake.nix ] || [ ! -d checks/golden ]; then
        echo "record-golden: run it from the repository root (it writes checks/golden/)" >&2
        exit 2
      fi
      out=$(mktemp -d -t record-golden.XXXXXX)
      echo "record-golden: reports and the server's log under $out" >&2
      exec bitexact-gpu-checks record ${lib.escapeShellArgs inputs} --golden-dir checks/golden \
        --port "''${RECORD_GOLDEN_PORT:-${toString port}}" --out "$out" -- "$@"
    '';
  };
}
