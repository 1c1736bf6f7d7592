"""A server in SGLang 0.5.20's shapes (bx_fake_servers.py's FakeServer, whose shapes cite SGLang's
sources) answering with canned, deterministic values instead of a model's: what a broken or
misconfigured server sends, for the bad-input catalogue (reliability_catalogue.py) and the battery commands
(test_battery_commands.py), without a model to load.

Behaviours: `normal`; `nan` and `inf` (position 2 of every answer; written with Python's json, which
writes the non-standard literals a server with broken numerics sends); `short` (half the tokens asked);
`empty` (no tokens at all), `notop` (no top-k alternatives), `sometop` (alternatives at the first
position only), `positive` (logprobs of +0.5: a probability above 1): answers that cannot be compared
in full (bitexact/answers.py); `shapeless` (the first `output_token_logprobs` entry an object, not a
`(logprob, token_id, text)` triple: what the fuzzer, test_bitexact_fuzz_answers.py, first sent);
`badid` (the token id -5 at position 0: an id no engine can produce); `dupkey` (`output_ids` given
twice in the answer, the first copy other ids: JSON whose meaning depends on which copy a reader keeps);
`stopped` (half the tokens asked, with SGLang's stop reason: an engine that stopped at a stop token,
as none should under bitexact's `ignore_eos`); `twochoices` (an OpenAI-compatible answer holding two
choices where one was asked); `miscount` (`meta_info.completion_tokens` one more than the tokens sent),
`finish-length` (a FINISH_LENGTH whose `length` is one more than the tokens sent), `textid` (an
OpenAI-compatible answer naming an alternative `token_id:-3`, vLLM's spelling of an id no engine has),
`topnumber` (an OpenAI-compatible answer whose `logprobs.top_logprobs` is a number, not a list):
answers whose counts, ids or lists are not what they hold, found with the fuzzer's draws;
`spec` (the same values, with the speculation counters SGLang adds to meta_info after verify steps);
`drift` (`spec`, with the logprob at position 3 one float32 step away: a server whose bits moved).
With the radix cache on (`spec`'s counters too, as the recipe's `radix` variant speculates): `radix`
(answers from the cache equal those computed afresh), `radix-drift` (an answer that took tokens from the
cache has one logprob a float32 step off), `radix-never-hits` (the cache on by its args, no hit ever
reported), `radix-no-flush` (`radix` without `/flush_cache`: 404), `radix-hybrid` (the cache as SGLang
keeps a hybrid model's recurrent state: reused only where a state was kept, in 16-token units),
`radix-hybrid-64` (the same in the 64-token units the H200 run of 2026-12-02 measured: a prompt of 64
tokens or fewer never hits), `radix-empty` (`radix`,
answering 0 tokens), `radix-bad-count` (`radix`, reporting -1 cached prompt tokens: a count that is none).
Self-reports and the fields beside the values: `spec-bool` (`spec_verify_ct: true`, a boolean where a
count belongs), `latency-nan` (`e2e_latency` NaN), `truncated` (`prompt_tokens` one fewer than the ids
sent, as SGLang's `--allow-auto-truncate` answers a prompt longer than its context), `cached-over` (more
cached prompt tokens than the prompt holds), `longtop` (one alternative more than the top-k asked, below
the others), `notargmax` (at position 1 an alternative above the chosen token: a chosen token that is
not the reported argmax).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from checkhelpers.bx_fake_servers import HYBRID_UNIT_MEASURED, FakeServer

BEHAVIOURS = (
    "normal", "nan", "inf", "short", "spec", "drift", "empty", "notop", "sometop", "positive", "shapeless",
    "badid", "dupkey", "twochoices", "stopped", "miscount", "finish-length",
    "textid", "topnumber",
    "radix", "radix-drift", "radix-never-hits", "radix-no-flush", "radix-hybrid", "radix-hybrid-64",
    "radix-empty", "radix-bad-count",
    "spec-bool", "latency-nan", "truncated", "cached-over", "longtop", "notargmax",
)  # fmt: skip
# behaviour -> FakeServer's prefix-cache options
RADIX: dict[str, dict[str, object]] = {
    "radix": {"prefix_cache": "on"},
    "radix-drift": {"prefix_cache": "on", "warm_drift": True},
    "radix-never-hits": {"prefix_cache": "never-hits"},
    "radix-no-flush": {"prefix_cache": "on", "flush": "absent"},
    "radix-hybrid": {"prefix_cache": "hybrid"},
    "radix-hybrid-64": {"prefix_cache": "hybrid", "hybrid_unit": HYBRID_UNIT_MEASURED},
    "radix-empty": {"prefix_cache": "on"},
    "radix-bad-count": {"prefix_cache": "on"},
}


class _Twin(str):
    """A key equal in text to another of its object and not equal to it as a dict key: json.dumps then
    writes the key twice, as a server whose JSON writer repeats a field does."""

    def __hash__(self) -> int:
        return hash(("twin", str(self)))

    def __eq__(self, other: object) -> bool:
        return self is other


class CannedValues:
    """FakeServer's backend: token ids, logprobs and top-k computed from the prompt alone."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour

    def run(
        self, ids: list[int], new: int, k: int
    ) -> tuple[list[int], list[float], list[list[tuple[int, float]]]]:
        count = (
            max(1, new // 2)
            if self.behaviour in ("short", "stopped")
            else 0
            if self.behaviour.endswith("empty")
            else new
        )
        toks = [(sum(ids) + 7 * i) % 97 + 3 for i in range(count)]
        logprobs = [(0.5 if self.behaviour == "positive" else -0.125 * (1 + i % 5)) for i in range(count)]
        if self.behaviour == "nan" and count > 2:
            logprobs[2] = float("nan")
        if self.behaviour == "inf" and count > 2:
            logprobs[2] = float("-inf")
        if self.behaviour == "drift" and count > 3:
            logprobs[3] += 2.0**-22  # -0.5 + 2**-22: the next float32 above -0.5
        top = [[(tok + j, lp - j) for j in range(k)] for tok, lp in zip(toks, logprobs, strict=True)]
        if self.behaviour in ("notop", "sometop"):
            top = top[:1] if self.behaviour == "sometop" else []
        return toks, logprobs, top


class CannedSGLang(FakeServer):
    def __init__(
        self,
        behaviour: str = "normal",
        model_path: str = "Qwen/Qwen3.8-27B",
        port: int = 0,
        flavor: str = "sglang",
        **cache: object,
    ) -> None:
        """`cache`: FakeServer's prefix-cache options over the behaviour's (flush="refuse", say)."""
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"behaviour {behaviour!r}: one of {BEHAVIOURS}")
        spec = behaviour in ("spec", "drift") or behaviour in RADIX
        super().__init__(
            CannedValues(behaviour),  # type: ignore[arg-type]
            flavor=flavor,
            spec=spec,
            port=port,
            server_args={"model_path": model_path},
            **{**RADIX.get(behaviour, {}), **cache},  # type: ignore[arg-type]
        )

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = super().generate(body)
        entries = answer["meta_info"].get("output_token_logprobs")
        behaviour = self.backend.behaviour  # type: ignore[attr-defined]
        if behaviour == "shapeless" and entries:
            entries[0] = {}
        if behaviour == "badid" and entries:
            answer["output_ids"][0] = entries[0][1] = -5
        if behaviour == "stopped":
            answer["meta_info"]["finish_reason"] = {"type": "stop", "matched": answer["output_ids"][-1]}
        if behaviour == "dupkey":
            answer = {_Twin("output_ids"): [t + 1 for t in answer["output_ids"]], **answer}
        if behaviour == "miscount":
            answer["meta_info"]["completion_tokens"] += 1
        if behaviour == "finish-length":
            answer["meta_info"]["finish_reason"]["length"] += 1
        if behaviour == "radix-bad-count":
            answer["meta_info"]["cached_tokens"] = -1
        _self_reports(behaviour, body, answer["meta_info"])
        return answer

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = super().completion(body)
        if self.backend.behaviour == "twochoices":  # type: ignore[attr-defined]
            answer["choices"] = [answer["choices"][0], {**answer["choices"][0], "index": 1}]
        if self.backend.behaviour == "topnumber":  # type: ignore[attr-defined]
            answer["choices"][0]["logprobs"]["top_logprobs"] = -1.5
        if self.backend.behaviour == "textid":  # type: ignore[attr-defined]
            rows = answer["choices"][0]["logprobs"]["top_logprobs"]
            rows[0] = {**rows[0], "token_id:-3": -9.0}
        return answer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _self_reports(behaviour: str, body: dict[str, Any], meta: dict[str, Any]) -> None:
    """The behaviours that change what an answer says beside its values (or its top-k rows)."""
    sent = len(body.get("input_ids") or [])
    rows = meta.get("output_top_logprobs") or []
    if behaviour == "spec-bool":
        meta["spec_verify_ct"] = True
    if behaviour == "latency-nan":
        meta["e2e_latency"] = float("nan")
    if behaviour == "truncated":
        meta["prompt_tokens"] = sent - 1
    if behaviour == "cached-over":
        meta["prompt_tokens"], meta["cached_tokens"] = sent, sent + 5
    if behaviour == "longtop":
        for row in rows:
            taken = {entry[1] for entry in row}
            extra = next(t for t in range(1000) if t not in taken)
            row.append([min(entry[0] for entry in row) - 1.0, extra, None])
    if behaviour == "notargmax" and len(rows) > 1:
        chosen = meta["output_token_logprobs"][1]
        other = next(entry for entry in rows[1] if entry[1] != chosen[1])
        other[0] = chosen[0] / 2  # above the chosen token's logprob (both below 0)


def main(argv: list[str] | None = None) -> int:
    """`python -m checkhelpers.canned_sglang --port P [--behaviour B]`: one canned server as a process
    until SIGTERM (the replicas of a fleet behind the real router, in test_fleet.py). Extra arguments, such
    as the SGLang flags a fleet plan gives its replicas, are accepted and ignored."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--behaviour", default="normal", choices=BEHAVIOURS)
    args, _ = parser.parse_known_args(argv)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    with CannedSGLang(args.behaviour, port=args.port):
        stopped.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
