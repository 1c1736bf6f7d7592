# The GPU flake checks, in the shape nix/outputs.nix calls: an attribute set of derivations, each
# with requiredSystemFeatures = [ "cuda" ]. The builder is ./gpu-checks-build.nix; the batteries are
# data in ./lib/gpu-batteries.nix. The record-golden app rides along as passthru.recordGolden of the
# gpu-golden check (apps.record-golden = lib.getExe checks.gpu-golden.recordGolden).
{
  pkgs,
  recipe,
  mkServer,
  packages,
  ...
}:
let
  server = mkServer { };
  inherit (server.passthru) venv sglang;
  # checks/gpu runs on the server venv's interpreter (its torch and triton) with pytest from nixpkgs
  # for the same Python minor version.
  kernelPython = pkgs.writeShellScriptBin "python" ''
    export PYTHONPATH=${pkgs.python312.pkgs.makePythonPath [ pkgs.python312.pkgs.pytest ]}''${PYTHONPATH:+:$PYTHONPATH}
    exec ${venv}/bin/python "$@"
  '';
  bitexactPackage =
    packages.bitexact
      or (throw "gpu-checks: packages.bitexact is missing (checks/bitexact/package.nix provides it)");
  # bitexact (pure Python) on the server venv's interpreter: the long-prompt reference tokenizes its
  # text with the model's own tokenizer (`--tokenizer <snapshot>`), through the server's transformers.
  bitexact = pkgs.writeShellScriptBin "bitexact" ''
    export PYTHONPATH=${bitexactPackage}/${pkgs.python3.sitePackages}''${PYTHONPATH:+:$PYTHONPATH}
    exec ${venv}/bin/python -m bitexact "$@"
  '';
  built = pkgs.callPackage ./gpu-checks-build.nix {
    inherit
      recipe
      server
      kernelPython
      bitexact
      ;
    recipeFile = ./recipes + "/${recipe.name}.json";
    weights = pkgs.callPackage ../pkgs/weights { inherit recipe; };
    sglangTree = "${sglang}/${pkgs.python312.sitePackages}";
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
