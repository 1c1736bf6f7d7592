"""The OpenAI engine on the logprob dialects of servers that cannot run here (bx_dialect_servers.py cites
their sources), end to end against transformers, plus the refusals that keep text from passing for ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bitexact.cli import main
from bitexact.engines.openai_logprobs import parse_logprobs
from bitexact.engines.openai_spec import spec_from_answer, vllm_counters
from bitexact.engines.token_text import byte_vocabulary, hf_vocabulary
from bitexact.errors import EngineError
from bitexact.prompts import Prompt
from checkhelpers.bx_dialect_servers import DialectServer
from checkhelpers.bx_fake_servers import Backend
from checkhelpers.bx_tiny_tokenizer import make_tokenizer

COMMON = ["--max-new-tokens", "6", "--top-logprobs", "4", "--json"]


@pytest.fixture(scope="module")
def backend(dialect_models) -> Backend:
    return Backend(dialect_models["target"])


@pytest.fixture(scope="module")
def dialect_models(tmp_path_factory):
    from checkhelpers.bx_tiny_models import make_model

    root = tmp_path_factory.mktemp("dialect-models")
    return {
        "target": make_model(root / "target", layers=2, hidden=64, seed=0),
        "unique": make_tokenizer(root / "tok-unique", "unique"),
        "paired": make_tokenizer(root / "tok-paired", "paired"),
    }


def _run(capsys, argv: list[str]) -> tuple[int, dict[str, Any], str]:
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, (json.loads(captured.out) if captured.out.strip() else {}), captured.err


def _parity(server: DialectServer, other: str, prompt_file: Path, out: Path, *extra: str) -> list[str]:
    a = f"openai+http://127.0.0.1:{server.port}/v1?model=tiny"
    return ["parity", a, other, "--prompts", str(prompt_file), "--out", str(out), *extra, *COMMON]


@pytest.mark.parametrize("dialect", ["text-only", "chat-style"])
def test_text_only_answers_are_refused_without_a_tokenizer(
    dialect, backend, dialect_models, prompt_file, tmp_path, capsys
):
    with DialectServer(backend, dialect, dialect_models["unique"]) as server:
        argv = _parity(server, f"hf:{dialect_models['target']}", prompt_file, tmp_path / "o")
        rc, _, err = _run(capsys, argv)
    assert rc == 2
    assert "names tokens by text only" in err and "--tokenizer" in err


@pytest.mark.parametrize("dialect", ["text-only", "chat-style"])
def test_text_only_answers_are_mapped_to_ids_by_the_tokenizer(
    dialect, backend, dialect_models, prompt_file, tmp_path, capsys
):
    """With the served model's tokenizer every token and alternative is mapped to its one id, and the run
    equals transformers on ids, logprobs and the top-k alternatives by id."""
    with DialectServer(backend, dialect, dialect_models["unique"]) as server:
        extra = ("--tokenizer", str(dialect_models["unique"]))
        argv = _parity(server, f"hf:{dialect_models['target']}", prompt_file, tmp_path / "o", *extra)
        rc, summary, err = _run(capsys, argv)
    assert rc == 0, err
    assert summary["equal"] == 6 and summary["tokens_differ"] == 0


def test_text_that_several_ids_decode_to_is_refused(backend, dialect_models, prompt_file, tmp_path, capsys):
    with DialectServer(backend, "text-only", dialect_models["paired"]) as server:
        extra = ("--tokenizer", str(dialect_models["paired"]))
        argv = _parity(server, f"hf:{dialect_models['target']}", prompt_file, tmp_path / "o", *extra)
        rc, _, err = _run(capsys, argv)
    assert rc == 2
    assert "ambiguous" in err and "all decode to it" in err


def test_vllm_speculation_is_proven_from_its_metrics_one_request_at_a_time(
    backend, dialect_models, prompt_file, tmp_path, capsys
):
    with DialectServer(backend, "vllm-spec") as server:
        hf = f"hf:{dialect_models['target']}"
        argv = _parity(server, hf, prompt_file, tmp_path / "1", "--spec-a", "must", "--spec-b", "never")
        rc, summary, err = _run(capsys, argv)
        assert rc == 0, err
        assert summary["equal"] == 6 and summary["a"]["spec"]["ran"] == 6
        # two requests in flight: the counters cannot say which request drafted, so nothing is proven
        argv = _parity(server, hf, prompt_file, tmp_path / "2", "--spec-a", "must", "--inflight-a", "2")
        rc, _, err = _run(capsys, argv)
    assert rc == 2 and "speculation must run" in err


def _prompt() -> Prompt:
    return Prompt(id="p", input_ids=(5, 6))


def _content(*entries: dict[str, Any], completion_tokens: int | None = None) -> dict[str, Any]:
    n = len(entries) if completion_tokens is None else completion_tokens
    return {"choices": [{"logprobs": {"content": list(entries)}}], "usage": {"completion_tokens": n}}


def test_ids_from_two_sources_must_agree():
    entry = {"id": 7, "token": "a", "bytes": [97], "logprob": -0.5, "top_logprobs": []}
    answer = _content(entry)
    answer["choices"][0]["token_ids"] = [8]
    with pytest.raises(EngineError, match="disagree"):
        parse_logprobs(_prompt(), answer, "here")
    answer["choices"][0]["token_ids"] = [7]
    assert parse_logprobs(_prompt(), answer, "here").token_ids == [7]


def test_fewer_logprobs_than_generated_tokens_is_refused():
    entry = {"id": 7, "token": "a", "bytes": [97], "logprob": -0.5, "top_logprobs": []}
    with pytest.raises(EngineError, match="generated 2 tokens but gave logprobs for 1"):
        parse_logprobs(_prompt(), _content(entry, completion_tokens=2), "here")


def test_post_sampling_probabilities_are_not_taken_for_logprobs():
    entry = {"id": 7, "token": "a", "bytes": [97], "prob": 0.5, "top_probs": []}
    with pytest.raises(EngineError, match="post-sampling probabilities"):
        parse_logprobs(_prompt(), _content(entry), "here")


def test_an_answer_without_logprobs_names_both_dialects():
    with pytest.raises(EngineError, match="token_logprobs.*content"):
        parse_logprobs(_prompt(), {"choices": [{"text": "x", "logprobs": None}]}, "here")


def test_bytes_identify_a_partial_character_that_text_cannot():
    """A lone UTF-8 lead byte has no text of its own (servers send '' or U+FFFD); its bytes map to one id."""
    table = byte_vocabulary(3, "bytes")
    entry = {"token": "", "bytes": [0xC3], "logprob": -1.0, "top_logprobs": []}
    assert parse_logprobs(_prompt(), _content(entry), "here", lambda: table).token_ids == [0xC3 + 3]
    with pytest.raises(EngineError, match="no id of that tokenizer decodes to it"):
        parse_logprobs(_prompt(), _content({**entry, "bytes": None}), "here", lambda: table)


def test_speculation_evidence_in_answers():
    llama = spec_from_answer({"timings": {"predicted_n": 16, "draft_n": 39, "draft_n_accepted": 2}}, "x")
    assert llama is not None and llama.ran and (llama.proposed_drafts, llama.correct_drafts) == (39, 2)
    assert spec_from_answer({"timings": {"predicted_n": 16}}, "x") is None  # llama.cpp without a draft model
    sglang = spec_from_answer(
        {"sglext": {"spec_tokens_details": [{"spec_verify_ct": 4, "spec_accept_length": 1.5}]}}, "x"
    )
    assert sglang is not None and sglang.verify_ct == 4 and sglang.ran


def test_vllm_counters_are_summed_over_engines_and_ignore_created_samples():
    text = "\n".join(
        [
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 5.0',
            'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 2.0',
            'vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9',
            'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 21.0',
            'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 3.0',
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 3.0',
        ]
    )
    counters = vllm_counters(text)
    assert counters is not None and (counters.drafts, counters.draft_tokens, counters.accepted) == (
        7.0,
        21.0,
        3.0,
    )
    assert vllm_counters("vllm:num_requests_running 0.0\n") is None  # no speculation configured


def test_a_sentencepiece_leading_space_is_read_in_context_and_collisions_are_refused(tmp_path):
    """`▁the` decodes alone to "the" and after a token to " the"; `▁▁the` alone to "the" too (the
    Metaspace decoder drops leading spaces), after a token to "  the". " the" must map to `▁the`, "  the"
    to `▁▁the`, and "the", which both read alone, to neither."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "a": 1, "\u2581the": 2, "\u2581\u2581the": 3, "\u2581a": 4}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(tmp_path)
    table = hf_vocabulary(str(tmp_path))
    assert (table.lookup(" the"), table.lookup("  the")) == (2, 3)
    with pytest.raises(EngineError, match=r"ambiguous: ids \[2, 3\]"):
        table.require("the", None, "here")
