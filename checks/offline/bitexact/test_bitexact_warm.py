"""`bitexact warm` end to end against real local HTTP servers with a prefix cache, in SGLang's native shape
and vLLM's OpenAI shape (bx_fake_servers.py cites both): a cache whose answers equal those computed
afresh (EQUAL, 0), one that moves a bit (DIFFERENT, 1), one that never reports a hit, one switched off,
and flush endpoints that are absent or refuse (refused, 2, naming why)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bitexact.cli import main
from bitexact.prompts import Prompt
from bitexact.warmplan import alignment, plain_plan, shared_plan
from checkhelpers.bx_cli import SETTINGS, rows
from checkhelpers.bx_fake_servers import FakeServer
from checkhelpers.canned_sglang import CannedSGLang, CannedValues

PROMPTS = 6  # conftest's prompt_file: p0..p5, random ids that share no first token


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict, str]:
    rc = main([*argv, "--json"])
    captured = capsys.readouterr()
    return rc, (json.loads(captured.out) if captured.out.strip() else {}), captured.err


def _warm(url: str, prompt_file: Path, out: Path, *extra: str) -> list[str]:
    return ["warm", url, "--prompts", str(prompt_file), "--out", str(out), *SETTINGS, *extra]


def test_answers_from_the_cache_equal_the_cold_ones(prompt_file, tmp_path, capsys) -> None:
    with CannedSGLang("radix") as server:
        rc, summary, _ = _run(
            capsys, _warm(f"sglang+{server.url}", prompt_file, tmp_path, "--warm-passes", "2")
        )
    assert rc == 0, summary
    assert (summary["equal"], summary["compared"], summary["differ"]) == (2 * PROMPTS, 2 * PROMPTS, 0)
    assert [p["name"] for p in summary["passes"]] == ["cold", "warm1", "warm2"]
    # A flush before every cold answer; the cold ones took nothing from the cache, each warm one every
    # prompt token but the last (SGLang computes the last one's logits)
    assert server.flushes == [200] * PROMPTS and summary["flush"]["flushed"] == PROMPTS
    for row in summary["hits"]:
        assert row["cold"] == 0 and row["warm1"] == row["warm2"] == row["prompt_tokens"] - 1
    # Each prompt cold, one fill (it hits at once), then warm: the order the plan sends them in
    sent = [len(r["body"]["input_ids"]) for r in server.requests]
    lengths = [row["prompt_tokens"] for row in summary["hits"]]
    assert sent == [n for n in lengths for _ in range(4)]
    assert [p["cached_tokens"] for p in summary["primes"]] == [[n - 1] for n in lengths]
    assert (tmp_path / "warm.md").read_text().startswith("# warm: ")
    assert (tmp_path / "warm-warm1.html").is_file() and (tmp_path / "warm-warm2.md").is_file()


def test_a_cache_that_moves_a_bit_is_different(prompt_file, tmp_path, capsys) -> None:
    with CannedSGLang("radix-drift") as server:
        rc, summary, _ = _run(capsys, _warm(f"sglang+{server.url}", prompt_file, tmp_path))
    assert rc == 1 and summary["differ"] == PROMPTS and summary["equal"] == 0
    (warm,) = [p for p in summary["passes"] if p["name"] == "warm1"]
    assert warm["tokens_differ"] == 0  # logprobs only, as on the H200
    for comp in warm["comparisons"]:
        assert (comp["first_divergence"], comp["differs_in"], comp["logprob_ulps"]) == (
            1,
            "logprob, top-k",
            1,
        )
    assert "DIFFERENT" in (tmp_path / "warm.md").read_text()


def test_a_warm_pass_without_hits_is_refused(prompt_file, tmp_path, capsys) -> None:
    """The cache is on by the server's args but never hits: the answers are equal, and prove nothing."""
    with CannedSGLang("radix-never-hits") as server:
        rc, summary, err = _run(capsys, _warm(f"sglang+{server.url}", prompt_file, tmp_path))
    assert rc == 2 and summary == {}
    assert "pass warm1 shows no cache hits for 6/6 prompts (cached tokens reported: p0 (0)" in err
    assert "meta_info.cached_tokens" in err and f"report: {tmp_path / 'warm.md'}" in err
    assert "refused: pass warm1" in (tmp_path / "warm.md").read_text()
    assert (
        len(server.requests) == 2 * PROMPTS + 3 * PROMPTS
    )  # it ran (3 fills each), then refused to count it


