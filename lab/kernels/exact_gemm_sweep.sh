#!/usr/bin/env bash
# Patch 0005's tile sweep on a lent card, after `lab/card/host.sh stash` and `build` (trees and deps under $E2E_WORK).
#   bash lab/kernels/exact_gemm_sweep.sh sweep [lab.kernels.bench_exact_gemm options]
#        the sweep on the patched tree: $OUT/sweep/{progress.jsonl, exact-gemm-*.json, summary.txt}
#   bash lab/kernels/exact_gemm_sweep.sh fit
#        the rule fitted to that table written into this checkout's patch 0005 (also $OUT and
#        $E2E_WORK/0005-fitted.patch), then the patched tree rebuilt from the wheel with it
#   bash lab/kernels/exact_gemm_sweep.sh checks [pytest options]
#        checks/gpu on the patched tree, the stock tree given for the dispatch comparison:
#        $OUT/pytest.log, $OUT/junit.xml
# docs/kernels.md has the call plan. DeepGEMM stays off as in the e2e runs (docs/e2e.md).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
work=${E2E_WORK:-/tmp/bitexact-e2e}
py=${PYTHON:-python3}
out=${OUT:?OUT: the folder whose files come back}
step=${1:?step: sweep, fit or checks}
shift
for tree in patched stock; do
  [ -d "$work/$tree/sglang" ] || { echo "exact_gemm_sweep: $work/$tree missing: run lab/card/host.sh stash and build first" >&2; exit 2; }
done
export PYTHONUNBUFFERED=1 SGLANG_ENABLE_JIT_DEEPGEMM=0
# SGLang's utilities import msgspec and friends at module level: the assembled deps come after the tree.
# The kernel checks' harness (sglang_tree, exact_gemm_table, ...) goes into deps too, as installed modules.
"$py" -m lab.card.product --harness "$work/deps" || exit 2
export PYTHONPATH="$work/deps${PYTHONPATH:+:$PYTHONPATH}"
table() { ls "$work"/exact-gemm-sweep/exact-gemm-sm*.json 2>/dev/null | head -n 1; }
case "$step" in
  sweep)
    mkdir -p "$out/sweep" "$work/exact-gemm-sweep"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
    BITEXACT_SGLANG_TREE="$work/patched" "$py" -m lab.kernels.bench_exact_gemm --out "$work/exact-gemm-sweep" "$@" \
      >"$work/exact-gemm-sweep/sweep.log" 2>&1
    status=$?
    cp "$work"/exact-gemm-sweep/{progress.jsonl,summary.txt,sweep.log} "$out/sweep/" 2>/dev/null
    [ -n "$(table)" ] && cp "$(table)" "$out/sweep/"
    tail -n 60 "$work/exact-gemm-sweep/sweep.log"
    exit $status ;;
  fit)
    [ -n "$(table)" ] || { echo "exact_gemm_sweep: no sweep table under $work/exact-gemm-sweep: run the sweep step" >&2; exit 2; }
    "$py" checks/gpu/exact_gemm_table.py set-rule "$(table)" || exit 2
    cp patches/sglang/0005-exact-gemm-route.patch "$work/0005-fitted.patch"
    cp patches/sglang/0005-exact-gemm-route.patch "$out/"
    rm -rf "$work/patched"
    "$py" -m lab.card.assemble build --wheels "$work"/wheels/* --work "$work" >"$out/rebuild.log" 2>&1
    status=$?
    grep -n "exact-gemm\|bitexact_manifest" "$out/rebuild.log" | head -n 5
    BITEXACT_SGLANG_TREE="$work/patched" "$py" checks/gpu/exact_gemm_table.py summary "$(table)" 2>&1 | tail -n 20
    exit $status ;;
  checks)
    BITEXACT_SGLANG_TREE="$work/patched" BITEXACT_SGLANG_STOCK_TREE="$work/stock" \
      "$py" -m pytest --import-mode=prepend -p no:cacheprovider -rs -q --junitxml="$out/junit.xml" "$@" checks/gpu \
      >"$out/pytest.log" 2>&1
    status=$?
    tail -n 40 "$out/pytest.log"
    exit $status ;;
  *)
    echo "exact_gemm_sweep: unknown step $step" >&2
    exit 2 ;;
esac
