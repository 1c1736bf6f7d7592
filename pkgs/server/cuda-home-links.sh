#!/usr/bin/env bash
# The names a CUDA toolkit's tree has and the pip CUDA wheels' merged tree lacks, added to CUDA_HOME
# (pkgs/server/cuda-home.nix runs this on $out; checks/offline/test_cuda_home.py on a tree from the real
# nvidia-cuda-runtime wheel). FlashInfer 0.6.18 links each JIT op with
#   -L$cuda_home/lib64 -L$cuda_home/lib64/stubs -lcudart -lcuda
# (flashinfer/jit/cpp_ext.py, generate_ninja_build_for_op; docs/gpu-runtime.md), so it needs:
#   lib64                 the toolkit's name for lib/ (the wheels install lib/ only)
#   lib/libcudart.so      the link-time name of the runtime (the wheel ships libcudart.so.13 only)
#   lib/stubs/libcuda.so  a link-time stand-in for the driver, as the toolkit's stub is: soname
#                         libcuda.so.1 and every driver API function cuda.h declares (after its
#                         _v2/_v3 renames), so that ld records the op's need of libcuda.so.1 even when
#                         it links --as-needed (Debian's gcc does). The stub is never loaded: at run
#                         time libcuda.so.1 is the host's driver, on the path driver discovery exports.
# Usage: cuda-home-links.sh CUDA_HOME   (CC names the C compiler; default cc)
set -euo pipefail
home=$1
cc=${CC:-cc}

[ -e "$home/lib64" ] || ln -s lib "$home/lib64"

shopt -s nullglob
runtimes=("$home"/lib/libcudart.so.[0-9]*)
if [ ${#runtimes[@]} -ne 1 ]; then
  echo "cuda-home-links: expected one libcudart.so.N in $home/lib, found ${#runtimes[@]}" >&2
  exit 1
fi
[ -e "$home/lib/libcudart.so" ] || ln -s "$(basename "${runtimes[0]}")" "$home/lib/libcudart.so"

mkdir -p "$home/lib/stubs"
if [ ! -e "$home/lib/stubs/libcuda.so" ]; then
  names=$(printf '#include <cuda.h>\n' | "$cc" -E -P -I"$home/include" -x c - |
    grep -oE 'CUresult +cu[A-Za-z0-9_]+ *\(' | sed -E 's/^CUresult +//; s/ *\($//' | sort -u)
  if [ -z "$names" ]; then
    echo "cuda-home-links: no driver API functions found in $home/include/cuda.h" >&2
    exit 1
  fi
  # 999 is CUDA_ERROR_UNKNOWN; nothing calls the stub.
  for name in $names; do printf 'int %s(void) { return 999; }\n' "$name"; done |
    "$cc" -shared -fPIC -nostdlib -x c - -Wl,-soname,libcuda.so.1 -o "$home/lib/stubs/libcuda.so"
fi
