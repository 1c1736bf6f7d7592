#!/usr/bin/env bash
# One device session's end-to-end work (issues 18, 20, 21), run in the background so that it spans several
# device calls while the machine is held; each call collects what is done so far. Repository root, after
# `h200.sh stash` / `build` / `model`. docs/e2e.md has the procedure and the reasons.
#   bash checks/e2e/campaign.sh start BUILD_ID [PLAN]   copy the tree, start PLAN's phases (setsid), return
#   bash checks/e2e/campaign.sh collect                 $OUT/campaign.tar.gz (results so far) and a status
#   bash checks/e2e/campaign.sh wait SECONDS            wait until done or SECONDS passed, then collect
# collect and wait exit 0 when the campaign is done, 1 while it runs, 3 when this machine has none (a
# fresh one: the call said warm: false) and 4 when its runner ended without finishing. start refuses (2)
# while an earlier campaign's runner is alive, and returns only once the runner has recorded itself.
# PLAN e2e (the default): A alone, at the recipe's memory: record the goldens, check an unchanged restart.
# B, four streams side by side at --mem-fraction-static 0.2 each (SGLang sizes its pools from the memory
# free at its start, so the recipe's 0.88 fits one server only): the batteries on the patched and the stock
# trees, the golden checks of other builds (the same tree at 0.2 as the control, stock, flashinfer
# attention, the series without 0003), and two replicas behind SGLang's router for each tree.
# PLAN perf (after `bench/perf/h200.sh model` too): P alone on the card, since it times: the four servers
# of the 27B-shaped model (bench/perf/run.py measure, one server at a time; a server whose prefill
# profile fails is measured again without it). G, two streams side by side: the 27B-shaped model's golden
# (record, then an unchanged restart checked; long prompts 16k only) at --mem-fraction-static 0.6, and the
# stock tree without --enable-deterministic-inference through the parity, repeat and capacity batteries at
# 0.1 (results under e2e/stock-nondeterministic).
# PLAN long (issue 26; after `bench/perf/h200.sh model` too): K alone, the attention kernels' benchmark
# (bench/kernels/bench_attn_verify.py); C side by side, nothing timed: the exact 27B-shaped server's
# first start (its kernels compile into the cache), checks/gpu, the patched tree's parity and capacity
# batteries and the golden checks of the new build (tiny model, --mem-fraction-static 0.1 each); P alone,
# the exact speculative and exact no-spec 27B-shaped servers, profiled at 2200, 32768 and 131072 tokens.
# PLAN radix (issue 27, and issue 26's leftovers; after `bench/perf/h200.sh model` too): K alone, the
# attention bench's quick cases with the verify tile plans; C side by side, nothing timed: the exact radix
# 27B-shaped server's first start, the GPU checks of 0007 and of the tile plans, the radix batteries on the
# patched tree (with the card's goldens) and on the stock tree, and issue 26's parity, repeat and
# cuda-graph batteries that did not start before; P alone, the two radix 27B-shaped servers' prefix reuse.
# PLAN recheck (issues 26 and 27, after a change to the card's plans or the batteries; tiny model only,
# nothing timed): the attention GPU checks, the patched tree's parity and radix batteries and the stock
# tree's radix ones, five streams side by side.
# PLAN targets (issue 26's targets and issue 27's batteries; after `bench/perf/h200.sh model` too): C side
# by side, nothing timed: the exact 27B-shaped server's first start and recheck's four battery streams;
# P alone, the four 27B-shaped servers measured one after another (what each target reads, no more).
# PLAN complete (issue 26 with the kernels as shipped; after `bench/perf/h200.sh model` too): plan targets
# with the six capacity batteries in phase C as well (two each in the parity, the forced-reject and a fifth
# stream).
# PLAN batteries (issue 26; tiny model only, nothing timed): plan complete's batteries alone.
# PLAN parity-targets (what issue 26 lacks after plan batteries; after `bench/perf/h200.sh model` too): C,
# the exact 27B-shaped server's first start beside one stream of the parity, in-flight, long-prompt and
# repeat batteries; P, plan targets' four servers.
# PLAN four-servers (what issue 26 lacks after plan parity-targets' phase C ran, 2026-12-03; after
# `bench/perf/h200.sh model` too): plan targets' phase P alone, the four 27B-shaped servers one after
# another; exact-spec's first start compiles its kernels (about 5 minutes, within the start timeout).
# PLAN closing (issue 26 to its end; after `bench/perf/h200.sh model` too): C, the exact 27B-shaped
# server's first start beside one tiny stream (the two batteries that have not run with the tile loop
# at 3 stages: gpu-parity-forced-reject, then the golden check of this build against the card's
# committed goldens, gpu-golden's comparison); P, plan four-servers.
# PLAN capacity-prefill (what issue 26 still lacks after plan finish; after `bench/perf/h200.sh model` too):
# C side by side, nothing timed: the exact no-spec 27B-shaped server's first start and, in one stream (one
# tiny server at a time, as in plan finish), the capacity batteries with the card's launch plans; P alone,
# the two no-spec servers at 640 tokens with the 640-token prefill profiled (run 2026-12-03 up to its
# phase P, which the device time did not reach).
# PLAN prefill-640 (after `bench/perf/h200.sh model` too): capacity-prefill's phase P alone.
# PLAN loop-stages (issue 26, after 0003's KV tile loop went to 3 stages on sm_90; after `bench/perf/h200.sh
# model` too): C side by side, nothing timed: the exact no-spec 27B-shaped server's first start, the
# attention GPU checks (every verify and decode row against SGLang's decode with the new loop, each tile
# plan) and the patched tree's parity battery on the tiny model; P alone, the two no-spec servers at 640
# and 2200 tokens, the decode step at 640 profiled.
# PLAN finish (issues 26 and 27 to their end; after `bench/perf/h200.sh model` too): C side by side,
# nothing timed: the exact 27B-shaped server's first start and, in one stream (one tiny server at a
# time: two starting together once failed SGLang's pool sizing), the radix batteries that have no exit
# code on the card yet; P alone, plan targets' four servers, then the draft-window variant at 32768 and
# 131072 tokens (last, since a cut by the end of the device time should cost the least there).
set -uo pipefail
work=${E2E_WORK:-/tmp/bitexact-e2e}
camp=${CAMPAIGN_DIR:-/tmp/bitexact-campaign}
py=${PYTHON:-python3}
step=${1:?step: start, collect or wait}

