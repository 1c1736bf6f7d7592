#!/usr/bin/env bash
# The upstream evaluation (docs/verification.md): every flake output evaluated against local snapshots of
# uv2nix, pyproject.nix, build-system-pkgs and nix2container plus a nixpkgs (real, or nixpkgs' lib with
# the stand-ins in standin-nixpkgs/), with an evaluation-only pin set; prints which properties hold.
#
#   bash lab/upstream_eval/run.sh [lab.upstream_eval.evaluate options: --rev REV --report FILE --mirror DIR ...]
#
# Nix: $UPSTREAM_EVAL_NIX, else `nix` on PATH when it is 2.18 or later, else trixie's nix-bin 2.26
# (trixie-nix.sh). The store: unless UPSTREAM_EVAL_PRIVATE_STORE=0, a throwaway one mounted on /nix in a
# private mount namespace (needs root or unprivileged user namespaces), so the host's store is not
# touched; on a machine whose Nix daemon you may use, set UPSTREAM_EVAL_PRIVATE_STORE=0.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=lab/upstream_eval

recent() {
  local v
  v=$("$@" --version 2>/dev/null | sed -n 's/.* \([0-9]\+\)\.\([0-9]\+\).*/\1 \2/p' | head -n1)
  [ -n "$v" ] && set -- $v && { [ "$1" -gt 2 ] || { [ "$1" -eq 2 ] && [ "$2" -ge 18 ]; }; }
}

nix_cmd=${UPSTREAM_EVAL_NIX:-}
if [ -z "$nix_cmd" ]; then
  if command -v nix >/dev/null 2>&1 && recent nix; then
    nix_cmd=nix
  else
    nix_cmd=$(bash "$here/trixie-nix.sh")
  fi
fi

if [ "${UPSTREAM_EVAL_PRIVATE_STORE:-1}" = 1 ]; then
  store=$(mktemp -d "${TMPDIR:-/tmp}/upstream-eval-store.XXXXXX")
  trap 'chmod -R u+w "$store" 2>/dev/null; rm -rf "$store"' EXIT
  [ -d /nix ] || mkdir /nix
  unshare -m bash -c 'mount --bind "$1" /nix && shift && exec "$@"' bash "$store" \
    python3 -m lab.upstream_eval.evaluate --nix "$nix_cmd" "$@"
else
  python3 -m lab.upstream_eval.evaluate --nix "$nix_cmd" "$@"
fi
