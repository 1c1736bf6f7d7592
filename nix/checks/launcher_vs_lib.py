"""The Python launcher (exactlaunch) and nix/lib compute the same argv and env for every variant.

Usage: launcher_vs_lib.py RECIPE EXPECTED_JSON, where EXPECTED_JSON maps each variant name to
nix/lib's {"argv": [...], "env": {...}} for serving flags --host 0.0.0.0 --port 30000. Needs
exactlaunch importable (PYTHONPATH=pkgs/server/src). Exit 0 when all agree, 1 otherwise.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

from exactlaunch import cli

# Variables the launcher decides beyond the recipe's (paths of this machine, offline mode).
LAUNCHER_KEYS = {"HF_HUB_OFFLINE", "HF_HUB_CACHE", "CUDA_HOME", "SGLANG_DG_CACHE_DIR"}
SERVING = ["--host", "0.0.0.0", "--port", "30000"]


def launcher(recipe: Path, variant: str) -> dict[str, object]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(["--recipe", str(recipe), "--variant", variant, *SERVING, "--print"])
    if code != 0:
        raise SystemExit(f"launcher failed for variant {variant} (exit {code})")
    return json.loads(out.getvalue())


def main(argv: list[str]) -> int:
    recipe, expected_file = Path(argv[1]), Path(argv[2])
    expected = json.loads(expected_file.read_text())
    failures = 0
    for variant, want in sorted(expected.items()):
        got = launcher(recipe, variant)
        argv_got = list(got["argv"])[1:]  # [0] is the interpreter the launcher runs on
        env_got = {k: v for k, v in dict(got["env"]).items() if k not in LAUNCHER_KEYS}
        if argv_got != want["argv"][1:] or env_got != want["env"]:
            failures += 1
            print(f"{variant}: launcher {argv_got} {env_got}\n  nix/lib {want['argv'][1:]} {want['env']}")
        else:
            print(f"{variant}: agree ({len(argv_got) + 1} argv elements, {len(env_got)} env variables)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
