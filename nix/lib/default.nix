# The project's pure Nix logic: builtins only, no nixpkgs, so it evaluates (and is tested)
# anywhere Nix runs. nixpkgs-facing code (pkgs/*, nix/outputs.nix) calls into it.
{
  recipe = import ./recipe.nix;
  pins = import ./pins.nix;
  cargo = import ./cargo.nix;
  patches = import ./patches.nix;
  unfree = import ./unfree.nix;
}
