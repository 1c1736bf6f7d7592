#!/usr/bin/env bash
# Third H200 call (2026-11-30): `bitexact bench` on the larger random model (12 x 1536, vocab 32000) with
# transformers on CUDA. Run from the repository root: `bash docs/evidence/bitexact-h200-2026-11-30/scripts/device_bench.sh`;
# `DEV=cpu L1=64,256 N1=8 L2=512 N2=4` is the CPU dry run. Results land in $OUT (default /tmp/bx/out).
set -o pipefail
export PYTHONPATH=checks/bitexact/src:docs/evidence/bitexact-h200-2026-11-30/scripts PYTHONUNBUFFERED=1
dev=${DEV:-cuda}
out=${OUT:-/tmp/bx/out}
mkdir -p "$out"
python3 -c "
from pathlib import Path
from device_batteries import make_model
small = '$dev' == 'cpu'
make_model(Path('/tmp/bx/large'), layers=2 if small else 12, hidden=128 if small else 1536,
           heads=4 if small else 12, kv=2 if small else 4, vocab=32000, seed=2, device='$dev')
" || exit 2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt" 2>/dev/null
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)" >>"$out/gpu.txt"
engine="hf:/tmp/bx/large?device=$dev"
python3 -m bitexact bench "$engine" --lengths "${L1:-640,2200,8k}" --new-tokens "${N1:-64}" \
  --vocab-size 32000 --warmup 1 --json >"$out/bench-short.json" 2> >(tee "$out/bench-short.err" >&2)
echo "rc short=$?"
python3 -m bitexact bench "$engine" --lengths "${L2:-32k,128k}" --new-tokens "${N2:-32}" \
  --vocab-size 32000 --warmup 0 --json >"$out/bench-long.json" 2> >(tee "$out/bench-long.err" >&2)
echo "rc long=$?"
