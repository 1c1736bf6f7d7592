"""The batteries on transformers, on whatever device is at hand (the lent H200 for docs/bitexact.md).

Makes tiny and larger random Qwen3-architecture models (fixed seeds, no download), then runs bitexact's
verbs in this one process (one torch import) under a wall-clock budget, writing every summary to
OUT/results.json as it goes and the reports to OUT/reports.tar.gz.

    python docs/evidence/bitexact-h200-2026-11-30/scripts/device_batteries.py OUT
        [--device cuda] [--budget-s S] [--work DIR]
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


def make_model(
    path: Path, *, layers: int, hidden: int, heads: int, kv: int, vocab: int, seed: int, device: str
) -> Path:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=3 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=hidden // heads,
        max_position_embeddings=140_000,
        tie_word_embeddings=False,
    )
    with torch.device(device):
        model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(8)  # peakier next-token distributions than a random init gives
    model.to(torch.bfloat16).save_pretrained(path)
    return path


def run(argv: list[str]) -> tuple[int, Any, float]:
    start = time.perf_counter()
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        rc = bitexact(argv + ["--json"])
    text = buffer.getvalue().strip()
    return rc, (json.loads(text) if text else None), time.perf_counter() - start


def brief(summary: Any) -> Any:
    """Drop per-prompt detail that the reports already hold, keep the figures."""
    if not isinstance(summary, dict):
        return summary
    keep = {k: v for k, v in summary.items() if k not in ("comparisons", "per_prompt")}
    if "comparisons" in summary:
        keep["divergences"] = [
            {
                k: c[k]
                for k in ("prompt_id", "first_divergence", "first_token_divergence", "margin_a", "margin_b")
            }
            for c in summary["comparisons"]
            if not c["equal"]
        ]
    if "per_prompt" in summary:
        keep["per_prompt"] = [
            {k: r[k] for k in ("prompt_id", "compared", "divergent")} for r in summary["per_prompt"]
        ]
    return keep


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget-s", type=float, default=150.0)
    parser.add_argument("--small", action="store_true", help="shrink everything (a CPU dry run)")
    parser.add_argument("--work", type=Path, help="models and JSONL results (default OUT/work)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or args.out / "work"
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
    small = args.small
    m = work / "models"
    tiny = make_model(
        m / "tiny",
        layers=2 if small else 6,
        hidden=64 if small else 512,
        heads=4 if small else 8,
        kv=2 if small else 4,
        vocab=4096,
        seed=0,
        device=args.device,
    )
    tiny_draft = make_model(
        m / "tiny-draft",
        layers=1 if small else 2,
        hidden=32 if small else 256,
        heads=4,
        kv=2,
        vocab=4096,
        seed=1,
        device=args.device,
    )
    large = make_model(
        m / "large",
        layers=2 if small else 12,
        hidden=128 if small else 1536,
        heads=4 if small else 12,
        kv=2 if small else 4,
        vocab=32000,
        seed=2,
        device=args.device,
    )
    large_draft = make_model(
        m / "large-draft",
        layers=1 if small else 2,
        hidden=64 if small else 512,
        heads=4,
        kv=2,
        vocab=32000,
        seed=3,
        device=args.device,
    )
    results["setup_s"] = round(time.perf_counter() - t0, 1)
    dev = args.device
    n = "8" if small else "32"
    limit = ["--limit", "4"] if small else []
    common = ["--tokenizer", "bytes", "--max-new-tokens", n, "--top-logprobs", "5", *limit]
    golden_dir = work / "golden"
    steps: list[tuple[str, list[str]]] = []
    for name, target, draft in (("tiny", tiny, tiny_draft), ("large", large, large_draft)):
        plain = f"hf:{target}?device={dev}"
        out = ["--out", str(work / name)]
        steps += [
            (f"{name}: plain vs plain", ["parity", plain, plain, *common, *out, "--name", "plain-vs-plain"]),
            (
                f"{name}: plain vs assisted",
                ["parity", plain, f"{plain}&assistant={draft}", *common, *out, "--name", "plain-vs-assisted"],
            ),
            (
                f"{name}: alone vs batch 8",
                ["parity", plain, f"{plain}&batch=8", *common, *out, "--name", "alone-vs-batch8"],
            ),
        ]
    tiny_plain = f"hf:{tiny}?device={dev}"
    gold = [
        "--recipe-name",
        "tiny-random",
        "--golden-dir",
        str(golden_dir),
        *common,
        "--out",
        str(work / "golden-run"),
    ]
    steps += [
        ("tiny: golden record", ["golden", "record", tiny_plain, *gold]),
        ("tiny: golden check", ["golden", "check", tiny_plain, *gold]),
        (
            "tiny: repeat 8x8",
            ["repeat", tiny_plain, "-n", "8", "-b", "8", *common, "--limit", "4", "--out", str(work / "rep")],
        ),
        (
            "large: bench",
            [
                "bench",
                f"hf:{large}?device={dev}",
                "--lengths",
                "64,256" if small else "640,2200,128k",
                "--new-tokens",
                "16" if small else "64",
                "--vocab-size",
                "32000",
                "--warmup",
                "1",
            ],
        ),
    ]
    for label, argv in steps:
        elapsed = time.perf_counter() - t0
        if elapsed > args.budget_s:
            results["steps"].append({"step": label, "skipped": f"budget spent ({elapsed:.0f}s)"})
            continue
        print(f"== {label}", file=sys.stderr, flush=True)
        try:
            rc, summary, seconds = run(argv)
            results["steps"].append(
                {"step": label, "rc": rc, "seconds": round(seconds, 1), "summary": brief(summary)}
            )
        except Exception as exc:  # keep going: one failed step must not lose the others' figures
            results["steps"].append({"step": label, "error": repr(exc)})
        (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    with tarfile.open(args.out / "reports.tar.gz", "w:gz") as tar:
        for report in sorted(work.rglob("*.md")) + sorted(work.rglob("*.html")):
            tar.add(report, arcname=str(report.relative_to(work)))
    results["total_s"] = round(time.perf_counter() - t0, 1)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