def test_a_server_with_the_cache_off_is_refused_before_any_prompt(prompt_file, tmp_path, capsys) -> None:
    with CannedSGLang("spec") as server:  # disable_radix_cache: true in /server_info
        rc, _, err = _run(capsys, _warm(f"sglang+{server.url}", prompt_file, tmp_path))
    assert rc == 2 and "runs with --disable-radix-cache" in err and "`radix` variant" in err
    assert server.requests == [] and server.flushes == []


def test_without_a_flush_a_cold_pass_counts_only_without_hits(prompt_file, tmp_path, capsys) -> None:
    """/flush_cache absent (404): asked once, said so; prompts that share no prefix are still cold."""
    with CannedSGLang("radix-no-flush") as server:
        rc, summary, err = _run(capsys, _warm(f"sglang+{server.url}", prompt_file, tmp_path))
    assert rc == 0 and summary["equal"] == PROMPTS
    assert server.flushes == [404] and summary["flush"]["failed"] == PROMPTS
    assert err.count("the cache could not be flushed (/flush_cache: HTTP 404") == 1


@pytest.mark.parametrize("flush", ["absent", "refuse"])
def test_a_shared_prefix_without_a_flush_is_refused(flush, prompt_file, tmp_path, capsys) -> None:
    """The second cold question finds the first one's prefix in the cache: not cold, so refused, naming
    the flush's answer (SGLang: 404, or 400 with the scheduler's message)."""
    with CannedSGLang("radix", flush=flush) as server:
        argv = _warm(
            f"sglang+{server.url}", prompt_file, tmp_path, "--shared-prefix", "37", "--vocab-size", "90"
        )
        rc, _, err = _run(capsys, argv)
    assert rc == 2
    assert "the cold pass took prompt tokens from the cache for 5/6 prompts, e.g. p1 (37 tokens)" in err
    said = "HTTP 404" if flush == "absent" else "HTTP 400 (Timed out waiting for idle state.)"
    assert f"the flush failed: /flush_cache: {said}" in err
    assert server.flushes == ([404] if flush == "absent" else [400] * (PROMPTS + 1))


def test_a_shared_prefix_is_cached_alone_then_extended(prompt_file, tmp_path, capsys) -> None:
    with CannedSGLang("radix") as server:
        argv = _warm(
            f"sglang+{server.url}", prompt_file, tmp_path, "--shared-prefix", "37", "--vocab-size", "90"
        )
        rc, summary, _ = _run(capsys, [*argv, "--inflight", "3", "--warm-passes", "2"])
    assert rc == 0 and summary["mode"] == "shared-prefix" and summary["compared"] == 2 * PROMPTS
    assert summary["prefix_alignment"].startswith("37 tokens: odd")
    for row in summary["hits"]:  # the prefix, and at most the one token the fill generated after it
        assert row["cold"] == 0 and 37 <= row["shared1"] <= 38 and 37 <= row["shared2"] <= 38
    # a flush before each cold question and each shared pass; then the prefix alone until it hits
    assert server.flushes == [200] * (PROMPTS + 2)
    assert [p["prompt"] for p in summary["primes"]] == ["shared-prefix", "shared-prefix"]
    assert all(p["cached_tokens"] == [0, 36] for p in summary["primes"])
    sent = [r["body"]["input_ids"] for r in server.requests]
    prefix = sent[PROMPTS][:37]
    assert sent[PROMPTS] == prefix and all(ids[:37] == prefix for ids in sent)


