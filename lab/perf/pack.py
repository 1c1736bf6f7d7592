"""Results into the device tool's $OUT, within its limits (at most 8 files, 16 MiB each): per server one
tarball (its results and traces) and one text with its timings and tables."""

from __future__ import annotations

import argparse
import json
import tarfile
from pathlib import Path

from lab.perf.perf_servers import SERVERS
from lab.perf.run_errors import log

MAX_FILE_BYTES = 16 * 1024 * 1024 - 4096  # the device tool returns files up to 16 MiB


def pack_if(args: argparse.Namespace, names: list[str] | None = None) -> None:
    """Pack `names` (default: this call's servers) into --out, when given."""
    if getattr(args, "out", None):
        pack(args.results, args.out, names or args.server or list(SERVERS))


def pack(results: Path, out: Path, names: list[str]) -> list[Path]:
    """Per server one tarball (its results and both traces) and one text. A tarball over the device tool's
    16 MiB is written again without the traces, which are then named on stderr as left behind."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        folder = results / name
        if not folder.is_dir():
            continue
        tarball = out / f"perf-{name}.tar.gz"
        with tarfile.open(tarball, "w:gz") as tar:
            tar.add(folder, arcname=name)
        if tarball.stat().st_size > MAX_FILE_BYTES:
            traces = sorted(str(p) for p in folder.glob("*/*.trace.json.gz"))
            log(f"{tarball} is over the device tool's 16 MiB: packed without {', '.join(traces)}")
            with tarfile.open(tarball, "w:gz") as tar:
                tar.add(
                    folder, arcname=name, filter=lambda t: None if t.name.endswith(".trace.json.gz") else t
                )
        written.append(tarball)
        text = out / f"perf-{name}.txt"
        text.write_text(server_text(folder))
        written.append(text)
    return written


def server_text(folder: Path) -> str:
    parts = []
    for name in ("run.json", "meta.json"):
        if (folder / name).exists():
            parts.append(f"== {name}\n{(folder / name).read_text()}")
    for path in sorted(folder.glob("bench*.json")):
        rows = json.loads(path.read_text()).get("rows", [])
        parts.append(
            f"== {path.stem}\n"
            + "\n".join(
                f"{r['prompt_tokens']} tokens: {r['decode_tps']:.2f} t/s, TTFT {r['ttft_s']:.3f} s"
                for r in rows
            )
        )
    for path in [*sorted(folder.glob("breakdown*.md")), folder / "prefill.md"]:
        if path.exists():
            parts.append(f"== {path.name}\n" + path.read_text())
    return "\n\n".join(parts) + "\n"
