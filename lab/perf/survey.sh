#!/usr/bin/env bash
# A card's survey on a GPU host without Nix, in the order docs/cards.md asks of a new card: its goldens
# first, then its speed table. After lab/card/host.sh stash/build/model and lab/perf/host.sh model.
# State lives under $E2E_WORK (default /tmp/bitexact-e2e); the survey runs in the background (setsid) and
# outlives the device call that starts it, so the next calls wait for it while the machine is held.
#   bash lab/perf/survey.sh start BUILD_ID   start in the background; returns at once
#   bash lab/perf/survey.sh wait SECONDS     wait until it ends (or SECONDS pass), then collect
#   bash lab/perf/survey.sh collect          $OUT/survey.tar.gz and the log so far
# What runs, each stage resumable (rerun start after a failed stage: finished results are kept):
#   1. the 27B shape's goldens recorded on this card (lab.perf.goldens, its --long 16k);
#   2. the e2e tiny hybrid's gpu-golden step through the runner, against the committed goldens (this
#      card's own, or its family's): lab/card/host.sh run --only gpu-golden;
#   3. the four 27B-shaped servers alone, one after another, at 2200 and 32768 tokens (3 timed runs each:
#      medians), the servers without speculation also at 131072;
#   4. the speculative servers again with --max-running-requests 2, at 131072 (on an 80 GB card the
#      recipe's 8 slots leave too little KV for 131072: python -m lab.perf.model_27b --estimate --card).
# collect and wait exit 0 when the survey is done, 1 while it runs, 3 on a machine without it.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
work=${E2E_WORK:-/tmp/bitexact-e2e}
survey=$work/survey
py=${PYTHON:-python3}
step=${1:?step: start, wait or collect}
shift

stages() {
  local id=$1
  export PYTHONUNBUFFERED=1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
  echo "== 1. the 27B shape's goldens"
  if [ -f "$survey/goldens-27b/results.json" ]; then echo "done before"; else
    PYTHONPATH="$work/deps" "$py" -m lab.perf.goldens --work "$work" --recorded "$survey/recorded" --out "$survey/goldens-27b" \
      --build-id "$id"
    echo "goldens exit $?"
  fi
  echo "== 2. the e2e goldens through the runner"
  if [ -f "$survey/e2e-family/summary.txt" ]; then echo "done before"; else
    GOLDEN_DIR="$survey/e2e-golden" RESULTS="$survey/e2e-family" \
      bash lab/card/host.sh run --only gpu-golden --mem-fraction-static 0.2
    echo "runner exit $?"
  fi
  # The lab imports the product's runner (gpuchecks) as lab/card/host.sh build installed it.
  local measure=(env PYTHONPATH="$work/deps" "$py" -m lab.perf.run measure --work "$work" --no-profile --runs 3 --deadline-s 5400)
  echo "== 3. the speed table at the recipe's settings"
  "${measure[@]}" --results "$work/perf-results" --out "$survey/pack" --server exact-spec --server stock-spec \
    --lengths 2200,32768 --long-lengths ''
  echo "measure (speculative) exit $?"
  "${measure[@]}" --results "$work/perf-results" --out "$survey/pack" --server exact-no-spec \
    --server stock-no-spec --lengths 2200,32768 --long-lengths 131072
  echo "measure (no speculation) exit $?"
  echo "== 4. the speculative servers at 131072 with --max-running-requests 2"
  "${measure[@]}" --results "$work/perf-results-max-running-2" --out "$survey/pack-max-running-2" \
    --max-running-requests 2 --server exact-spec --server stock-spec --lengths 131072 --long-lengths '' \
    --warmup 0
  echo "measure (max running 2) exit $?"
}

case "$step" in
  start)
    id=${1:?start BUILD_ID}
    mkdir -p "$survey"
    rm -f "$survey/done"
    export -f stages
    export work survey py
    setsid bash -c 'stages "$1"; echo "$?" > "$0/done"' "$survey" "$id" >> "$survey/log" 2>&1 < /dev/null &
    echo "survey started in the background (log $survey/log)" ;;
  collect)
    [ -f "$survey/log" ] || { echo "survey: none on this machine (a fresh one?)" >&2; exit 3; }
    mkdir -p "${OUT:?}"
    tar --exclude='*.html' -czf "$OUT/survey.tar.gz" -C "$work" survey perf-results \
      perf-results-max-running-2 2>/dev/null
    ls -la "$OUT/survey.tar.gz"
    tail -n 40 "$survey/log"
    [ -f "$survey/done" ] && echo "SURVEY DONE" || exit 1 ;;
  wait)
    limit=${1:?wait SECONDS}
    for _ in $(seq "$limit"); do [ -f "$survey/done" ] && break; sleep 1; done
    bash "$0" collect ;;
  *)
    echo "survey.sh: unknown step $step" >&2
    exit 2 ;;
esac
