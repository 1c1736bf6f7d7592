"""Runs the bad-input catalogue (reliability_catalogue.py) for real and renders docs/reliability.md.

Each case runs one command line of a real tool (bitexact, pinlock, the launcher, the image entrypoint,
the end-to-end runner) as a program in a fresh directory, against real files, a real HTTP server in
SGLang's shapes (canned_sglang.py) where it needs one, a real listener on a taken port, and, for full and
read-only file systems, a real tmpfs mounted in a private mount namespace (`unshare -m`, root).

    python -m checkhelpers.reliability_run --write docs/reliability.md   # rerun every case, rewrite
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from checkhelpers.canned_sglang import CannedSGLang
from checkhelpers.net_support import free_port
from checkhelpers.reliability_catalogue import (
    CASES,
    COMMAND_NAMES,
    PROGRAMS,
    REPO,
    Case,
)


@dataclass(frozen=True)
class Result:
    exit: int
    stdout: str
    stderr: str
    problem: str | None  # the case's after-check
    ports: tuple[int, ...] = ()  # the ports this run's servers and listeners took (they change per run)

    @property
    def output(self) -> str:
        """What the user reads: errors, then what the command printed (status tables print to stdout)."""
        return self.stderr + self.stdout


# Another program holding a port: a real listener in its own process, as a leftover server would be.
LISTENER = (
    "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
    "print(s.getsockname()[1], flush=True); time.sleep(120)"
)


def can_mount() -> bool:
    """Whether this process may mount a tmpfs in a private mount namespace (root, or user namespaces)."""
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True)
    return done.returncode == 0


def _env(case: Case, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BITEXACT_", "HF_"))}
    env["XDG_CACHE_HOME"] = str(tmp / "cache")
    env["HF_HUB_OFFLINE"] = "1"  # no case may reach the Hub (CI has no route to it; a try would wait)
    env.update({k: v.replace("{tmp}", str(tmp)) for k, v in case.env.items()})
    return env


def run_case(case: Case, tmp: Path) -> Result:
    if case.setup is not None:
        case.setup(tmp)
    values = {"tmp": str(tmp)}
    decided = tmp / ".case-values.json"  # what a setup decided (the port of a server it started)
    if decided.exists():
        values.update(json.loads(decided.read_text()))
    server = CannedSGLang(case.server, case.model) if case.server else None
    busy = None
    try:
        if server is not None:
            server.__enter__()
            values["url"] = server.url
            values["port"] = server.url.rsplit(":", 1)[1]
        if "{free_port}" in " ".join(case.argv):  # a port nothing listens on (the defaults may be taken)
            values["free_port"] = str(free_port())
        if "{busy_port}" in " ".join(case.argv):
            busy = subprocess.Popen([sys.executable, "-c", LISTENER], stdout=subprocess.PIPE, text=True)
            assert busy.stdout is not None
            values["busy_port"] = busy.stdout.readline().strip()
        argv = [re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), a) for a in case.argv]
        command = [sys.executable, *PROGRAMS[case.tool], *argv]
        if case.fs is not None:
            mnt = tmp / "mnt"
            mnt.mkdir(exist_ok=True)
            prepare = f"mount -t tmpfs -o size=256k tmpfs {mnt}"
            if case.fs == "ro":
                prepare += f" && mount -o remount,ro {mnt}"
            else:  # an out directory and a filler that leaves no block free (full) or three (three-pages)
                prepare += f" && mkdir {mnt}/o && head -c 12288 /dev/zero > {mnt}/room"
                prepare += f" && (head -c 1M /dev/zero > {mnt}/filler 2>/dev/null || true)"
                prepare += f" && rm {mnt}/room" if case.fs == "three-pages" else ""
            # The mount dies with the namespace: copy what the run left (but the filler) out for the check.
            keep = f"rm -f {mnt}/filler; mkdir -p {tmp}/after && cp -a {mnt}/. {tmp}/after/"
            command = [
                "unshare",
                "-m",
                "sh",
                "-c",
                f'{prepare} && {{ "$@"; rc=$?; {keep}; exit $rc; }}',
                "sh",
                *command,
            ]
        done = subprocess.run(
            command, cwd=tmp, env=_env(case, tmp), capture_output=True, text=True, timeout=120
        )
    finally:
        if server is not None:
            server.__exit__()
        if busy is not None:
            busy.kill()
            busy.wait()
        holder = tmp / "holder.pid"
        if holder.exists():
            os.kill(int(holder.read_text()), 9)
    problem = case.check(tmp) if case.check is not None else None
    ports = [int(server.url.rsplit(":", 1)[1])] if server is not None else []
    ports += [int(values["busy_port"])] if "busy_port" in values else []
    ports += [int(values["raw_port"])] if "raw_port" in values else []
    return Result(done.returncode, done.stdout, done.stderr, problem, tuple(ports))


def message_line(case: Case, result: Result) -> str:
    """The message the user sees: the first line that matches the case, else the last error line."""
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    found = next((ln for ln in lines if re.search(case.expect, ln)), lines[-1] if lines else "")
    return found


def generic(text: str, tmp: Path, ports: tuple[int, ...] = ()) -> str:
    """The message with what differs between runs (paths, ports, pids, clocks, run keys) named instead."""
    text = text.replace(str(tmp), "$TMP").replace(sys.executable, "python").replace(str(REPO), ".")
    for port in ports:
        text = re.sub(rf"(?<![0-9]){port}(?![0-9])", "PORT", text)
    text = re.sub(r"-[0-9a-f]{8}\.jsonl", "-KEY.jsonl", text)
    text = re.sub(r"\[e2e \d\d:\d\d:\d\d\] ", "", text)
    text = re.sub(r"run-\d{8}T\d{6,12}Z", "run-TIME", text)  # --force's folder for the run it moved aside
    # which repeat's answer arrives first with several in flight varies run to run
    text = re.sub(r"'(\w[\w-]*)#r\d+'", r"'\1#rN'", text)
    return re.sub(r"pid \d+", "pid N", text)


def table(rows: list[tuple[Case, str]]) -> list[str]:
    out = ["| case | bad input | command | message | exit |", "|---|---|---|---|---:|"]
    for case, message in rows:
        command = " ".join([COMMAND_NAMES[case.tool], *case.argv]).replace(str(REPO), ".")
        for name, shown in (
            ("{tmp}", "$TMP"),
            ("{url}", "http://127.0.0.1:PORT"),
            ("{busy_port}", "PORT"),
            ("{free_port}", "PORT"),
            ("{port}", "PORT"),
            ("{raw_port}", "PORT"),
        ):
            command = command.replace(name, shown)
        command = command.replace("|", "\\|")
        cells = [case.id, case.what, f"`{command}`", message.replace("|", "\\|"), str(case.exit)]
        # A path that is not UTF-8 (held as surrogates) is shown escaped, as the tools show it: \xff.
        shown = (c.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") for c in cells)
        out.append("| " + " | ".join(c.replace("\n", " ") for c in shown) + " |")
    return out


def run_all() -> dict[str, tuple[Result, str]]:
    mountable = can_mount()
    results: dict[str, tuple[Result, str]] = {}
    for case in CASES:
        if case.fs is not None and not mountable:
            continue
        with tempfile.TemporaryDirectory(prefix=f"rel-{case.id}-") as temp:
            tmp = Path(temp)
            result = run_case(case, tmp)
            results[case.id] = (result, generic(message_line(case, result), tmp, result.ports))
    return results


def main(argv: list[str]) -> int:
    if argv[:1] != ["--write"] or len(argv) != 2:
        print("usage: python -m checkhelpers.reliability_run --write docs/reliability.md", file=sys.stderr)
        return 2
    results = run_all()
    missing = [c.id for c in CASES if c.id not in results]
    if missing:
        print(f"cases not run here (no tmpfs mounts): {missing}; run as root", file=sys.stderr)
        return 2
    page = Path(argv[1])
    text = page.read_text()
    start, end = text.index(BEGIN), text.index(END)
    rows = [(c, results[c.id][1]) for c in CASES]
    # Whole or not at all: a page cut by a failed write would lose its markers.
    fresh = page.with_name(page.name + ".new")
    fresh.write_text(text[: start + len(BEGIN)] + "\n" + "\n".join(table(rows)) + "\n" + text[end:])
    fresh.replace(page)
    return 0


BEGIN = "<!-- cases: begin (python -m checkhelpers.reliability_run --write docs/reliability.md) -->"
END = "<!-- cases: end -->"

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