# SERVER's first start (its kernels compile into the cache) at half the card, in the background of the
# caller's shell, then a head start: its pools are sized before the tiny servers beside it start.
warm_first() {
  "$py" bench/perf/run.py warm --work "$work" --server "$1" --log "$res/warm/$1.log" \
    --mem-fraction-static 0.5 --port 30030 > "$res/stream-warm.log" 2>&1 &
  sleep "${CAMPAIGN_WARM_HEAD_START:-90}"  # seconds: its pools are allocated by then
}

phases_e2e() {
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

phases_perf() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res"
  echo "phase P $(date -u +%T)"
  for server in exact-spec stock-spec exact-no-spec stock-no-spec; do
    local m=(bench/perf/run.py measure --work "$work" --results "$res/perf" --server "$server"
      --start-timeout 600 --deadline-s 100000)
    "$py" "${m[@]}" >> "$res/stream-perf.log" 2>&1 \
      || "$py" "${m[@]}" --prefill-prompt 0 >> "$res/stream-perf.log" 2>&1
    echo "$server exit $? $(date -u +%T)"
  done
  echo "phase G $(date -u +%T)"
  local golden=$res/golden
  mkdir -p "$golden" && cp checks/golden/README.md "$golden/"
  "$py" checks/e2e/goldens.py --work "$work" --golden-dir "$golden" --build-id "$BUILD_ID" \
    --recipe nix/recipes/perf-27b-shape.json --long 16k --port 30010 --mem-fraction-static 0.6 \
    --out "$res/goldens-27b" record check:restart=patched > "$res/stream-golden-27b.log" 2>&1 &
  local only=gpu-parity-recipe,gpu-repeat
  only+=,gpu-capacity-max-running-1,gpu-capacity-max-seqs-32,gpu-capacity-chunked-prefill-4096
  only+=,gpu-capacity-chunked-prefill-16384,gpu-capacity-cuda-graph-decode-bs-1
  only+=,gpu-capacity-cuda-graph-decode-bs-32
  "$py" checks/e2e/batteries.py --work "$work" --tree stock --no-deterministic --only "$only" \
    --out "$res/e2e" --port 30020 --mem-fraction-static 0.1 > "$res/stream-nondeterministic.log" 2>&1 &
  wait
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

phases_long() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res/kernels"
  local tree=(env "PYTHONPATH=$work/deps" "BITEXACT_SGLANG_TREE=$work/patched")
  echo "phase K $(date -u +%T)"
  "${tree[@]}" OUT="$res/kernels" "$py" bench/kernels/bench_attn_verify.py > "$res/kernels/bench.log" 2>&1
  echo "kernel bench exit $? $(date -u +%T)"
  echo "phase C $(date -u +%T)"
  # The exact 27B-shaped server's first start compiles its kernels (minutes): here, beside runs that time
  # nothing, at a share of the card (its static pools need 0.5); it is first, so that its pools are sized
  # before the others start. The tiny servers get 0.12 each: at 0.1 beside it SGLang found no room for
  # their KV caches (2026-12-01, docs/evidence/long-context-h200-2026-12-01).
  warm_first exact-spec
  # The kernels this plan changes (attention, the unified extend kernel) and the GDN ones. The GEMM
  # dispatch checks need a DeepGEMM that works or none; deps/ holds sgl-deep-gemm 0.2.0, which fails on
  # this host's sm_90 with torch 2.11 (docs/e2e.md), so they run elsewhere (docs/kernels.md).
  "${tree[@]}" "$py" -m pytest -q -rs -p no:cacheprovider --import-mode=importlib \
    checks/gpu/test_attn_exact_verify.py checks/gpu/test_unified_extend.py checks/gpu/test_gdn_verify.py \
    > "$res/kernels/gpu-checks.log" 2>&1 &
  local parity=gpu-parity-recipe,gpu-parity-forced-reject,gpu-parity-inflight-8,gpu-parity-long,gpu-repeat
  local capacity=gpu-capacity-max-running-1,gpu-capacity-max-seqs-32,gpu-capacity-chunked-prefill-4096
  capacity+=,gpu-capacity-chunked-prefill-16384,gpu-capacity-cuda-graph-decode-bs-1
  capacity+=,gpu-capacity-cuda-graph-decode-bs-32
  local golden=$res/golden
  mkdir -p "$golden" && cp -r checks/golden/. "$golden/"
  (
    "$py" checks/e2e/batteries.py --work "$work" --tree patched --only "$parity" --out "$res/e2e" \
      --port 30000 --mem-fraction-static 0.12
    "$py" checks/e2e/goldens.py --work "$work" --golden-dir "$golden" --build-id "$BUILD_ID" \
      --out "$res/goldens" --port 30000 --mem-fraction-static 0.12 check:new-kernels=patched
  ) > "$res/stream-parity.log" 2>&1 &
  "$py" checks/e2e/batteries.py --work "$work" --tree patched --only "$capacity" --out "$res/e2e-capacity" \
    --port 30001 --mem-fraction-static 0.12 > "$res/stream-capacity.log" 2>&1 &
  wait
  echo "phase P $(date -u +%T)"
  "$py" bench/perf/run.py measure --work "$work" --results "$res/perf" --server exact-spec \
    --prefill-prompt 0 --start-timeout 900 --deadline-s 100000 >> "$res/stream-perf.log" 2>&1
  echo "exact-spec exit $? $(date -u +%T)"
  "$py" bench/perf/run.py measure --work "$work" --results "$res/perf" --server exact-no-spec \
    --prefill-prompt 0 --profile-prompt 2200,131072 --start-timeout 900 --deadline-s 100000 \
    >> "$res/stream-perf.log" 2>&1
  echo "exact-no-spec exit $? $(date -u +%T)"
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

phases_radix() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res/kernels"
  local tree=(env "PYTHONPATH=$work/deps" "BITEXACT_SGLANG_TREE=$work/patched")
  echo "phase K $(date -u +%T)"
  # --quick: three row cases and the verify tile plans, no prefill (issue 26's lead)
  "${tree[@]}" OUT="$res/kernels" "$py" bench/kernels/bench_attn_verify.py --quick > "$res/kernels/bench.log" 2>&1
  echo "kernel bench exit $? $(date -u +%T)"
  echo "phase C $(date -u +%T)"
  # The exact 27B-shaped server's first start compiles its kernels, beside runs that time nothing (as in
  # plan long), for phase P's radix server.
  warm_first exact-spec-radix
  "${tree[@]}" "$py" -m pytest -q -rs -p no:cacheprovider --import-mode=importlib \
    checks/gpu/test_gdn_prefix_snapshot.py checks/gpu/test_attn_exact_verify.py -k "snapshot or tile_plans or draft" \
    > "$res/kernels/gpu-checks.log" 2>&1 &
  # The tiny servers get 0.15 of the memory free at their start (SGLang 0.5.20 sizes the pools from it;
  # at 0.12 beside the 27B server a spec server may find too little once its neighbours allocate) and
  # start a little apart, so that one's loading does not count against another's budget.
  local tiny=0.15 stagger=${CAMPAIGN_STAGGER:-20}
  local radix=gpu-radix-cold-warm,gpu-radix-shared-prefix,gpu-radix-long-extend,gpu-radix-inflight-8
  radix+=,gpu-radix-repeat,gpu-radix-forced-reject,gpu-radix-golden
  local golden=$res/golden
  mkdir -p "$golden" && cp -r checks/golden/. "$golden/"
  "$py" checks/e2e/batteries.py --work "$work" --tree patched --only "$radix" --golden-dir "$golden" \
    --out "$res/e2e-radix" --port 30000 --mem-fraction-static "$tiny" > "$res/stream-radix.log" 2>&1 &
  sleep "$stagger"
  "$py" checks/e2e/batteries.py --work "$work" --tree stock --only gpu-radix-cold-warm,gpu-radix-shared-prefix \
    --out "$res/e2e-radix-stock" --port 30001 --mem-fraction-static "$tiny" > "$res/stream-radix-stock.log" 2>&1 &
  # issue 26's batteries that did not start on 2026-12-01 (memory share), with its kernels
  local parity=gpu-parity-recipe,gpu-parity-inflight-8,gpu-parity-long,gpu-repeat
  parity+=,gpu-capacity-cuda-graph-decode-bs-1,gpu-capacity-cuda-graph-decode-bs-32
  sleep "$stagger"
  "$py" checks/e2e/batteries.py --work "$work" --tree patched --only "$parity" --out "$res/e2e" \
    --port 30002 --mem-fraction-static "$tiny" > "$res/stream-parity.log" 2>&1 &
  wait
  echo "phase P $(date -u +%T)"
  "$py" bench/perf/run.py measure --work "$work" --results "$res/perf" --server exact-spec-radix \
    --server stock-spec-radix --start-timeout 900 --deadline-s 100000 >> "$res/stream-perf.log" 2>&1
  echo "reuse exit $? $(date -u +%T)"
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

# The patched tree's radix and parity batteries and the stock tree's radix ones, four streams started
# STAGGER seconds apart (each server variant in its own, so that the slowest stream is one server's start
# and its batteries), at TINY of the memory free at each start. Background jobs of the caller's shell.
# PARITY_EXTRA and REJECT_EXTRA (optional, comma-separated) join the parity and the forced-reject streams'
# batteries: one run each, so that they share its no-spec references (recorded first) and its servers.
battery_streams() {
  local tiny=$1 stagger=$2 parity_extra=${3:-} reject_extra=${4:-} res=$camp/res
  local radix=gpu-radix-cold-warm,gpu-radix-shared-prefix,gpu-radix-long-extend,gpu-radix-inflight-8
  radix+=,gpu-radix-repeat,gpu-radix-golden
  local golden=$res/golden
  mkdir -p "$golden" && cp -r checks/golden/. "$golden/"
  "$py" checks/e2e/batteries.py --work "$work" --tree patched --only "$radix" --golden-dir "$golden" \
    --out "$res/e2e-radix" --port 30000 --mem-fraction-static "$tiny" > "$res/stream-radix.log" 2>&1 &
  sleep "$stagger"
  "$py" checks/e2e/batteries.py --work "$work" --tree patched --only "gpu-radix-forced-reject${reject_extra:+,$reject_extra}" \
    --out "$res/e2e-radix-reject" --port 30003 --mem-fraction-static "$tiny" > "$res/stream-radix-reject.log" 2>&1 &
  sleep "$stagger"
  local parity=gpu-parity-recipe,gpu-parity-inflight-8,gpu-parity-long,gpu-repeat${parity_extra:+,$parity_extra}
  "$py" checks/e2e/batteries.py --work "$work" --tree patched --only "$parity" --out "$res/e2e" \
    --port 30002 --mem-fraction-static "$tiny" > "$res/stream-parity.log" 2>&1 &
  sleep "$stagger"
  "$py" checks/e2e/batteries.py --work "$work" --tree stock --only gpu-radix-cold-warm,gpu-radix-shared-prefix \
    --out "$res/e2e-radix-stock" --port 30001 --mem-fraction-static "$tiny" > "$res/stream-radix-stock.log" 2>&1 &
}

phases_recheck() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res/kernels"
  local tree=(env "PYTHONPATH=$work/deps" "BITEXACT_SGLANG_TREE=$work/patched")
  echo "phase C $(date -u +%T)"
  # Nothing timed: the attention checks with this card's plans (every verify row equal to decode's, the
  # drafter's plans) and the batteries with them active.
  "${tree[@]}" "$py" -m pytest -q -rs -p no:cacheprovider --import-mode=importlib \
    checks/gpu/test_attn_exact_verify.py > "$res/kernels/gpu-checks.log" 2>&1 &
  battery_streams 0.15 "${CAMPAIGN_STAGGER:-10}"
  wait
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

phases_targets() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res"
  echo "phase C $(date -u +%T)"
  # Nothing timed: the exact 27B-shaped server's first start (its kernels compile into the cache) beside
  # the batteries of plan recheck, as in plan radix (the 27B server first, so its pools are sized before).
  warm_first exact-spec
  battery_streams 0.15 "${CAMPAIGN_STAGGER:-10}"
  wait
  measure_targets
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

phases_complete() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res"
  echo "phase C $(date -u +%T)"
  # the exact 27B-shaped server's first start beside the batteries, then phase P
  warm_first exact-spec
  every_battery
  wait
  measure_targets
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

phases_parity_targets() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res"
  echo "phase C $(date -u +%T)"
  # One tiny stream beside the exact 27B-shaped server's first start: the parity batteries that plan
  # batteries left without a verdict (its recipe server failed in pool sizing beside four neighbours).
  warm_first exact-spec
  "$py" checks/e2e/batteries.py --work "$work" --tree patched \
    --only gpu-parity-recipe,gpu-parity-inflight-8,gpu-parity-long,gpu-repeat --out "$res/e2e" \
    --port 30000 --mem-fraction-static 0.15 > "$res/stream-parity.log" 2>&1 &
  wait
  measure_targets
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

phases_four_servers() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res"
  measure_targets
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

phases_closing() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res"
  echo "phase C $(date -u +%T)"
  warm_first exact-spec
  local golden=$res/golden
  mkdir -p "$golden" && cp -r checks/golden/. "$golden/"
  (
    "$py" checks/e2e/batteries.py --work "$work" --tree patched --only gpu-parity-forced-reject \
      --out "$res/e2e" --port 30000 --mem-fraction-static 0.15
    "$py" checks/e2e/goldens.py --work "$work" --golden-dir "$golden" --build-id "$BUILD_ID" \
      --out "$res/goldens" --port 30000 --mem-fraction-static 0.15 check:loop-stages=patched
  ) > "$res/stream-parity.log" 2>&1 &
  wait
  measure_targets
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

phases_batteries() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res"
  echo "phase C $(date -u +%T)"
  every_battery
  wait
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

# Every battery with the kernels as shipped: plan targets' streams and the six capacity batteries, two
# in the parity stream, two in the forced-reject one (each run's no-spec references shared) and two in
# a fifth stream, so that no stream runs more than four tiny servers one after another. Starts 20 s apart
# by default: five tiny servers 10 s apart once failed SGLang's pool sizing
# (docs/evidence/targets-h200-2026-12-02). Background jobs of the caller's shell.
every_battery() {
  local stagger=${CAMPAIGN_STAGGER:-20}
  battery_streams 0.15 "$stagger" gpu-capacity-max-running-1,gpu-capacity-max-seqs-32 \
    gpu-capacity-chunked-prefill-4096,gpu-capacity-chunked-prefill-16384
  sleep "$stagger"
  "$py" checks/e2e/batteries.py --work "$work" --tree patched \
    --only gpu-capacity-cuda-graph-decode-bs-1,gpu-capacity-cuda-graph-decode-bs-32 --out "$res/e2e-capacity" \
    --port 30004 --mem-fraction-static 0.15 > "$res/stream-capacity.log" 2>&1 &
}

# Issue 26's targets, the four 27B-shaped servers alone one after another, the exact ones first. Only
# what a target reads is profiled: exact-spec's cycle at the three contexts, exact-no-spec's step at
# 131072 (verify against one decode step); the stock servers' bench only, and stock no-spec's short
# lengths only (its target is at 640). The prefill profile's kernels did not change since 2026-12-01.
measure_targets() {
  echo "phase P $(date -u +%T)"
  perf_measure --server exact-spec --prefill-prompt 0
  echo "exact-spec exit $? $(date -u +%T)"
  perf_measure --server exact-no-spec --prefill-prompt 0 --profile-prompt 131072
  echo "exact-no-spec exit $? $(date -u +%T)"
  perf_measure --server stock-spec --prefill-prompt 0 --no-profile
  echo "stock-spec exit $? $(date -u +%T)"
  perf_measure --server stock-no-spec --prefill-prompt 0 --no-profile --long-lengths ''
  echo "stock-no-spec exit $? $(date -u +%T)"
}

# One 27B-shaped server measured alone (bench/perf/run.py measure with ARGS), into the caller's $res.
perf_measure() {
  "$py" bench/perf/run.py measure --work "$work" --results "$res/perf" "$@" --start-timeout 900 \
    --deadline-s 100000 >> "$res/stream-perf.log" 2>&1
}

phases_finish() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res"
  echo "phase C $(date -u +%T)"
  warm_first exact-spec
  local golden=$res/golden
  mkdir -p "$golden" && cp -r checks/golden/. "$golden/"
  "$py" checks/e2e/batteries.py --work "$work" --tree patched --only gpu-radix-golden,gpu-radix-forced-reject \
    --golden-dir "$golden" --out "$res/e2e-radix" --port 30000 --mem-fraction-static 0.15 \
    > "$res/stream-radix.log" 2>&1 &
  wait
  measure_targets
  # The drafter reads at most its last 4096 tokens: its rate where the cap bites, and its cycle at 131072.
  perf_measure --server exact-spec-window --lengths 32768 --long-lengths 131072 --profile-prompt 131072 \
    --prefill-prompt 0
  echo "exact-spec-window exit $? $(date -u +%T)"
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

phases_capacity_prefill() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res"
  echo "phase C $(date -u +%T)"
  warm_first exact-no-spec
  local capacity=gpu-capacity-max-running-1,gpu-capacity-max-seqs-32,gpu-capacity-chunked-prefill-4096
  capacity+=,gpu-capacity-chunked-prefill-16384,gpu-capacity-cuda-graph-decode-bs-1
  capacity+=,gpu-capacity-cuda-graph-decode-bs-32
  "$py" checks/e2e/batteries.py --work "$work" --tree patched --only "$capacity" --out "$res/e2e-capacity" \
    --port 30000 --mem-fraction-static 0.15 > "$res/stream-capacity.log" 2>&1 &
  wait
  measure_prefill_640
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

# Where exact no-spec's 13 ms of extra time to the first token at 640 tokens go (2026-12-02: 0.087
# against 0.074 s): the bench at 640, a decode profile there, the prefill of 640 tokens profiled.
measure_prefill_640() {
  echo "phase P $(date -u +%T)"
  local server
  for server in exact-no-spec stock-no-spec; do
    perf_measure --server "$server" --lengths 640 --long-lengths '' --profile-prompt 640 --prefill-prompt 640
    echo "$server exit $? $(date -u +%T)"
  done
}

phases_loop_stages() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res/kernels"
  local tree=(env "PYTHONPATH=$work/deps" "BITEXACT_SGLANG_TREE=$work/patched")
  echo "phase C $(date -u +%T)"
  warm_first exact-no-spec
  "${tree[@]}" "$py" -m pytest -q -rs -p no:cacheprovider --import-mode=importlib \
    checks/gpu/test_attn_exact_verify.py > "$res/kernels/gpu-checks.log" 2>&1 &
  "$py" checks/e2e/batteries.py --work "$work" --tree patched --only gpu-parity-recipe --out "$res/e2e" \
    --port 30000 --mem-fraction-static 0.15 > "$res/stream-parity.log" 2>&1 &
  wait
  echo "phase P $(date -u +%T)"
  local server
  for server in exact-no-spec stock-no-spec; do
    perf_measure --server "$server" --lengths 640,2200 --long-lengths '' --profile-prompt 640 --prefill-prompt 0
    echo "$server exit $? $(date -u +%T)"
  done
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

phases_prefill_640() {
  local res=$camp/res repo=$camp/repo
  cd "$repo" || exit 2
  mkdir -p "$res"
  measure_prefill_640
  echo "done $(date -u +%T)"
  touch "$camp/done"
}

# A later call may land on a fresh machine (the device tool reports warm: false): the campaign and the
# stashed wheels are gone, and waiting for it would only spend device time.
require_campaign() {
  if [ ! -f "$camp/campaign.log" ]; then
    echo "campaign.sh: no campaign on this machine ($camp/campaign.log missing). If the device call said" \
      "warm: false, the machine that ran 'start' went back: stash, build and start again." >&2
    exit 3
  fi
}

# The runner's identity, written by the runner itself (setsid may fork): its PID and its start time
# (field 22 of /proc/PID/stat), so that neither a PID the kernel gave to another process nor a zombie
# counts as a running campaign.
record_runner() {
  local stat
  stat=$(cat "/proc/$$/stat") && stat=${stat##*) }
  # shellcheck disable=SC2086  # split into fields on purpose: field 3 is $1, field 22 is ${20}
  set -- $stat
  echo "$$ ${20}" > "$camp/pid.tmp" && mv "$camp/pid.tmp" "$camp/pid"
}

runner_alive() {
  local pid start stat
  [ -s "$camp/pid" ] || return 1
  read -r pid start < "$camp/pid" || return 1
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  # shellcheck disable=SC2086
  set -- $stat
  [ "$1" != Z ] && [ "${20}" = "$start" ]
}

case "$step" in
  start)
    BUILD_ID=${2:?start BUILD_ID}
    plan=${3:-e2e}
    case "$plan" in e2e | perf | long | radix | recheck | targets | complete | batteries | parity-targets | four-servers | closing | finish | capacity-prefill | prefill-640 | loop-stages) ;; *) echo "campaign.sh: unknown plan $plan (e2e, perf, long, radix, recheck, targets, complete, batteries, parity-targets, four-servers, closing, finish, capacity-prefill, prefill-640 or loop-stages)" >&2; exit 2 ;; esac
    export BUILD_ID
    if runner_alive; then
      read -r old _ < "$camp/pid"
      echo "campaign.sh: a campaign is running (its runner is pid $old): wait for it, or stop it with" \
        "kill -- -$old, before starting another" >&2
      exit 2
    fi
    rm -rf "$camp" && mkdir -p "$camp/repo"
    # A copy: later calls replace the working tree under the running phases.
    tar --exclude=./.gpu --exclude=./.git -cf - . | tar -xf - -C "$camp/repo"
    : > "$camp/campaign.log"  # before start returns: a wait right after it must find the campaign
    setsid bash -c "$(declare -f); export work=$(printf %q "$work") camp=$(printf %q "$camp") py=$(printf %q "$py") \
      BUILD_ID=$(printf %q "$BUILD_ID"); record_runner; phases_${plan//-/_}" >> "$camp/campaign.log" 2>&1 < /dev/null &
    for _ in $(seq 100); do [ -s "$camp/pid" ] && break; sleep 0.1; done
    if [ ! -s "$camp/pid" ]; then
      echo "campaign.sh: the campaign's runner did not start (no $camp/pid after 10 s); its log:" >&2
      cat "$camp/campaign.log" >&2
      exit 2
    fi
    echo "campaign started (log $camp/campaign.log)" ;;
  collect)
    require_campaign
    mkdir -p "${OUT:?}"
    # The perf plan's traces are a few MiB and come back; the e2e plan has none. Results' large JSONL stay.
    tar --exclude='*/repeat/*.jsonl' -czf "$OUT/campaign.tar.gz" -C "$camp" res campaign.log 2>/dev/null
    if [ "$(stat -c %s "$OUT/campaign.tar.gz")" -gt 16000000 ]; then  # the device tool returns 16 MiB a file
      echo "campaign.tar.gz over 16 MB: packed again without traces" >&2
      tar --exclude='*/repeat/*.jsonl' --exclude='*.trace.json.gz' -czf "$OUT/campaign.tar.gz" \
        -C "$camp" res campaign.log 2>/dev/null
    fi
    ls -la "$OUT/campaign.tar.gz"
    cat "$camp/campaign.log"
    for f in "$camp"/res/stream-*.log; do echo "== $f"; tail -n 4 "$f"; done
    if [ -f "$camp/done" ]; then
      echo "CAMPAIGN DONE"
    elif [ -s "$camp/pid" ] && ! runner_alive; then
      # nothing left to wait for: the phases ended (killed, or a step exited the shell) unfinished
      echo "campaign.sh: the campaign's runner ($(cut -d' ' -f1 "$camp/pid")) ended without finishing" >&2
      exit 4
    else
      exit 1
    fi ;;
  wait)
    limit=${2:?wait SECONDS}
    require_campaign
    for _ in $(seq "$limit"); do
      [ -f "$camp/done" ] && break
      [ -s "$camp/pid" ] && ! runner_alive && break  # collect says so (exit 4)
      sleep 1
    done
    bash "$0" collect ;;
  *)
    echo "campaign.sh: unknown step $step" >&2
    exit 2 ;;
esac
