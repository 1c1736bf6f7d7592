"""The batteries that device_batteries.py's H200 call had no time left for, in one process.

golden record / check (same engine, a card with no golden, batch 8), `repeat` of identical requests in
batches, the larger model alone vs batch 8, the larger model plain vs plain twice after a warm-up (is
run-to-run divergence a first-call effect?), and `bench`. Every step goes through bitexact's CLI; results
land in OUT/results.json and the reports and golden in OUT/reports.tar.gz after each step, so a call
that is cut short still returns what finished. The device returns only a few files from OUT, so the
models, JSONL results and reports live in --work (outside OUT) and travel back in the archive.

    python docs/evidence/bitexact-h200-2026-11-30/scripts/device_remaining.py OUT
        [--device cuda] [--budget-s S] [--small]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from bitexact.cli import main as bitexact
from bitexact.compare import compare
from bitexact.generation import Generation

sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_batteries import brief, make_model  # noqa: E402  (a sibling script, not a package)


def run(argv: list[str]) -> tuple[int, Any, float, str]:
    """One CLI call: exit code, the --json summary, seconds, and its last stderr line (the error, if any)."""
    start = time.perf_counter()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = bitexact(argv + ["--json"])
    sys.stderr.write(err.getvalue()[-2000:])
    text = out.getvalue().strip()
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    return rc, (json.loads(text) if text else None), time.perf_counter() - start, lines[-1] if lines else ""


def stored_runs(folder: Path, tag: str) -> list[Generation]:
    """The generations one parity side stored in `folder` (its JSONL), in the order they were written."""
    (path,) = sorted(folder.glob(f"{tag}-*.jsonl"))
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Generation.from_json(row["generation"]) for row in rows if "generation" in row]  # not the header


def cross_compare(runs: dict[str, list[Generation]]) -> list[dict[str, Any]]:
    """Every later run against the first: prompts equal, and where the others first part."""
    names = list(runs)
    first = {g.prompt_id: g for g in runs[names[0]]}
    out = []
    for name in names[1:]:
        comps = [compare(first[g.prompt_id], g) for g in runs[name] if g.prompt_id in first]
        out.append(
            {
                "a": names[0],
                "b": name,
                "prompts": len(comps),
                "equal": sum(c.equal for c in comps),
                "divergences": [
                    {
                        "prompt_id": c.prompt_id,
                        "first_divergence": c.first_divergence,
                        "first_token_divergence": c.first_token_divergence,
                        "logprob_a": c.logprob_a,
                        "logprob_b": c.logprob_b,
                        "token_margin_a": c.token_margin_a,
                        "token_margin_b": c.token_margin_b,
                    }
                    for c in comps
                    if not c.equal
                ],
            }
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget-s", type=float, default=140.0, help="start no step after this")
    parser.add_argument("--small", action="store_true", help="shrink everything (a CPU dry run)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bx-work"), help="models, JSONL, reports")
    args = parser.parse_args()
    t0 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work
    import torch
    import transformers

    results: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "steps": [],
    }

    def save() -> None:
        (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
        with tarfile.open(args.out / "reports.tar.gz", "w:gz") as tar:
            for pattern in ("*.md", "*.html", "golden/*/*.json"):
                for path in sorted(work.glob(pattern if "/" in pattern else f"**/{pattern}")):
                    tar.add(path, arcname=str(path.relative_to(work)))

    small = args.small
    tiny = make_model(
        work / "models" / "tiny",
        layers=2 if small else 6,
        hidden=64 if small else 512,
        heads=4 if small else 8,
        kv=2 if small else 4,
        vocab=4096,
        seed=0,
        device=args.device,
    )
    large = make_model(
        work / "models" / "large",
        layers=2 if small else 12,
        hidden=128 if small else 1536,
        heads=4 if small else 12,
        kv=2 if small else 4,
        vocab=32000,
        seed=2,
        device=args.device,
    )
    results["setup_s"] = round(time.perf_counter() - t0, 1)
    save()
    dev = args.device
    limit = ["--limit", "4"] if small else []
    short = ["--tokenizer", "bytes", "--max-new-tokens", "16", "--top-logprobs", "5", *limit]
    full = ["--tokenizer", "bytes", "--max-new-tokens", "8" if small else "32", "--top-logprobs", "5", *limit]
    tiny_plain = f"hf:{tiny}?device={dev}"
    large_plain = f"hf:{large}?device={dev}"
    gold = ["--recipe-name", "tiny-random", "--golden-dir", str(work / "golden"), *short]
    steps: list[tuple[str, list[str]]] = [
        ("tiny: golden record", ["golden", "record", tiny_plain, *gold, "--out", str(work / "g-rec")]),
        (
            "tiny: golden check, same engine",
            ["golden", "check", tiny_plain, *gold, "--out", str(work / "g-same")],
        ),
        (
            "tiny: golden check, card without a golden",
            ["golden", "check", tiny_plain, *gold, "--card", "h100", "--out", str(work / "g-card")],
        ),
        (
            "tiny: golden check, batch 8",
            ["golden", "check", f"{tiny_plain}&batch=8", *gold, "--out", str(work / "g-batch8")],
        ),
        (
            "tiny: repeat 8 in batches of 8",
            ["repeat", tiny_plain, "-n", "8", "-b", "8", *short, "--out", str(work / "repeat")],
        ),
        # The larger model's first use in this process: its alone side is the warm-up (run 0).
        (
            "large: alone vs batch 8 (alone = first use, run 0)",
            [
                "parity",
                large_plain,
                f"{large_plain}&batch=8",
                *full,
                "--out",
                str(work / "large-0"),
                "--name",
                "alone-vs-batch8",
            ],
        ),
        (
            "large: plain vs plain, warm (runs 1, 2)",
            ["parity", large_plain, large_plain, *full, "--out", str(work / "large-1"), "--name", "warm-1"],
        ),
        (
            "large: plain vs plain, warm again (runs 3, 4)",
            ["parity", large_plain, large_plain, *full, "--out", str(work / "large-2"), "--name", "warm-2"],
        ),
        (
            "large: bench 640 / 2.2k / 8k",
            [
                "bench",
                large_plain,
                "--lengths",
                "64,256" if small else "640,2200,8k",
                "--new-tokens",
                "16" if small else "64",
                "--vocab-size",
                "32000",
                "--warmup",
                "1",
            ],
        ),
        (
            "large: bench 32k / 128k (no warm-up run)",
            [
                "bench",
                large_plain,
                "--lengths",
                "1k" if small else "32k,128k",
                "--new-tokens",
                "16" if small else "32",
                "--vocab-size",
                "32000",
                "--warmup",
                "0",
            ],
        ),
    ]
    for label, argv in steps:
        elapsed = time.perf_counter() - t0
        if elapsed > args.budget_s:
            results["steps"].append({"step": label, "skipped": f"budget spent ({elapsed:.0f}s)"})
            save()
            continue
        print(f"== {label} (t={elapsed:.0f}s)", file=sys.stderr, flush=True)
        try:
            rc, summary, seconds, last = run(argv)
            step = {"step": label, "rc": rc, "seconds": round(seconds, 1), "summary": brief(summary)}
            if rc == 2:
                step["stderr"] = last
            results["steps"].append(step)
        except Exception as exc:  # keep going: one failed step must not lose the others' figures
            results["steps"].append({"step": label, "error": repr(exc)})
        save()
    runs: dict[str, list[Generation]] = {}
    for name, folder, tag in (
        ("run 0 (first use)", "large-0", "A"),
        ("run 1", "large-1", "A"),
        ("run 2", "large-1", "B"),
        ("run 3", "large-2", "A"),
        ("run 4", "large-2", "B"),
    ):
        try:
            runs[name] = stored_runs(work / folder, tag)
        except ValueError:  # that step did not run
            break
    if len(runs) > 1:
        results["large_runs_vs_run0"] = cross_compare(runs)
    results["total_s"] = round(time.perf_counter() - t0, 1)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
