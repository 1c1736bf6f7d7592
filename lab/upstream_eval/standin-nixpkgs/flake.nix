# The stand-in nixpkgs as a flake (lab/upstream_eval overrides the `nixpkgs` inputs with it): nixpkgs'
# real lib (copied to ./lib from a nix-community/nixpkgs.lib snapshot) and the stand-in packages of
# ./default.nix, in the output shape of nixpkgs' own flake.nix (`lib`, `legacyPackages`).
{
  description = "stand-in nixpkgs for lab/upstream_eval: nixpkgs' lib, evaluation-only packages";

  outputs =
    { self }:
    {
      lib = import ./lib;
      legacyPackages.x86_64-linux = import ./. { system = "x86_64-linux"; };
    };
}
