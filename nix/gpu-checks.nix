# The GPU flake checks, in the shape nix/outputs.nix calls: an attribute set of derivations, one per step
# of the plan (./lib/gpu-batteries.nix), each the verdict of one run of the runner on the card
# (./gpu-checks-build.nix, whose run asks for the `cuda` feature). The record-golden app rides along as
# passthru.recordGolden of the gpu-golden check (apps.record-golden = lib.getExe checks.gpu-golden.recordGolden).
{
  pkgs,
  recipe,
  mkServer,
  # The same server closure with SGLang as released (no series): the stock tree the plan's stock
  # expectations are checked on.
  mkStockServer,
  packages,
  # The server env's interpreter (pkgs/server-env: python312): pytest, bitexact and the runner are built for it.
  python,
  ...
}:
let
  server = mkServer { };
  stockServer = mkStockServer { };
  inherit (server.passthru) venv sglang;
  # checks/gpu runs on the server venv's interpreter (its torch and triton) with pytest from nixpkgs
  # for the same Python. The venv's site-packages come first on PYTHONPATH, so nixpkgs' pytest and
  # its dependencies (packaging, pluggy, ...) never shadow the venv's own packages.
  kernelPython = pkgs.writeShellScriptBin "python" ''
    export PYTHONPATH=${venv}/${python.sitePackages}:${python.pkgs.makePythonPath [ python.pkgs.pytest ]}''${PYTHONPATH:+:$PYTHONPATH}
    exec ${venv}/bin/python "$@"
  '';
  bitexactPackage =
    packages.bitexact
      or (throw "gpu-checks: packages.bitexact is missing (pkgs/bitexact/default.nix provides it)");
  # bitexact (pure Python, built for the same interpreter) on the server venv's Python: the
  # long-prompt reference tokenizes its text with the model's own tokenizer (`--tokenizer
  # <snapshot>`), through the server's transformers.
  bitexact = pkgs.writeShellScriptBin "bitexact" ''
    export PYTHONPATH=${python.pkgs.makePythonPath [ bitexactPackage ]}''${PYTHONPATH:+:$PYTHONPATH}
    exec ${venv}/bin/python -m bitexact "$@"
  '';
  runnerPackage =
    packages.gpu-checks
      or (throw "gpu-checks: packages.gpu-checks is missing (pkgs/gpu-checks/default.nix provides it)");
  # The runner on the server venv's Python: gpuhost (in the venv) reads the card and finds the driver.
  runner = pkgs.writeShellScriptBin "bitexact-gpu-checks" ''
    export PYTHONPATH=${runnerPackage}/${python.sitePackages}''${PYTHONPATH:+:$PYTHONPATH}
    exec ${venv}/bin/python -m gpuchecks "$@"
  '';
  built = pkgs.callPackage ./gpu-checks-build.nix {
    inherit
      recipe
      server
      stockServer
      runner
      kernelPython
      bitexact
      ;
    recipeFile = ./recipes + "/${recipe.name}.json";
    weights = pkgs.callPackage ../pkgs/weights { inherit recipe; };
    sglangTree = "${sglang}/${python.sitePackages}";
    stockTree = "${stockServer.passthru.sglang}/${python.sitePackages}";
  };
in
built.checks
// {
  gpu-golden = built.checks.gpu-golden.overrideAttrs (old: {
    passthru = (old.passthru or { }) // {
      recordGolden = built.record-golden;
    };
  });
}
