#!/usr/bin/env bash
# The offline test command (README): sets up .venv, then runs every check that needs no GPU and no
# network beyond PyPI. Needs Nix (nix-instantiate) on PATH; .ci/run installs Debian's nix-bin.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=${BITEXACT_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  echo "offline: creating $venv" >&2
  python3 -m venv "$venv"
fi
echo "offline: installing test dependencies into $venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r checks/requirements-offline.txt
for project in pkgs/formats pkgs/gpuhost pkgs/bitexact pkgs/server pkgs/lock pkgs/gpu-checks images/entrypoint nix/tools checks/gpu checks/offline; do
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$project"
done
# The lab (lab/), after the product it imports: its tests run below with the product's.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e lab

# Nix evaluates builtins-only code here: flakes on, no binary cache (unreachable offline).
export NIX_CONFIG="${NIX_CONFIG:-}
experimental-features = nix-command flakes
substituters =
build-users-group =
sandbox = false"

echo "offline: ruff (lint and format)" >&2
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .

echo "offline: pytest (the product's checks, then the lab's tests)" >&2
exec "$venv/bin/python" -m pytest --rootdir . -p no:cacheprovider --import-mode=importlib -ra "$@" \
  checks/offline checks/gpu lab/tests
