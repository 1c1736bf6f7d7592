"""A stand-in for one tree's `bitexact-server` (the launcher the flake's check names per tree), for the
runner's offline tests: `--print` and `--build-info` answer as the real launcher's do (exactlaunch.cli: a
JSON plan with argv, env and driver; a JSON build description), and a start execs a server in SGLang's
shapes (canned_sglang.py) on the port it was given, with the behaviour the test chose for that tree and
variant. What it stands for is the launcher and the server; the runner, bitexact and the HTTP between
them are real.

Behaviours come from $STANDIN_BEHAVIOURS (JSON {"TREE:VARIANT" or "VARIANT": behaviour}); without an
entry a no-spec variant answers `normal`, a radix one `radix`, any other `spec`; `hang` starts a process
that never gets ready (its argv carries $STANDIN_MARKER). $STANDIN_TREE names the
tree."""

from __future__ import annotations

import json
import os
import sys


def behaviour(tree: str, variant: str) -> str:
    table = json.loads(os.environ.get("STANDIN_BEHAVIOURS", "{}"))
    if f"{tree}:{variant}" in table:
        return str(table[f"{tree}:{variant}"])
    if variant in table:
        return str(table[variant])
    if variant == "no-spec":
        return "normal"
    return "radix" if variant.startswith("radix") else "spec"


def main(argv: list[str]) -> int:
    def value(option: str) -> str | None:
        return argv[argv.index(option) + 1] if option in argv else None

    tree = os.environ.get("STANDIN_TREE", "patched")
    if "--build-info" in argv:
        print(json.dumps({"server": f"/standin/{tree}", "sglang": "0.5.20", "series": tree == "patched"}))
        return 0
    variant = value("--variant") or "recipe"
    port = value("--port")
    if port is None:
        print("standin launcher: --port is required", file=sys.stderr)
        return 2
    chosen = behaviour(tree, variant)
    if chosen == "hang":  # a start that never gets ready: it listens on nothing and sleeps
        marker = os.environ.get("STANDIN_MARKER", "standin-hang")
        server = [sys.executable, "-c", "import sys, time; time.sleep(600)", marker]
    else:
        server = [sys.executable, "-m", "checkhelpers.canned_sglang", "--port", port, "--behaviour", chosen]
    if "--print" in argv:
        print(
            json.dumps({"variant": variant, "exact": True, "argv": server, "env": {"STANDIN_PRINTED": "1"}})
        )
        return 0
    print(f"standin launcher: {tree} {variant} on {port}", flush=True)
    os.execv(server[0], server)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
