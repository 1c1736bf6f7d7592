#!/usr/bin/env bash
# The GPU checks on a GPU host without Nix: the same runner the flake's check calls
# (`bitexact-gpu-checks`, pkgs/gpu-checks), on trees assembled from wheels. Repository root; state lives
# under $E2E_WORK (default /tmp/bitexact-e2e), so the steps may span several calls while the machine is
# held. docs/e2e.md has the procedure.
#   bash lab/card/host.sh stash DIR...     copy carried wheel folders to $E2E_WORK/wheels/
#   bash lab/card/host.sh build            patched/, stock/, deps/ (lab.card.assemble build; the product too)
#   bash lab/card/host.sh model            the tiny target and drafter under .e2e/models
#   bash lab/card/host.sh record [ARGS]    this card's goldens into $RECORDED (runner `record`), to commit
#   bash lab/card/host.sh run [ARGS]       the whole plan (runner `run`) against the committed goldens
#                                            (a copy in $GOLDEN_DIR), results in $RESULTS
#   bash lab/card/host.sh start BUILD_ID   record, then run, in the background (setsid); returns at once
#   bash lab/card/host.sh wait SECONDS     wait until the background run ends, then collect
#   bash lab/card/host.sh collect          $OUT/results.tar.gz and the summary so far
# wait and collect exit 0 when the background run is done (the run's own exit is printed), 1 while it
# runs, 3 when this machine has none (a fresh machine), 4 when it ended unfinished. ARGS go to the runner
# (e.g. --lanes 4 --mem-fraction-static 0.2 to share the card; HOST_RUN_ARGS does the same for start).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
work=${E2E_WORK:-/tmp/bitexact-e2e}
bg=${E2E_BACKGROUND:-$work/background}
py=${PYTHON:-python3}
golden=${GOLDEN_DIR:-$work/golden}
recorded=${RECORDED:-$work/recorded}
results=${RESULTS:-$work/results}
step=${1:?step: stash, build, model, record, run, start, wait or collect}
shift

runner() {
  # The product as the build step installed it (deps/), and this host's one setting beside the
  # recipe's: sglang-kernel here is 0.4.5 (the host's torch 2.11 cannot load the lock's 0.4.7), which
  # SGLang 0.5.20 refuses unless told to skip its version check (docs/e2e.md).
  local verb=$1
  shift
  local common=(--plan checks/plans/e2e-tiny-hybrid.json --recipe nix/recipes/e2e-tiny-hybrid.json
    --tree "patched=$work/patched" --deps "$work/deps"
    --model-snapshot .e2e/models/target --server-env SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1)
  if [ "$verb" = run ]; then
    common+=(--golden-dir "$golden" --tree "stock=$work/stock" --kernel-checks checks/gpu --series patches/sglang
      --out "$results")
  else
    # Never into the goldens the run checks against: the run must meet the committed ones (or the
    # family's), not what the same build wrote minutes before.
    mkdir -p "$recorded"
    common+=(--golden-dir "$recorded" --out "$work/record")
  fi
  PYTHONPATH="$work/deps" "$py" -m gpuchecks "$verb" "${common[@]}" "$@"
}

golden_dir() {
  # A copy of the committed goldens (and their families), for the history lines the checks append.
  [ -d "$golden" ] || { mkdir -p "$golden" && cp -r checks/golden/. "$golden/"; }
}

alive() {
  # The background runner by its PID and start time (field 22 of /proc/PID/stat): neither a reused PID
  # nor a zombie counts.
  local pid start stat
  [ -s "$bg/pid" ] || return 1
  read -r pid start < "$bg/pid" || return 1
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  # shellcheck disable=SC2086  # fields on purpose: field 3 is $1, field 22 is ${20}
  set -- $stat
  [ "$1" != Z ] && [ "${20}" = "$start" ]
}

case "$step" in
  stash)
    mkdir -p "$work/wheels"
    for dir in "$@"; do cp -r "$dir" "$work/wheels/$(basename "$dir")" || exit 2; done
    du -sh "$work/wheels"/* ;;
  build)
    if ! compgen -G "$work/wheels/*" > /dev/null; then
      echo "host.sh: nothing stashed under $work/wheels: this machine is fresh (the call said warm:" \
        "false?); run 'host.sh stash' with the carried wheel sets first" >&2
      exit 3
    fi
    # The product first, copied into deps/ (lab.card.product imports none of it): the assembler reads
    # its command line as the launcher does, and the host has no other copy of the launcher to import.
    "$py" -m lab.card.product "$work/deps" || exit 2
    PYTHONPATH="$work/deps" "$py" -m lab.card.assemble build --wheels "$work"/wheels/* --work "$work" ;;
  model)
    [ -f .e2e/models/tiny-model.json ] || "$py" -m lab.card.tiny_model .e2e/models ;;
  record)
    runner record "$@" ;;
  run)
    golden_dir
    runner run "$@" ;;
  start)
    build_id=${1:?start BUILD_ID}
    if alive; then
      echo "host.sh: a background run is going (pid $(cut -d' ' -f1 "$bg/pid")); wait for it first" >&2
      exit 2
    fi
    rm -rf "$bg" && mkdir -p "$bg"
    : > "$bg/log"
    # shellcheck disable=SC2016  # expanded by the background shell
    setsid bash -c '
      id=$1; stat=$(cat /proc/$$/stat); stat=${stat##*) }; set -- $stat; echo "$$ ${20}" > "$0/pid"
      bash lab/card/host.sh record -- --build-id "$id"; echo "record exit $?"
      bash lab/card/host.sh run ${HOST_RUN_ARGS:-}; code=$?; echo "run exit $code"
      echo "$code" > "$0/done"' "$bg" "$build_id" >> "$bg/log" 2>&1 < /dev/null &
    for _ in $(seq 100); do [ -s "$bg/pid" ] && break; sleep 0.1; done
    [ -s "$bg/pid" ] || { echo "host.sh: the background run did not start; its log:" >&2; cat "$bg/log" >&2; exit 2; }
    echo "started in the background (log $bg/log)" ;;
  collect)
    if [ ! -f "$bg/log" ]; then
      echo "host.sh: no background run on this machine ($bg/log missing); if the call said warm: false," \
        "the machine that started it went back: stash, build and start again" >&2
      exit 3
    fi
    mkdir -p "${OUT:?}"
    # Results and the goldens recorded here; the large per-answer JSONL files stay behind.
    tar --exclude='results/*/*/*/*.jsonl' --exclude='*.html' \
      -czf "$OUT/results.tar.gz" -C "$work" results record recorded -C "$bg" log 2>/dev/null
    ls -la "$OUT/results.tar.gz"
    tail -n 60 "$bg/log"
    if [ -f "$bg/done" ]; then
      echo "BACKGROUND RUN DONE (the run's exit: $(cat "$bg/done"))"
    elif ! alive; then
      echo "host.sh: the background run ($(cut -d' ' -f1 "$bg/pid" 2>/dev/null)) ended without finishing" >&2
      exit 4
    else
      exit 1
    fi ;;
  wait)
    limit=${1:?wait SECONDS}
    [ -f "$bg/log" ] || { bash "$0" collect; exit $?; }
    for _ in $(seq "$limit"); do
      [ -f "$bg/done" ] && break
      alive || break
      sleep 1
    done
    bash "$0" collect ;;
  *)
    echo "host.sh: unknown step $step" >&2
    exit 2 ;;
esac
