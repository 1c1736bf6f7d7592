# The project's pure Nix logic: builtins only, no nixpkgs, so it evaluates (and is tested)
# anywhere Nix runs. nixpkgs-facing code (pkgs/*, nix/outputs.nix) calls into it; the flake
# exports it as `lib`.
{
  recipe = import ./recipe.nix;
  pins = import ./pins.nix;
  cargo = import ./cargo.nix;
  patches = import ./patches.nix;
  unfree = import ./unfree.nix;
  # Per-wheel autoPatchelf / driver-runpath plan from pkgs/server-env/elf-needs.json.
  wheelFixups = import ./wheel-fixups.nix;
  # The weights and image parts (their own tests: checks/offline/test_{hfcache,image}*.py).
  hfCache = import ./hf-cache.nix;
  imagePlan = import ./image-plan.nix;
  gpuBatteries = import ./gpu-batteries.nix;
}
