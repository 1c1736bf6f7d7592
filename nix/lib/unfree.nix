# Which unfree packages nixpkgs may evaluate: NVIDIA/CUDA ones only, by name (builtins only).
# nixpkgs is imported with this predicate instead of allowUnfree, and without cudaSupport: the
# server's CUDA code comes from locked wheels, so nothing else needs rebuilding for CUDA.
let
  inherit (builtins) any match;
  patterns = [
    "cuda.*"
    "libcu.*"
    "libnv.*"
    "libnpp.*"
    "nvidia.*"
    "cudnn.*"
    "nccl.*"
    "cutensor.*"
    "tensorrt.*"
  ];
in
{
  allowed = name: any (p: match p name != null) patterns;
}