def test_a_hybrid_models_cache_hits_after_one_more_fill(tmp_path, capsys) -> None:
    """SGLang keeps a hybrid model's recurrent state only at the ends of cached sequences and at the chunk
    boundary where a match fell short: the first fill after the cold answer hits nothing and makes that
    state; the second and the warm answers hit up to it."""
    with CannedSGLang("radix-hybrid") as server:
        rc, summary, err = _run(
            capsys, ["warm", f"sglang+{server.url}", "--limit", "4", "--out", str(tmp_path), *SETTINGS]
        )
    assert rc == 0, err
    for row, prime in zip(summary["hits"], summary["primes"], strict=True):
        aligned = (row["prompt_tokens"] - 1) // 16 * 16
        assert prime["cached_tokens"] == [0, aligned] and row["warm1"] == aligned > 0


def test_a_hybrid_models_shared_prefix_needs_three_fills(prompt_file, tmp_path, capsys) -> None:
    with CannedSGLang("radix-hybrid") as server:
        argv = _warm(
            f"sglang+{server.url}", prompt_file, tmp_path, "--shared-prefix", "37", "--vocab-size", "90"
        )
        rc, summary, err = _run(capsys, argv)
    assert rc == 0, err
    assert summary["primes"][0]["cached_tokens"] == [0, 0, 32]
    assert all(row["shared1"] == 32 for row in summary["hits"])


def test_a_hybrid_models_short_prompts_never_hit(prompt_file, tmp_path, capsys) -> None:
    """p0 (5 tokens) and p2 (11) are shorter than a chunk: no state inside them, no hit, refused."""
    with CannedSGLang("radix-hybrid") as server:
        rc, _, err = _run(capsys, _warm(f"sglang+{server.url}", prompt_file, tmp_path))
    assert rc == 2 and "no cache hits for 2/6 prompts (cached tokens reported: p0 (0), p2 (0))" in err


def test_the_shared_prefix_needs_token_ids(tmp_path, capsys) -> None:
    with CannedSGLang("radix") as server:
        rc, _, err = _run(
            capsys, ["warm", f"sglang+{server.url}", "--shared-prefix", "37", "--out", str(tmp_path)]
        )
    assert rc == 2 and "give --tokenizer" in err and server.requests == []


def test_vllm_reports_hits_in_usage_and_resets_its_prefix_cache(prompt_file, tmp_path, capsys) -> None:
    with FakeServer(CannedValues("normal"), flavor="vllm", prefix_cache="on") as server:  # type: ignore[arg-type]
        url = f"openai+http://127.0.0.1:{server.port}/v1?model=tiny"
        rc, summary, _ = _run(capsys, _warm(url, prompt_file, tmp_path))
    assert rc == 0 and summary["equal"] == PROMPTS
    assert summary["flush"]["endpoint"] == "/reset_prefix_cache" and server.flushes == [200] * PROMPTS
    assert all(row["cold"] is None and row["warm1"] == row["prompt_tokens"] - 1 for row in summary["hits"])


def test_vllm_without_the_counts_is_refused(prompt_file, tmp_path, capsys) -> None:
    """A vLLM that does not report cached tokens (no --enable-prompt-tokens-details, or no cache) leaves
    usage.prompt_tokens_details out: no hit is shown, so the warm pass cannot count."""
    with FakeServer(CannedValues("normal"), flavor="vllm", prefix_cache="never-hits") as server:  # type: ignore[arg-type]
        rc, _, err = _run(
            capsys, _warm(f"openai+http://127.0.0.1:{server.port}/v1?model=tiny", prompt_file, tmp_path)
        )
    assert rc == 2 and "(cached tokens reported: p0 (-)" in err and "--enable-prompt-tokens-details" in err


def test_a_vllm_reset_that_resets_nothing_is_caught_by_the_cold_hits(prompt_file, tmp_path, capsys) -> None:
    """vLLM answers 200 to /reset_prefix_cache whether or not it reset: the hits tell."""
    backend = CannedValues("normal")
    with FakeServer(backend, flavor="vllm", prefix_cache="on", flush="refuse") as server:  # type: ignore[arg-type]
        url = f"openai+http://127.0.0.1:{server.port}/v1?model=tiny"
        rc, _, err = _run(
            capsys, _warm(url, prompt_file, tmp_path, "--shared-prefix", "37", "--vocab-size", "90")
        )
    assert rc == 2 and "the flush did not empty it" in err and server.flushes == [200] * 7


