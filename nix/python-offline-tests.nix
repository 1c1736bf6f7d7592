# The offline suite's tests that need neither network nor Nix (checks/offline/checkhelpers/sandbox_selection.py,
# markers in checks/offline/checkhelpers/markers.py), run with nixpkgs' Python as a CPU flake check, in an environment of
# nixpkgs' packages and the repository's own projects built as packages. The source and the package
# lists are builtins-only, so checks/offline/test_sandbox_selection.py evaluates them with the
# real Nix and runs the selection over exactly this source, without network and without Nix.
let
  # The pages (README.md, docs/*.md) and, of each evidence folder, its claims.json and its results.md
  # where it has one, never its raw results: checks/offline/test_evidence_claims.py checks the claims
  # against the pages here, and against the raw files (marked `evidence`) in a full checkout.
  names = dir: builtins.attrNames (builtins.readDir dir);
  kind = dir: name: (builtins.readDir dir).${name};
  pages = map (n: "docs/${n}") (
    builtins.filter (n: kind ../docs n == "regular" && builtins.match ".*\\.md" n != null) (names ../docs)
  );
  folders = builtins.filter (n: kind ../docs/evidence n == "directory") (names ../docs/evidence);
  claimsOf =
    folder:
    let
      here = ../docs/evidence + "/${folder}";
    in
    if !builtins.pathExists (here + "/claims.json") then
      throw "docs/evidence/${folder} has no claims.json: every evidence folder carries the figures the pages quote from it (docs/evidence/README.md)"
    else
      [ "docs/evidence/${folder}/claims.json" ]
      ++ (
        if builtins.pathExists (here + "/results.md") then [ "docs/evidence/${folder}/results.md" ] else [ ]
      );
  evidence = builtins.concatMap claimsOf folders;
  include = [
    "README.md"
    "checks/golden/families.json"
    "checks/golden/h200/e2e-tiny-hybrid.json"
    "checks/golden/h200/e2e-tiny-hybrid-long.json"
    "checks/golden/h200/perf-27b-shape.json"
    "checks/golden/h200/perf-27b-shape-long.json"
    "checks/golden/h100-sxm5-80gb/perf-27b-shape.json"
    "checks/golden/h100-sxm5-80gb/perf-27b-shape-long.json"
    "checks/offline"
    "pkgs/bitexact/src"
    "pkgs/formats/src"
    "pkgs/gpuhost/src"
    "pkgs/gpu-checks/src"
    "checks/gpu"
    "checks/plans"
    "images/entrypoint/src"
    "images/layer_sizes.py"
    "nix/recipes"
    "nix/tools"
    "patches"
    "pkgs/lock/src"
    "pkgs/server/src"
    "pkgs/server-env"
  ]
  ++ pages
  ++ evidence;
  source = import ./lib/source-subset.nix {
    root = ../.;
    name = "python-offline-tests-source";
    inherit include;
  };
  # The repository's own projects, each a Python package built from its folder by the one local-package
  # function (./local-python-package.nix), as checks/offline/run.sh installs them: the tests import them
  # installed, never from the source tree. Folders relative to the repository root.
  localProjects = [
    "pkgs/formats"
    "pkgs/gpuhost"
    "pkgs/bitexact"
    "pkgs/server"
    "pkgs/lock"
    "pkgs/gpu-checks"
    "images/entrypoint"
    "nix/tools"
    "checks/gpu"
  ]
  # The offline tests' helpers (package checkhelpers), from the branch that makes them a project.
  ++ (if builtins.pathExists ../checks/offline/pyproject.toml then [ "checks/offline" ] else [ ]);
  # What each project's build reads, where it is not pyproject.toml and src/ (nor the listed flat modules).
  projectFiles = {
    "checks/offline" = [
      "pyproject.toml"
      "checkhelpers"
    ];
  };
  project =
    folder:
    import ./local-python-package.nix {
      root = ../. + "/${folder}";
      files = projectFiles.${folder} or null;
    };
  # The local projects built in the package set `ps`, by project name (each one's dependencies on another
  # come from this set, the rest from `ps`).
  localPackages =
    ps:
    let
      built = builtins.listToAttrs (
        map (
          folder:
          let
            p = project folder;
          in
          {
            name = p.pname;
            value = p.nixpkgs ps built { };
          }
        ) localProjects
      );
    in
    built;
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
  inherit
    source
    include
    pythonPackages
    localProjects
    localPackages
    ;

  check =
    {
      runCommand,
      python3,
      git,
    }:
    runCommand "python-offline-tests"
      {
        # git: the lock tool's tests build throwaway repositories; patch, tar and cc (the driver stand-ins
        # of checks/offline/checkhelpers/driver_standins.py are compiled) come with stdenv. The lab (lab/)
        # and its tests are not in the source: the flake checks the product.
        nativeBuildInputs = [
          (python3.withPackages (
            ps: map (name: ps.${name}) pythonPackages ++ builtins.attrValues (localPackages ps)
          ))
          git
        ];
      }
      ''
        set -o pipefail
        export HOME=$TMPDIR PYTHONDONTWRITEBYTECODE=1
        cd ${source}
        python -m checkhelpers.sandbox_selection -q 2>&1 | tee $TMPDIR/log
        tail -n 1 $TMPDIR/log > $out
      '';
}
