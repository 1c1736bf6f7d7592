# The image outputs, in the shape nix/outputs.nix calls: { image, image-dev } plus the weights they
# bake (`weights`, an HF hub cache in the store), `seed-weights` (fills the store from an existing
# hub cache instead of downloading) and `image-layer-sizes` (every built layer against the cap). The builder is ./image.nix; the weights are ../pkgs/weights.
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
  image = build { inherit weights; };
  plan = import ../nix/lib/image-plan.nix;
in
{
  inherit image;
  # Builds the image description and checks every built layer against the cap (the server closure's
  # layers are only known once built).
  image-layer-sizes = pkgs.runCommand "image-layer-sizes" { nativeBuildInputs = [ pkgs.python3 ]; } ''
    python3 ${./layer_sizes.py} --cap ${toString plan.defaultCapBytes} ${image} | tee $out
  '';
  image-dev = build {
    weights = null;
    name = "bitexact-sglang-dev";
  };
  inherit weights;
  seed-weights = weights.seed;
}
