#!/usr/bin/env bash
# One device session's end-to-end work (issues 18, 20, 21), run in the background so that it spans several
# device calls while the machine is held; each call collects what is done so far. Repository root, after
# `h200.sh stash` / `build` / `model`. docs/e2e.md has the procedure and the reasons.
#   bash checks/e2e/campaign.sh start BUILD_ID   copy the tree, start the phases (setsid), return
#   bash checks/e2e/campaign.sh collect          $OUT/campaign.tar.gz (results so far) and a status
#   bash checks/e2e/campaign.sh wait SECONDS     wait until done or SECONDS passed, then collect
# Phases: A alone, at the recipe's memory: record the goldens, check an unchanged restart. B, four streams
# side by side at --mem-fraction-static 0.2 each (SGLang sizes its pools from the memory free at its
# start, so the recipe's 0.88 fits one server only): the batteries on the patched and the stock trees, the
# golden checks of other builds (the same tree at 0.2 as the control, stock, flashinfer attention, the
# series without 0003), and two replicas behind SGLang's router for each tree.
set -uo pipefail
work=${E2E_WORK:-/tmp/bitexact-e2e}
camp=${CAMPAIGN_DIR:-/tmp/bitexact-campaign}
py=${PYTHON:-python3}
step=${1:?step: start, collect or wait}

phases() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res"
  local golden=$res/golden
  mkdir -p "$golden" && cp checks/golden/README.md "$golden/"
  local g=(checks/e2e/goldens.py --work "$work" --golden-dir "$golden" --build-id "$BUILD_ID")
  echo "phase A $(date -u +%T)"
  "$py" "${g[@]}" --out "$res/goldens-a" record check:restart=patched
  echo "phase B $(date -u +%T)"
  "$py" checks/e2e/batteries.py --work "$work" --tree patched --out "$res/e2e" --port 30000 \
    --mem-fraction-static 0.2 > "$res/stream-patched.log" 2>&1 &
  "$py" checks/e2e/batteries.py --work "$work" --tree stock --out "$res/e2e" --port 30001 \
    --mem-fraction-static 0.2 > "$res/stream-stock.log" 2>&1 &
  "$py" "${g[@]}" --out "$res/goldens-b" --port 30002 --mem-fraction-static 0.2 \
    check:control-mem-0.2=patched check:stock=stock check:flashinfer=patched:backend-flashinfer \
    check:revert-0003=revert-0003 > "$res/stream-drift.log" 2>&1 &
  (
    for _ in $(seq 600); do [ -d "$work/router-site/sglang_router" ] && break; sleep 1; done
    for tree in patched stock; do
      "$py" checks/e2e/router.py --work "$work" --tree "$tree" --out "$res/router" --port 30100 \
        --router-site "$work/router-site" --mem-fraction-static 0.2 \
        --golden "$golden/h200/e2e-tiny-hybrid.json"
    done
  ) > "$res/stream-router.log" 2>&1 &
  wait
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

case "$step" in
  start)
    BUILD_ID=${2:?start BUILD_ID}
    export BUILD_ID
    rm -rf "$camp" && mkdir -p "$camp/repo"
    # A copy: later calls replace the working tree under the running phases.
    tar --exclude=./.gpu --exclude=./.git -cf - . | tar -xf - -C "$camp/repo"
    setsid bash -c "$(declare -f phases); work=$work camp=$camp py=$py BUILD_ID=$BUILD_ID phases" \
      > "$camp/campaign.log" 2>&1 < /dev/null &
    echo "campaign started (log $camp/campaign.log)" ;;
  collect)
    mkdir -p "${OUT:?}"
    tar --exclude='*.trace.json*' -czf "$OUT/campaign.tar.gz" -C "$camp" res campaign.log 2>/dev/null
    ls -la "$OUT/campaign.tar.gz"
    cat "$camp/campaign.log"
    for f in "$camp"/res/stream-*.log; do echo "== $f"; tail -n 4 "$f"; done
    [ -f "$camp/done" ] && echo "CAMPAIGN DONE" ;;
  wait)
    limit=${2:?wait SECONDS}
    for _ in $(seq "$limit"); do [ -f "$camp/done" ] && break; sleep 1; done
    bash "$0" collect ;;
  *)
    echo "campaign.sh: unknown step $step" >&2
    exit 2 ;;
esac