def test_every_pass_against_a_golden_recorded_with_the_cache_off(prompt_file, tmp_path, capsys) -> None:
    golden = tmp_path / "golden.json"
    with CannedSGLang("normal") as server:
        record = ["golden", "record", f"sglang+{server.url}", "--card", "h200", "--recipe-name", "tiny"]
        rc, _, err = _run(
            capsys, [*record, "--golden", str(golden), "--prompts", str(prompt_file), *SETTINGS]
        )
        assert rc == 0, err
    check = ["--golden", str(golden), "--card", "h200", "--recipe-name", "tiny"]
    for behaviour, rc_want, equal in (("radix", 0, 2 * PROMPTS), ("radix-drift", 1, PROMPTS)):
        with CannedSGLang(behaviour) as server:
            argv = ["warm", f"sglang+{server.url}", "--out", str(tmp_path / behaviour), *check]
            rc, summary, err = _run(capsys, argv)
        assert rc == rc_want, err
        assert summary["reference"] == f"golden {golden}" and summary["compared"] == 2 * PROMPTS
        passes = {p["name"]: p for p in summary["passes"]}
        assert passes["cold"]["equal"] == PROMPTS and summary["equal"] == equal
    rc, _, err = _run(
        capsys, ["warm", "sglang+http://127.0.0.1:9", *check, "--shared-prefix", "9", "--out", str(tmp_path)]
    )
    assert rc == 2 and "--shared-prefix with a golden" in err


def test_a_resumed_run_puts_each_stored_prompt_back_in_the_cache(prompt_file, tmp_path, capsys) -> None:
    """The run breaks at p1's warm answer; the rerun keeps every stored answer (p0 cold and warm, p1 cold),
    sends p1 once more so that its warm answer comes from the cache, and goes on."""
    broken = {"count": 0}

    def fault(number: int, body: dict) -> str | None:
        broken["count"] += 1
        return "500" if number == 5 else None  # p1's warm answer, after p0 cold, fill, warm, p1 cold, fill

    url_opts = "?retries=0"
    with CannedSGLang("radix") as server:
        server.fault = fault
        argv = _warm(f"sglang+{server.url}{url_opts}", prompt_file, tmp_path)
        rc, _, err = _run(capsys, argv)
        assert rc == 2 and "3/12 results kept" in err
        server.fault = None
        served = len(server.requests)
        rc, summary, err = _run(capsys, argv)
    assert rc == 0, err
    assert [(p["prompt"], p["for"]) for p in summary["primes"]][0] == ("p1", "p1")
    assert len(server.requests) - served == 1 + 1 + 3 * (PROMPTS - 2)  # the fill, p1 warm, the rest
    assert len(rows(next(tmp_path.glob("warm-*.jsonl")))) == 2 * PROMPTS


def test_engines_without_a_prefix_cache_are_refused(tmp_path, capsys) -> None:
    rc, _, err = _run(capsys, ["warm", "hf:/nowhere", "--out", str(tmp_path)])
    assert rc == 2 and "warm runs need a server with a prefix cache" in err


def test_the_plans_order() -> None:
    a, b = Prompt("a", (1, 2, 3)), Prompt("b", (4, 5))
    plain = plain_plan([a, b], warm_passes=3, inflight=2)
    assert [(g.kind, g.key, [p.id for p in g.prompts]) for g in plain.groups] == [
        ("cold", "a", ["a#cold"]),
        ("warm", "a", ["a#warm1", "a#warm2"]),
        ("warm", "a", ["a#warm3"]),
        ("cold", "b", ["b#cold"]),
        ("warm", "b", ["b#warm1", "b#warm2"]),
        ("warm", "b", ["b#warm3"]),
    ]
    shared = shared_plan([a, b], Prompt("x", (9, 9)), passes=1, inflight=8)
    assert [p.input_ids for p in shared.prompts] == [(9, 9, 1, 2, 3), (9, 9, 4, 5)]
    assert [(g.kind, g.key, len(g.prompts)) for g in shared.groups] == [
        ("cold", "a", 1),
        ("cold", "b", 1),
        ("shared", "shared1", 2),
    ]
    assert alignment(1237).startswith("1237 tokens: odd") and "multiple of 65536" in alignment(65536)
