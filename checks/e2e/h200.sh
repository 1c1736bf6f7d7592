#!/usr/bin/env bash
# The end-to-end run on a GPU host with no network, in steps that may span several calls while the
# machine is held (state lives under $E2E_WORK). Repository root; docs/e2e.md has the whole procedure.
#   bash checks/e2e/h200.sh stash DIR...       copy carried wheel folders to $E2E_WORK/wheels/
#   bash checks/e2e/h200.sh build              assemble patched/, stock/, deps/ (assemble.py build)
#   bash checks/e2e/h200.sh model              write the tiny target and drafter to .e2e/models
#   bash checks/e2e/h200.sh batteries TREE [batteries.py options]   (results under $OUT/e2e)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
work=${E2E_WORK:-/tmp/bitexact-e2e}
py=${PYTHON:-python3}
step=${1:?step: stash, build, model or batteries}
shift
case "$step" in
  stash)
    mkdir -p "$work/wheels"
    for dir in "$@"; do cp -r "$dir" "$work/wheels/$(basename "$dir")" || exit 2; done
    du -sh "$work/wheels"/* ;;
  build)
    if ! compgen -G "$work/wheels/*" > /dev/null; then
      echo "h200.sh: nothing stashed under $work/wheels: this machine is fresh (the call said warm:" \
        "false?); run 'h200.sh stash' with the carried wheel sets first" >&2
      exit 3
    fi
    "$py" checks/e2e/assemble.py build --wheels "$work"/wheels/* --work "$work" ;;
  model)
    [ -f .e2e/models/tiny-model.json ] || "$py" checks/e2e/tiny_model.py .e2e/models ;;
  batteries)
    tree=${1:?tree: patched or stock}
    shift
    "$py" checks/e2e/batteries.py --work "$work" --tree "$tree" --out "${OUT:?}/e2e" "$@" ;;
  *)
    echo "h200.sh: unknown step $step" >&2
    exit 2 ;;
esac
