# GPU flake checks and the record-golden app. Every check here asks for the `cuda` system feature
# (as nixpkgs' GPU tests do); a builder without it refuses the derivation, so hosts without a GPU
# build `cpu-checks` instead (README: how to offer the feature to the sandbox).
#
# The batteries (which variant, against which reference, which bitexact commands) are data in
# nix/lib/gpu-batteries.nix; this file starts servers and runs those commands. A battery passes only
# when every command exits 0 (bitexact: 0 equal, 1 differs, 2 anything else).
{
  lib,
  runCommand,
  writeShellApplication,
  curl,
  coreutils,
  gcc,
  # The parsed recipe and its file (the same one the server's wrapper names).
  recipe,
  recipeFile,
  # `bitexact-server` in bin/ (.#server), the bitexact CLI (checks/bitexact/package.nix), and the
  # hub cache with the recipe's weights (pkgs/weights).
  server,
  bitexact,
  weights,
  # Kernel checks (checks/gpu): a Python in which torch, triton and pytest import, and the patched
  # SGLang site-packages tree (the directory holding sglang/). Null leaves the kernel check out.
  kernelPython ? null,
  sglangTree ? null,
  # The repository's checks/ directory (for checks/gpu and checks/golden).
  checksDir ? ../checks,
  port ? 30000,
}:
let
  plan = import ./lib/gpu-batteries.nix;
  hf = import ./lib/hf-cache.nix;

  model = lib.findFirst (m: m.repo == recipe.model.repo) (throw "gpu-checks: no manifest for ${recipe.model.repo}") weights.manifests;

  goldenDir =
    if builtins.pathExists (checksDir + "/golden") then
      checksDir + "/golden"
    else
      runCommand "no-golden-records" { } "mkdir $out";

  url = "sglang+http://127.0.0.1:${toString port}";

  gpuAttrs = {
    requiredSystemFeatures = [ "cuda" ];
    nativeBuildInputs = [
      server
      bitexact
      curl
      coreutils
    ];
    BITEXACT_HF_HUB_CACHE = "${weights}";
    BITEXACT_RECIPE = "${recipeFile}";
  };

  # Start `variant`'s server, wait until it generates, run `body`, stop it. The JIT caches start empty
  # in the sandbox: each check compiles DeepGEMM/Triton/FlashInfer kernels once.
  withServer = variant: body: ''
    export HOME="$TMPDIR/home" XDG_CACHE_HOME="$TMPDIR/cache"
    # bitexact names the card (golden records are per card) from nvidia-smi; README says how to
    # expose it to the sandbox there.
    export PATH="$PATH:/run/opengl-driver/bin"
    mkdir -p "$HOME" "$XDG_CACHE_HOME" "$out"
    # A subshell of its own, so its EXIT trap (stop the server) leaves stdenv's handler alone.
    (
      set -euo pipefail
      bitexact-server --variant ${lib.escapeShellArg variant} --host 127.0.0.1 --port ${toString port} \
        > "$out/server-${variant}.log" 2>&1 &
      server_pid=$!
      trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT
      ready=0
      for _ in $(seq 1 3600); do
        if curl -sf "http://127.0.0.1:${toString port}/health_generate" > /dev/null; then ready=1; break; fi
        if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
        sleep 1
      done
      if [ "$ready" != 1 ]; then
        echo "the ${variant} server did not come up; the end of its log:" >&2
        tail -n 80 "$out/server-${variant}.log" >&2
        exit 2
      fi
      # Reports and records go to $out (commands name it "."); the first failing command fails the check.
      cd "$out"
      ${body}
    )
  '';

  runCommands =
    values: commands:
    lib.concatMapStrings (command: ''
      echo "+ ${lib.escapeShellArgs (plan.fill values command)}" >&2
      ${lib.escapeShellArgs (plan.fill values command)}
    '') commands;

  values = ref: out: {
    inherit url ref;
    recipe = "${recipeFile}";
    goldenDir = "${goldenDir}";
    inherit out;
    modelSnapshot = "${weights}/${hf.snapshotDir model}";
  };

  references = builtins.mapAttrs (
    _: r:
    runCommand r.name gpuAttrs (withServer r.variant (runCommands (values null ".") r.commands))
  ) plan.references;

  batteries = map (
    b:
    lib.nameValuePair b.name (
      runCommand b.name (gpuAttrs // { passthru.description = b.what; }) (
        withServer b.variant (
          runCommands (values (
            if b.reference == null then null else "${references.${b.reference}}/reference.json"
          ) ".") b.commands
        )
      )
    )
  ) (plan.batteries recipe);

  # checks/gpu under pytest against the patched tree. A skipped test would make this pass without
  # proving anything, so the JUnit report must show tests run and none skipped.
  kernels = runCommand "gpu-kernels" {
    requiredSystemFeatures = [ "cuda" ];
    # Triton compiles its launcher stubs with a host C compiler.
    nativeBuildInputs = [
      kernelPython
      gcc
    ];
    BITEXACT_SGLANG_TREE = "${sglangTree}";
  } ''
    export HOME="$TMPDIR/home" TRITON_CACHE_DIR="$TMPDIR/triton"
    if [ -e /run/opengl-driver/lib/libcuda.so.1 ]; then export TRITON_LIBCUDA_PATH=/run/opengl-driver/lib; fi
    mkdir -p "$HOME" "$out"
    cp -r ${checksDir + "/gpu"} gpu
    chmod -R u+w gpu
    python -m pytest -p no:cacheprovider --import-mode=importlib -ra --junitxml="$out/junit.xml" gpu
    python - "$out/junit.xml" <<'EOF'
    import sys, xml.etree.ElementTree as ET
    root = ET.parse(sys.argv[1]).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    tests = sum(int(s.get("tests", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    if tests == 0 or skipped:
        sys.exit(f"gpu-kernels: {tests} tests, {skipped} skipped: on a GPU builder every kernel test must run")
    EOF
  '';
in
{
  checks =
    builtins.listToAttrs batteries
    // lib.optionalAttrs (kernelPython != null && sglangTree != null) { gpu-kernels = kernels; };

  # `nix run .#record-golden` on the card to record (from the repository root): starts the recipe's
  # server with the baked weights and writes checks/golden/<card>/<recipe>.json for you to commit.
  record-golden = writeShellApplication {
    name = "record-golden";
    runtimeInputs = [
      server
      bitexact
      curl
      coreutils
    ];
    text = ''
      if [ ! -f flake.nix ] || [ ! -d checks ]; then
        echo "record-golden: run it from the repository root (it writes checks/golden/)" >&2
        exit 2
      fi
      export BITEXACT_HF_HUB_CACHE=${weights} BITEXACT_RECIPE=${recipeFile}
      port=''${RECORD_GOLDEN_PORT:-${toString port}}
      log=$(mktemp -t record-golden-server.XXXXXX)
      bitexact-server --variant recipe --host 127.0.0.1 --port "$port" > "$log" 2>&1 &
      server_pid=$!
      trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT
      echo "record-golden: waiting for the server (log: $log)" >&2
      until curl -sf "http://127.0.0.1:$port/health_generate" > /dev/null; do
        if ! kill -0 "$server_pid" 2>/dev/null; then tail -n 80 "$log" >&2; exit 2; fi
        sleep 2
      done
      bitexact golden record "sglang+http://127.0.0.1:$port" --recipe ${recipeFile} --variant recipe \
        --golden-dir checks/golden --build-id ${server}
      echo "record-golden: commit the new file under checks/golden/" >&2
    '';
  };
}
