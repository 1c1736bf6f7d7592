#!/usr/bin/env bash
# The 27B-shaped servers on a GPU host with no network, after lab/card/host.sh stash and build (docs/performance.md has
# the whole call plan). State lives under $E2E_WORK (trees, deps) and $PERF_RESULTS (results, kept across
# calls while the machine is held); each call packs what it finished into $OUT.
#   bash lab/perf/host.sh model [--layers N]       write the 27B-shaped configs to .e2e/perf-27b
#   bash lab/perf/host.sh measure SERVER [lab.perf.run measure options]
#        SERVER: exact-spec, stock-spec, exact-no-spec or stock-no-spec (lab.perf.run measure --server)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
work=${E2E_WORK:-/tmp/bitexact-e2e}
results=${PERF_RESULTS:-$work/perf-results}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
step=${1:?step: model or measure}
shift
case "$step" in
  model)
    # The estimate reads the card through the product's gpuhost, as lab/card/host.sh build installed it.
    PYTHONPATH="$work/deps" "$py" -m lab.perf.model_27b .e2e/perf-27b "$@" ;;
  measure)
    server=${1:?server: exact-spec, stock-spec, exact-no-spec or stock-no-spec}
    shift
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
    PYTHONPATH="$work/deps" "$py" -m lab.perf.run measure --work "$work" --results "$results" --server "$server" \
      --out "${OUT:?OUT: the folder whose files come back}" "$@"
    status=$?
    cat "$OUT"/perf-*.txt 2>/dev/null
    exit $status ;;
  *)
    echo "perf/host.sh: unknown step $step" >&2
    exit 2 ;;
esac
