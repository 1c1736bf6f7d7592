# CUDA_HOME for the run-time JIT compilers (DeepGEMM, FlashInfer): the locked pip CUDA wheels'
# nvidia/cu13 trees merged into one directory, as pip lays them out in one site-packages.
#
# nvcc finds cicc, its headers and libraries relative to its own resolved location (nvcc.profile's
# $(TOP)), so the programs and nvcc.profile are copied while everything else is linked: with plain
# symlinks $(TOP) would be the nvcc wheel's store path, which holds neither nvvm/ nor the headers.
# ./cuda-home-links.sh then adds the toolkit names FlashInfer's JIT links against (lib64, libcudart.so,
# lib64/stubs/libcuda.so; docs/gpu-runtime.md).
{
  lib,
  runCommand,
  python,
  pythonSet,
}:
let
  # Every wheel of the lock with files under nvidia/cu13 (see the uv.lock file lists).
  wheels = [
    "nvidia-cuda-nvcc"
    "nvidia-cuda-crt"
    "nvidia-nvvm"
    "nvidia-cuda-runtime"
    "nvidia-cuda-cccl"
    "nvidia-cuda-nvrtc"
    "nvidia-cuda-cupti"
    "nvidia-cuda-nvdisasm"
    "nvidia-cublas"
    "nvidia-cufft"
    "nvidia-cufile"
    "nvidia-curand"
    "nvidia-cusolver"
    "nvidia-cusparse"
    "nvidia-nvjitlink"
    "nvidia-nvtx"
  ];
  trees = map (name: "${pythonSet.${name}}/${python.sitePackages}/nvidia/cu13") wheels;
in
runCommand "bitexact-cuda-home-${pythonSet.nvidia-cuda-nvcc.version}"
  {
    passthru.nvccVersion = pythonSet.nvidia-cuda-nvcc.version;
  }
  ''
    mkdir -p $out
    for tree in ${lib.escapeShellArgs trees}; do
      cp -rs --no-preserve=mode "$tree/." $out/
    done
    for f in $out/bin/* $out/nvvm/bin/*; do
      if [ -L "$f" ]; then
        cp --remove-destination "$(readlink -f "$f")" "$f"
      fi
    done
    bash ${./cuda-home-links.sh} $out
    test -x $out/bin/nvcc
    test -x $out/nvvm/bin/cicc
    test -e $out/include/cuda_runtime.h
    test -e $out/lib64/libcudart.so
    test -e $out/lib64/stubs/libcuda.so
  ''
