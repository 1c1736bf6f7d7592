#!/usr/bin/env bash
# The small-M route's sweep on a lent card in one call: patch the sglang 0.5.20 wheel's tree with the series, run the
# small-M sweep (bits of every candidate, bandwidth, cuBLAS, the fitted rule), then the route's GPU checks.
# Everything lands in $OUT: sweep.log, summary.txt, progress.jsonl, smallm-sm90-132sm-<L2>mib.json (commit
# it under docs/evidence/smallm-<card>-<date>/), pytest.log. Needs the wheel, carried in the git-ignored .gpu/ folder.
# Usage (repository root): OUT=<dir> bash lab/kernels/smallm_sweep.sh [sweep options]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2

out=${OUT:?set OUT to the folder the results go to}
wheel=${BITEXACT_SGLANG_WHEEL:-.gpu/sglang-0.5.20-cp312-cp312-manylinux_2_34_x86_64.whl}
sweep_limit=${BITEXACT_SWEEP_LIMIT_S:-200}
mkdir -p "$out"
if [ ! -f "$wheel" ]; then
  echo "smallm_sweep: $wheel is missing; carry it (run's carry: [\".gpu\"]) or set BITEXACT_SGLANG_WHEEL" >&2
  exit 2
fi

start=$SECONDS
tree=$(mktemp -d)/site-packages
python -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$wheel" "$tree" || exit 2
for p in patches/sglang/*.patch; do
  patch -d "$tree" -p2 --fuzz=0 --batch --forward --no-backup-if-mismatch -i "$PWD/$p" >>"$out/patch.log" 2>&1 || {
    echo "smallm_sweep: $p does not apply to $wheel (see patch.log)" >&2
    cat "$out/patch.log" >&2
    exit 2
  }
done
# The GPU checks use a tree only with the series' content manifest (exactlaunch.manifest, issue 9).
deps="$tree/../deps"
# The product and the kernel checks' harness, copied into deps (lab.card.product imports none of them).
python -m lab.card.product --harness "$deps" || exit 2
PYTHONPATH="$deps" python -m exactlaunch.manifest write "$tree" --series patches/sglang >>"$out/patch.log" 2>&1 || {
  echo "smallm_sweep: writing the content manifest failed (see patch.log)" >&2
  cat "$out/patch.log" >&2
  exit 2
}
export BITEXACT_SGLANG_TREE=$tree
# SGLang's utilities import msgspec at module level (docs/kernels.md); a host without it gets the wheels
# carried in BITEXACT_GPU_WHEELS (e.g. msgspec's) installed into a private folder first.
if [ -n "${BITEXACT_GPU_WHEELS:-}" ]; then
  python -m pip install --quiet --no-index --no-deps --no-compile --target "$deps" "$BITEXACT_GPU_WHEELS"/*.whl || exit 2
fi
export PYTHONPATH="$deps${PYTHONPATH:+:$PYTHONPATH}"
echo "smallm_sweep: tree ready in $((SECONDS - start))s: $tree" | tee "$out/run.log"

# The sweep first: it compiles every candidate in parallel processes, so the checks below find them cached.
# `timeout` keeps time for the checks; the sweep writes its table after every shape, so a cut run keeps data.
timeout --signal=INT "$sweep_limit" python -m lab.kernels.bench_smallm_sweep --out "$out" "$@" 2>&1 | tee "$out/sweep.log"
sweep=${PIPESTATUS[0]}
echo "smallm_sweep: sweep exit $sweep after $((SECONDS - start))s" | tee -a "$out/run.log"

python -m pytest --import-mode=prepend -p no:cacheprovider -rs -q checks/gpu/test_smallm_route.py 2>&1 | tee "$out/pytest.log"
checks=${PIPESTATUS[0]}
echo "smallm_sweep: checks exit $checks after $((SECONDS - start))s" | tee -a "$out/run.log"
[ "$sweep" -eq 0 ] && [ "$checks" -eq 0 ]
