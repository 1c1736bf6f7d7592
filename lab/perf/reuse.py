"""What prefix reuse buys (issue 27, part 4): time to the first token of a request whose shared prefix the
radix cache holds, against the same request computed afresh, on one server with the cache on.

For each prefix length P (default 2048 and 32768 tokens) and trial t: `/flush_cache`; the cold request
is prefix + question A (its answer must report 0 cached tokens); then, untimed, prefix + question C, so
that a cache which keeps a hybrid model's recurrent state only where a match stopped (SGLang's
`no_buffer`) holds one inside the prefix too; the warm one is prefix + question B (it must report cached
tokens, at most P: the reuse stops at the last kept state inside the prefix, every 64 tokens with
SGLang's `extra_buffer`). Every request asks for one new token, so its time
is the prefill and the first token. Prefixes and questions are random token ids, a new prefix per trial;
one throwaway request first, so that no compile lands in a timed one. Rows are appended to
`reuse.jsonl` as they come and a rerun keeps them (the run's settings are its first line; other
settings are refused); `summary` gives the medians per P.

Standard library only. Used by lab/perf/measure.py (`run.py measure`: the radix servers' `reuse` stage).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PREFIXES = (2048, 32768)
QUESTION_TOKENS = 64
TRIALS = 3
VOCAB = (1000, 30000)  # token ids drawn from here: plain vocabulary of any tokenizer the perf model has

Post = Callable[[str, dict[str, Any] | None, float], str]


class ReuseError(RuntimeError):
    """The server did not behave as a reuse measurement needs (no hit, a hit when cold, a bad answer)."""


def _ids(rng: random.Random, count: int) -> list[int]:
    return [rng.randrange(*VOCAB) for _ in range(count)]


def _first_token(post: Post, ids: list[int], timeout: float) -> tuple[float, int]:
    """(seconds, cached prompt tokens) of one request for a single new token."""
    body = {"input_ids": ids, "sampling_params": {"temperature": 0.0, "max_new_tokens": 1}}
    began = time.perf_counter()
    text = post("/generate", body, timeout)
    seconds = time.perf_counter() - began
    try:
        meta = json.loads(text)["meta_info"]
        cached = meta["cached_tokens"]
    except (ValueError, KeyError, TypeError) as error:
        raise ReuseError(f"/generate answered without meta_info.cached_tokens: {text[:300]!r}") from error
    if not isinstance(cached, int) or isinstance(cached, bool) or cached < 0:
        raise ReuseError(f"/generate reported cached_tokens {cached!r}: not a count")
    return seconds, cached


def settings(prefixes: tuple[int, ...], trials: int, seed: int) -> dict[str, Any]:
    return {"prefixes": list(prefixes), "question_tokens": QUESTION_TOKENS, "trials": trials, "seed": seed}


def _done_rows(path: Path, wanted: dict[str, Any]) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not lines or lines[0].get("settings") != wanted:
        have = lines[0].get("settings") if lines else None
        raise ReuseError(f"{path} holds a run with other settings ({have}): move it away or pick new results")
    return lines[1:]


def measure(
    post: Post,
    out: Path,
    prefixes: tuple[int, ...] = PREFIXES,
    trials: int = TRIALS,
    seed: int = 0,
    timeout: float = 600,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Cold and warm requests per prefix and trial into out/reuse.jsonl (resumed); the summary."""
    path = out / "reuse.jsonl"
    wanted = settings(prefixes, trials, seed)
    rows = _done_rows(path, wanted)
    if not path.exists():
        path.write_text(json.dumps({"settings": wanted}) + "\n")
    done = {(r["prefix"], r["trial"]) for r in rows}
    rng = random.Random(seed)
    plan = []
    for length in prefixes:
        for trial in range(trials):
            questions = [_ids(rng, QUESTION_TOKENS) for _ in range(3)]
            for i, question in enumerate(questions):
                question[0] = VOCAB[0] + i  # the requests share the prefix and nothing more
            plan.append((length, trial, _ids(rng, length), questions))
    if any((p, t) not in done for p, t, *_ in plan):
        post("/flush_cache", None, timeout)
        _first_token(post, _ids(rng, 256), timeout)  # the throwaway request
    for length, trial, prefix, (question_a, question_b, question_c) in plan:
        if (length, trial) in done:
            continue
        post("/flush_cache", None, timeout)
        cold_s, cold_cached = _first_token(post, prefix + question_a, timeout)
        if cold_cached:
            raise ReuseError(
                f"prefix {length}, trial {trial}: the cold request reported {cold_cached} cached tokens "
                "after /flush_cache"
            )
        _first_token(post, prefix + question_c, timeout)  # keeps a state inside the prefix, untimed
        warm_s, warm_cached = _first_token(post, prefix + question_b, timeout)
        if not 0 < warm_cached <= length:
            raise ReuseError(
                f"prefix {length}, trial {trial}: the warm request reported {warm_cached} cached tokens "
                f"(want 1..{length}): is the radix cache on?"
            )
        row = {"prefix": length, "trial": trial, "cold_s": cold_s, "warm_s": warm_s}
        row["warm_cached"] = warm_cached
        with path.open("a") as sink:
            sink.write(json.dumps(row) + "\n")
        rows.append(row)
        log(f"prefix {length} trial {trial}: cold {cold_s * 1e3:.1f} ms, warm {warm_s * 1e3:.1f} ms")
    return summary(rows)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per prefix: median cold and warm seconds, warm / cold, and the cached tokens seen."""
    out: dict[str, Any] = {"prefixes": []}
    for length in sorted({r["prefix"] for r in rows}):
        mine = [r for r in rows if r["prefix"] == length]
        cold = statistics.median(r["cold_s"] for r in mine)
        warm = statistics.median(r["warm_s"] for r in mine)
        out["prefixes"].append(
            {
                "prefix": length,
                "trials": len(mine),
                "cold_ms": round(cold * 1000, 1),
                "warm_ms": round(warm * 1000, 1),
                "warm_over_cold": round(warm / cold, 3),
                "warm_cached": sorted({r["warm_cached"] for r in mine}),
            }
        )
    return out


def markdown(results: dict[str, dict[str, Any]]) -> str:
    """A table of `{server: summary}`: time to the first token cold and warm per prefix."""
    lines = [
        "| server | shared prefix | cold ms | warm ms | warm / cold | cached tokens | trials |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for name, found in results.items():
        for p in found["prefixes"]:
            cached = ", ".join(map(str, p["warm_cached"]))
            cells = [name, p["prefix"], p["cold_ms"], p["warm_ms"], p["warm_over_cold"], cached, p["trials"]]
            lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines) + "\n"
