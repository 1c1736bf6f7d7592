{
  description = "Bit-exact SGLang: one published exact-inference recipe, rebuilt with every input pinned";

  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";
    pyproject-nix = {
      url = "github:pyproject-nix/pyproject.nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };
    uv2nix = {
      url = "github:pyproject-nix/uv2nix";
      inputs.pyproject-nix.follows = "pyproject-nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };
    pyproject-build-systems = {
      url = "github:pyproject-nix/build-system-pkgs";
      inputs.pyproject-nix.follows = "pyproject-nix";
      inputs.uv2nix.follows = "uv2nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };
    # No `follows`: nix2container's skopeo patch and nix2container-bin's vendorHash are tested against
    # the nixpkgs of its own flake.lock (the patch has broken on newer skopeo before), so it keeps it.
    nix2container.url = "github:nlewo/nix2container";
  };

  # Everything else lives in nix/: builtins-only logic in nix/lib, nixpkgs-facing outputs in
  # nix/outputs.nix.
  outputs = inputs: import ./nix/outputs.nix inputs;
}
