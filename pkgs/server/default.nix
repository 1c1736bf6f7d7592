# `bitexact-server` (nix run .#server): the launcher in the server's venv, wrapped with the
# environment the launcher contract fixes:
#   BITEXACT_RECIPE      the recipe JSON in the store
#   BITEXACT_DEEP_GEMM   the fenced DeepGEMM store path (the launcher keys SGLANG_DG_CACHE_DIR by it)
#   BITEXACT_CUDA_HOME   the locked pip nvcc's CUDA tree (exported as CUDA_HOME: one nvcc for the JITs)
#   BITEXACT_HF_HUB_CACHE  baked weights, when a cache is given (images); otherwise the caller's
#   BITEXACT_SERVER_OUT  this derivation's store path (`bitexact-server --build-info` names the build by it)
# and a C compiler on PATH for Triton's launcher stubs (and nvcc's host compiler). The NVIDIA driver is
# not looked for here: the launcher finds it on the host (gpuhost.driver: NixOS, the container toolkit,
# FHS distributions, BITEXACT_DRIVER_LIB) and gives the server LD_LIBRARY_PATH and TRITON_LIBCUDA_PATH
# before it starts. `bitexact-driver` (bin/) shows what it finds, or runs a command with it.
{
  lib,
  runCommand,
  makeWrapper,
  gcc14,
  serverEnv,
  recipePath,
  hfHubCache ? null,
}:
let
  inherit (serverEnv) python pythonSet;
  venv = serverEnv.mkEnv "bitexact-server-venv" { exactlaunch = [ ]; };
  cudaHome = import ./cuda-home.nix {
    inherit lib runCommand python pythonSet;
  };
  deepGemm = pythonSet.sgl-deep-gemm;
in
runCommand "bitexact-server"
  {
    nativeBuildInputs = [ makeWrapper ];
    passthru = {
      inherit venv cudaHome deepGemm;
      inherit (pythonSet) sglang;
    };
    meta.mainProgram = "bitexact-server";
  }
  ''
    mkdir -p $out/bin
    makeWrapper ${venv}/bin/bitexact-server $out/bin/bitexact-server \
      --set BITEXACT_RECIPE ${recipePath} \
      --set BITEXACT_DEEP_GEMM ${deepGemm} \
      --set BITEXACT_CUDA_HOME ${cudaHome} \
      --set BITEXACT_SERVER_OUT "$out" \
      ${lib.optionalString (hfHubCache != null) "--set BITEXACT_HF_HUB_CACHE ${hfHubCache}"} \
      --prefix PATH : ${lib.makeBinPath [ gcc14 ]}
    ln -s ${venv}/bin/bitexact-driver $out/bin/bitexact-driver
  ''
