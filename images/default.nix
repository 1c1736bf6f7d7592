# The image outputs, in the shape nix/outputs.nix calls: { image, image-dev } plus the weights they
# bake (`weights`, an HF hub cache in the store) and `seed-weights` (fills the store from an existing
# hub cache instead of downloading). The builder is ./image.nix; the weights are ../pkgs/weights.
{
  pkgs,
  recipe,
  mkServer,
  nix2container,
  ...
}:
let
  recipeFile = ../nix/recipes + "/${recipe.name}.json";
  # Plain server (no weights in its wrapper): a weights change must not rebuild the server layer.
  server = mkServer { };
  weights = pkgs.callPackage ../pkgs/weights { inherit recipe; };
  build =
    args:
    pkgs.callPackage ./image.nix (
      {
        inherit recipe recipeFile server nix2container;
        # The launcher's venv: exactlaunch, sglang and deep_gemm import there, so the preflight sees
        # the very files the server loads.
        python = server.passthru.venv;
      }
      // args
    );
in
{
  image = build { inherit weights; };
  image-dev = build {
    weights = null;
    name = "bitexact-sglang-dev";
  };
  inherit weights;
  seed-weights = weights.seed;
}
