# GPU flake checks and the record-golden app. Every check here asks for the `cuda` system feature
# (as nixpkgs' GPU tests do); a builder without it refuses the derivation, so hosts without a GPU
# build `cpu-checks` instead (docs/gpu-checks.md: how to offer the feature to the sandbox).
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
  # `bitexact-server` in bin/ (.#server), the bitexact CLI (pkgs/bitexact/default.nix), and the
  # hub cache with the recipe's weights (pkgs/weights).
  server,
  bitexact,
  weights,
  # Kernel checks (checks/gpu): a Python in which torch, triton and pytest import, and the patched
  # SGLang site-packages tree (the directory holding sglang/). Null leaves the kernel check out.
  kernelPython ? null,
  sglangTree ? null,
  # The repository's checks/ directory (for checks/gpu and checks/golden), and the SGLang series
  # (checks/gpu/prefill_harness.py takes 0006 off a copy of the tree's kernel for its reference).
  checksDir ? ../checks,
  seriesDir ? ../patches/sglang,
  port ? 30000,
}:
let
  plan = import ./lib/gpu-batteries.nix;
  hf = import ./lib/hf-cache.nix;

  model = lib.findFirst (m: m.repo == recipe.model.repo) (throw "gpu-checks: no manifest for ${recipe.model.repo}") weights.manifests;

  goldenDir = checksDir + "/golden";

  url = "sglang+http://127.0.0.1:${toString port}";

  # What a step that starts the server needs.
  serverAttrs = {
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
  # in the sandbox: each step compiles DeepGEMM/Triton/FlashInfer kernels once.
  withServer = variant: body: ''
    # The build as the launcher describes it, for the history lines `golden check` writes.
    bitexact-server --build-info > "$out/build-info.json"
    export BITEXACT_BUILD_INFO="$out/build-info.json"
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
    ${body}
  '';

  runCommands =
    values: commands:
    lib.concatMapStrings (command: ''
      echo "+ ${lib.escapeShellArgs (plan.fill values command)}" >&2
      ${lib.escapeShellArgs (plan.fill values command)}
    '') commands;

  values = ref: refLong: out: {
    inherit url ref refLong;
    recipe = "${recipeFile}";
    goldenDir = "${goldenDir}";
    inherit out;
    modelSnapshot = "${weights}/${hf.snapshotDir model}";
  };

  # One step on the GPU: `body` runs in a subshell of its own (set -e; its EXIT trap stops the
  # server, leaving stdenv's handler alone) in $out (commands name it "."); its exit status goes to
  # $out/status and its output to $out/log instead of failing the build, so that one difference does
  # not keep the later steps from running. The checks below turn statuses into pass or fail.
  # `after` (the previous step) chains the steps: one card holds one 27B server at the recipe's
  # memory fraction, so no two steps may run at once, whatever max-jobs is.
  mkRun =
    name: attrs: after: body:
    runCommand "${name}-run" (
      attrs
      // {
        requiredSystemFeatures = [ "cuda" ];
        after = if after == null then "" else "${after}";
      }
    ) ''
      export HOME="$TMPDIR/home" XDG_CACHE_HOME="$TMPDIR/cache"
      # No host binary runs here: bitexact-server finds the driver the sandbox offers
      # (/run/opengl-driver/lib) itself, and bitexact reads the card (golden records are per card)
      # through NVML from the same directory (gpuhost, docs/gpu-runtime.md).
      mkdir -p "$HOME" "$XDG_CACHE_HOME" "$out"
      cd "$out"
      # Not `( ... ) || status=$?`: bash ignores set -e inside a subshell whose status is tested.
      set +e
      (
        set -euo pipefail
        ${body}
      ) > "$out/log" 2>&1
      status=$?
      set -e
      cat "$out/log"
      echo "$status" > "$out/status"
    '';

  # Refuse early (status 2) when a step's reference could not be recorded.
  needReference = ref: ''
    if [ "$(cat ${ref}/status)" != 0 ]; then
      echo "the no-spec reference could not be recorded; see ${ref}/log" >&2
      exit 2
    fi
  '';

  # checks/gpu under pytest against the patched tree. A skipped test would make this pass without
  # proving anything, so the JUnit report must show tests run and none skipped.
  kernelsBody = ''
    export TRITON_CACHE_DIR="$TMPDIR/triton"
    cp -r ${checksDir + "/gpu"} "$TMPDIR/gpu"
    chmod -R u+w "$TMPDIR/gpu"
    # torch and triton need the driver on the library path from the process's start (torch caches
    # whether CUDA is there) and TRITON_LIBCUDA_PATH (triton otherwise runs /sbin/ldconfig): the
    # launcher's driver discovery sets both and execs the command.
    ${server}/bin/bitexact-driver exec \
      python -m pytest -p no:cacheprovider --import-mode=importlib -ra --junitxml="$out/junit.xml" "$TMPDIR/gpu"
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
  kernelsAttrs = {
    # Triton compiles its launcher stubs with a host C compiler.
    nativeBuildInputs = [
      kernelPython
      gcc
    ];
    BITEXACT_SGLANG_TREE = "${sglangTree}";
    BITEXACT_SGLANG_SERIES = "${seriesDir}";
  };
  withKernels = kernelPython != null && sglangTree != null;

  # The steps in the order they run: kernels, the two references, then the batteries.
  steps =
    lib.optional withKernels {
      name = "gpu-kernels";
      what = "checks/gpu on the built, patched SGLang, no test skipped";
      attrs = kernelsAttrs;
      body = _: kernelsBody;
    }
    ++ map (r: {
      inherit (r) name;
      what = "the no-spec server's outputs, recorded as the reference";
      attrs = serverAttrs;
      body = _: withServer r.variant (runCommands (values null null ".") r.commands);
    }) (builtins.attrValues plan.references)
    ++ map (b: {
      inherit (b) name what;
      attrs = serverAttrs;
      body =
        runs:
        let
          ref = runs.${plan.references.${b.reference}.name};
          # A capacity battery of chunk sizes checks the long prompts too (against the long reference).
          long = b.longReference or false;
          refLong = runs.${plan.references.long.name};
        in
        (if b.reference == null then "" else needReference ref)
        + (if long then needReference refLong else "")
        + withServer b.variant (
          runCommands (values (if b.reference == null then null else "${ref}/reference.json") (
            if long then "${refLong}/reference.json" else null
          ) ".") b.commands
        );
    }) (plan.batteries recipe);

  # name -> run derivation, each chained after the one before it.
  runs = builtins.listToAttrs (
    builtins.genList (
      i:
      let
        step = builtins.elemAt steps i;
        after = if i == 0 then null else runs.${(builtins.elemAt steps (i - 1)).name};
      in
      lib.nameValuePair step.name (mkRun step.name step.attrs after (step.body runs))
    ) (builtins.length steps)
  );

  # The flake check of a step: passes when its run's status is 0; shows the end of its log otherwise.
  # It only reads the run's files, so it asks for no GPU (the run it depends on does).
  verdict =
    step:
    runCommand step.name
      {
        passthru = {
          description = step.what;
          run = runs.${step.name};
        };
      }
      ''
        status=$(cat ${runs.${step.name}}/status)
        if [ "$status" != 0 ]; then
          echo "${step.name} failed (exit $status); its log, reports and server log: ${runs.${step.name}}" >&2
          tail -n 60 ${runs.${step.name}}/log >&2
          exit 1
        fi
        ln -s ${runs.${step.name}} "$out"
      '';

  # The record commands' placeholders, as shell text: $port and $info are the app's own variables.
  recordValues = {
    url = "sglang+http://127.0.0.1:$port";
    recipe = "${recipeFile}";
    goldenDir = "checks/golden";
    out = ".";
    modelSnapshot = "${weights}/${hf.snapshotDir model}";
    buildInfo = "$info";
  };
  # Each argument double-quoted, so that $port and $info expand and nothing splits; an argument that
  # could end the quoting is refused at evaluation.
  shellLine =
    command:
    builtins.concatStringsSep " " (
      map (
        arg:
        if builtins.match ".*[\"\\`].*" arg != null then
          throw "record-golden: the argument ${arg} cannot be double-quoted in the app's script"
        else
          "\"${arg}\""
      ) command
    );
in
{
  # References are steps (they run on the card) but not checks of their own: a failed reference shows
  # in every battery that needs it.
  checks = builtins.listToAttrs (
    map (step: lib.nameValuePair step.name (verdict step)) (
      builtins.filter (step: !(lib.hasPrefix "reference-" step.name)) steps
    )
  );
  inherit runs;

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
      # The build (its store path, SGLang and its series, torch, triton, the driver) for the history.
      info=$(mktemp -t record-golden-build.XXXXXX)
      bitexact-server --build-info > "$info"
      # The plan's record commands (the prompts, then the long prompts keyed <recipe>-long); "$@": e.g.
      # --force to replace a golden already recorded for this card, --build-id "$(git rev-parse HEAD)".
      ${builtins.concatStringsSep "\n" (
        map (command: "${shellLine (plan.fill recordValues command)} \"$@\"") plan.goldenRecord.commands
      )}
      echo "record-golden: commit the new goldens and their history under checks/golden/" >&2
    '';
  };
}
