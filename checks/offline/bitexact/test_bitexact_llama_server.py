"""The OpenAI engine against a real third-party server: llama.cpp's `llama-server` from Debian's packages
(bx_llama_server.py), serving tiny GGUF models written here (bx_gguf_models.py).

What bitexact reads is checked against what the server itself says through another route: its native
`/completion` endpoint (`tools/server/server-task.cpp` to_json_non_oaicompat: `tokens` with
`return_tokens`, `completion_probabilities` with `n_probs`), and raw `/v1/completions` answers read by
the test without bitexact's code.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from bitexact.cli import main
from bitexact.engines.base import Settings
from bitexact.engines.factory import open_engine
from bitexact.engines.spec import parse_engine
from bitexact.prompts import Prompt
from checkhelpers.bx_gguf_models import write_models
from checkhelpers.bx_llama_server import LlamaServer, install, version

FIXTURE_NEEDS = {"llama_tree": ("network",)}  # the first use downloads Debian packages

NEW, TOP = 16, 3
PROMPTS = [[75, 104, 108], [40, 50, 60, 70, 80], [100], [3, 9, 27, 81, 120, 33, 66], [58] * 12]


@pytest.fixture(scope="module")
def llama_tree() -> Path:
    tree = install()
    print(f"llama-server {version(tree)}")
    return tree


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_models(tmp_path_factory.mktemp("gguf"))


@pytest.fixture
def prompt_file(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    rows = [json.dumps({"id": f"p{i}", "input_ids": ids}) for i, ids in enumerate(PROMPTS)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _engine(server: LlamaServer) -> str:
    return f"openai+{server.url}/v1?model=tiny"


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any], str]:
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, (json.loads(captured.out) if captured.out.strip() else {}), captured.err


def _raw_completion(server: LlamaServer, ids: list[int]) -> dict[str, Any]:
    body = {"model": "tiny", "prompt": ids, "max_tokens": NEW, "temperature": 0.0, "logprobs": TOP}
    return server.post("/v1/completions", {**body, "ignore_eos": True})


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def test_ids_and_logprobs_are_the_servers_own(llama_tree, gguf, tmp_path):
    """bitexact's token ids and logprobs from llama.cpp's chat-style `/v1/completions` answer equal what
    the native `/completion` endpoint of the same server reports for the same request (its `tokens` list
    and `completion_probabilities`): ids are the server's, not text taken for ids."""
    with LlamaServer(llama_tree, gguf["target"], tmp_path / "server.log") as server:
        engine = open_engine(parse_engine(_engine(server)))
        prompts = [Prompt(id=f"p{i}", input_ids=tuple(ids)) for i, ids in enumerate(PROMPTS)]
        settings = Settings(max_new_tokens=NEW, top_logprobs=TOP)
        by_id = {g.prompt_id: g for p in prompts for g in engine.generate([p], settings)}
        gens = [by_id[p.id] for p in prompts]
        ident = engine.identity()
        native = [
            server.post(
                "/completion",
                {"prompt": ids, "n_predict": NEW, "temperature": 0.0, "n_probs": TOP}
                | {"ignore_eos": True, "return_tokens": True},
            )
            for ids in PROMPTS
        ]
    assert ident["props"]["model_path"] == str(gguf["target"])
    assert ident["props"]["build_info"].startswith("b")
    for gen, answer in zip(gens, native, strict=True):
        assert gen.meta["dialect"] == "chat-style logprobs.content"
        assert gen.token_ids == answer["tokens"] and len(gen.token_ids) == NEW
        probs = answer["completion_probabilities"]
        assert [_bits(x) for x in gen.logprobs] == [_bits(p["logprob"]) for p in probs]
        assert [[tok for tok, _ in row] for row in gen.top_logprobs] == [
            [alt["id"] for alt in p["top_logprobs"]] for p in probs
        ]
        assert gen.spec is None  # no draft model, no `timings.draft_n`


def test_parity_of_two_llama_servers_runs_and_finds_them_equal(
    llama_tree, gguf, prompt_file, tmp_path, capsys
):
    """Two servers of the same model: parity reads both and finds every position equal, which the raw
    answers (read here without bitexact) confirm bit for bit."""
    with (
        LlamaServer(llama_tree, gguf["target"], tmp_path / "a.log") as a,
        LlamaServer(llama_tree, gguf["target"], tmp_path / "b.log") as b,
    ):
        argv = ["parity", _engine(a), _engine(b), "--prompts", str(prompt_file), "--out", str(tmp_path / "o")]
        rc, summary, err = _run(
            capsys, [*argv, "--max-new-tokens", str(NEW), "--top-logprobs", str(TOP), "--json"]
        )
        raw_a = [_raw_completion(a, ids) for ids in PROMPTS]
        raw_b = [_raw_completion(b, ids) for ids in PROMPTS]
    assert rc == 0, err
    assert summary["equal"] == len(PROMPTS)
    for x, y in zip(raw_a, raw_b, strict=True):
        ca, cb = x["choices"][0]["logprobs"]["content"], y["choices"][0]["logprobs"]["content"]
        assert [(e["id"], _bits(e["logprob"])) for e in ca] == [(e["id"], _bits(e["logprob"])) for e in cb]


def test_speculation_is_proven_from_timings_and_divergences_match_the_raw_answers(
    llama_tree, gguf, prompt_file, tmp_path, capsys
):
    """A server with a draft model against one without. With the draft, this llama.cpp gives no top-k
    alternatives at the positions its speculative steps produced: through the OpenAI API such answers
    cannot be compared in full, and are refused (exit 2), never called equal on what is there. The native
    engine probes those positions; there `--spec-a must --spec-b never` holds because llama.cpp reports
    `timings.draft_n` on A only, the swapped sides fail as they must, and every first token divergence
    bitexact reports is the one the raw answers show."""
    common = [
        "--prompts",
        str(prompt_file),
        "--max-new-tokens",
        str(NEW),
        "--top-logprobs",
        str(TOP),
        "--json",
    ]
    with (
        LlamaServer(llama_tree, gguf["target"], tmp_path / "spec.log", draft=gguf["draft"]) as spec,
        LlamaServer(llama_tree, gguf["target"], tmp_path / "plain.log") as plain,
    ):
        openai = ["parity", _engine(spec), _engine(plain), "--out", str(tmp_path / "0"), *common]
        rc_openai, _, err_openai = _run(capsys, openai)
        native_spec, native_plain = f"llamacpp+{spec.url}", f"llamacpp+{plain.url}"
        argv = ["parity", native_spec, native_plain, "--spec-a", "must", "--spec-b", "never"]
        rc, summary, err = _run(capsys, [*argv, "--out", str(tmp_path / "1"), *common])
        swapped = ["parity", native_plain, native_spec, "--spec-a", "must"]
        rc_swapped, _, err_swapped = _run(capsys, [*swapped, "--out", str(tmp_path / "2"), *common])
        raw_spec = [_raw_completion(spec, ids) for ids in PROMPTS]
        raw_plain = [_raw_completion(plain, ids) for ids in PROMPTS]
    assert any(not e["top_logprobs"] for r in raw_spec for e in r["choices"][0]["logprobs"]["content"])
    assert rc_openai == 2 and "top-k alternatives, not the 3 asked" in err_openai, err_openai
    assert rc in (0, 1), err  # equal or not, it is a verdict, not a refusal
    assert summary["a"]["spec"]["ran"] == len(PROMPTS) and summary["b"]["spec"]["reported"] == 0
    assert all(r["timings"]["draft_n"] > 0 for r in raw_spec)
    assert not any("draft_n" in r["timings"] for r in raw_plain)
    assert rc_swapped == 2 and "speculation must run" in err_swapped
    expected = [_first_id_divergence(x, y) for x, y in zip(raw_spec, raw_plain, strict=True)]
    assert [c["first_token_divergence"] for c in summary["comparisons"]] == expected


def _first_id_divergence(x: dict[str, Any], y: dict[str, Any]) -> int | None:
    ids_a = [e["id"] for e in x["choices"][0]["logprobs"]["content"]]
    ids_b = [e["id"] for e in y["choices"][0]["logprobs"]["content"]]
    first = next((i for i, (a, b) in enumerate(zip(ids_a, ids_b, strict=False)) if a != b), None)
    return first if first is not None or len(ids_a) == len(ids_b) else min(len(ids_a), len(ids_b))


def test_an_answer_with_logprobs_missing_for_some_tokens_is_refused(
    llama_tree, gguf, prompt_file, tmp_path, capsys
):
    """llama.cpp gives no logprob entry for a token that ends inside a UTF-8 character. With a model that
    emits such tokens, an answer whose entries are fewer than its tokens must be refused (exit 2), never
    compared with its positions shifted; where the server happens to give every entry, the run passes."""
    with LlamaServer(llama_tree, gguf["unconstrained"], tmp_path / "any.log") as server:
        argv = [
            "repeat",
            _engine(server),
            "-n",
            "2",
            "-b",
            "2",
            "--prompts",
            str(prompt_file),
            "--out",
            str(tmp_path / "o"),
        ]
        rc, _, err = _run(capsys, [*argv, "--max-new-tokens", str(NEW), "--top-logprobs", str(TOP), "--json"])
        raw = [_raw_completion(server, ids) for ids in PROMPTS]
    gaps = [r["usage"]["completion_tokens"] != len(r["choices"][0]["logprobs"]["content"]) for r in raw]
    assert any(gaps), "the unconstrained model no longer makes llama.cpp drop entries; pick other prompts"
    assert rc == 2 and "gave logprobs for" in err, err


# llama.cpp's native endpoint (`llamacpp+http://`): byte-fallback output compared at every position.


def _native(server: LlamaServer, ids: list[int]) -> dict[str, Any]:
    body = {"prompt": ids, "n_predict": NEW, "temperature": 0.0, "n_probs": TOP, "return_tokens": True}
    return server.post("/completion", {**body, "ignore_eos": True, "cache_prompt": False})


def test_the_native_engine_gives_every_position_of_byte_fallback_output(llama_tree, gguf, tmp_path):
    """The unconstrained model emits byte tokens that start characters; the server keeps no probability
    entry for them (the openai engine refuses such answers, above). The native engine returns every token
    id the server generated, the server's own entry (bit for bit) wherever it gave one, and a probed entry
    exactly where it gave none; where the entries fit the tokens two ways, every position is probed, and
    the server's entries are then found among the probed positions, in order, bit for bit."""
    with LlamaServer(llama_tree, gguf["unconstrained"], tmp_path / "any.log") as server:
        engine = open_engine(parse_engine(f"llamacpp+{server.url}"))
        ident = engine.identity()
        settings = Settings(max_new_tokens=NEW, top_logprobs=TOP)
        gens = {g.prompt_id: g for g in engine.generate(_prompts(), settings)}
        raw = [_native(server, ids) for ids in PROMPTS]
    assert ident["engine"] == "llamacpp" and ident["model_path"] == str(gguf["unconstrained"])
    assert ident["version"].startswith("b")
    gaps = 0
    for i, answer in enumerate(raw):
        gen = gens[f"p{i}"]
        assert gen.token_ids == answer["tokens"] and len(gen.token_ids) == NEW
        entries = answer["completion_probabilities"]
        probed = gen.meta.get("probed_positions", [])
        rows = zip(gen.token_ids, gen.logprobs, gen.top_logprobs, strict=True)
        values = [(t, _bits(lp), top) for t, lp, top in rows]
        wanted = [
            (e["id"], _bits(e["logprob"]), [(t["id"], t["logprob"]) for t in e["top_logprobs"]])
            for e in entries
        ]
        if len(probed) < NEW:  # matched: the reported positions hold the entries themselves
            assert [values[p] for p in range(NEW) if p not in probed] == wanted
        else:  # every position probed: the entries are among them, in order
            rest = iter(values)
            assert all(any(v == w for v in rest) for w in wanted)
        for position in probed:
            assert gen.top_logprobs[position][0][0] == gen.token_ids[position]  # the argmax, as greedy chose
        gaps += NEW - len(entries)
    assert gaps > 0, "no byte-fallback gaps: the test would prove nothing; pick other prompts"


def _prompts() -> list[Prompt]:
    return [Prompt(id=f"p{i}", input_ids=tuple(ids)) for i, ids in enumerate(PROMPTS)]


def test_a_probe_gives_the_generations_own_bits(llama_tree, gguf, tmp_path, monkeypatch):
    """Where the server reports every position (the ASCII-only model), probing every position instead
    gives the same ids, logprobs and alternatives, bit for bit: a probe computes the generation's values."""
    import bitexact.engines.llamacpp_http as native

    with LlamaServer(llama_tree, gguf["target"], tmp_path / "t.log") as server:
        engine = open_engine(parse_engine(f"llamacpp+{server.url}"))
        settings = Settings(max_new_tokens=NEW, top_logprobs=TOP)
        reported = {g.prompt_id: g for g in engine.generate(_prompts(), settings)}
        monkeypatch.setattr(native, "align", lambda tokens, entry_ids: None)  # every position probed
        probed = {g.prompt_id: g for g in engine.generate(_prompts(), settings)}
    for key, gen in reported.items():
        assert "probed_positions" not in gen.meta
        assert probed[key].meta["probed_positions"] == list(range(NEW))
        assert probed[key].token_ids == gen.token_ids
        assert [_bits(x) for x in probed[key].logprobs] == [_bits(x) for x in gen.logprobs]
        assert probed[key].top_logprobs == gen.top_logprobs


def test_byte_fallback_runs_compare_through_the_cli(llama_tree, gguf, prompt_file, tmp_path, capsys):
    """What the issue asked: two servers of the byte-token model compared with parity (equal), and one
    repeated (no divergence), where the openai engine refuses the same answers."""
    common = [
        "--prompts",
        str(prompt_file),
        "--max-new-tokens",
        str(NEW),
        "--top-logprobs",
        str(TOP),
        "--json",
    ]
    with (
        LlamaServer(llama_tree, gguf["unconstrained"], tmp_path / "a.log") as a,
        LlamaServer(llama_tree, gguf["unconstrained"], tmp_path / "b.log") as b,
    ):
        rc, summary, err = _run(
            capsys,
            ["parity", f"llamacpp+{a.url}", f"llamacpp+{b.url}", "--out", str(tmp_path / "p"), *common],
        )
        rc_repeat, repeat, err_repeat = _run(
            capsys,
            ["repeat", f"llamacpp+{a.url}", "-n", "2", "-b", "1", "--out", str(tmp_path / "r"), *common],
        )
    assert rc == 0, err
    assert summary["equal"] == summary["prompts"] == len(PROMPTS)
    assert rc_repeat == 0, err_repeat
    assert repeat["divergent"] == 0


# Ten prompts for the model with twin tokens (bx_gguf_models.TWINS); on several, llama.cpp's speculative
# server chooses a token that is not the argmax it reports at a position it produced by speculation.
TWIN_PROMPTS = [
    [313, 265, 293, 325, 322, 311, 298],
    [305, 334, 287, 324, 277, 296, 277, 272],
    [292, 328, 337, 278, 299, 272, 269, 347, 302, 320],
    [273, 298, 330, 297, 275, 330, 302, 329],
    [283, 264, 338, 344],
    [270, 301, 338, 274, 322, 335],
    [303, 327, 292],
    [270, 260, 336, 284, 349, 302, 280, 290, 288, 341, 317],
    [337, 260, 264, 323, 301, 299, 319, 266, 313],
    [272, 305, 315, 300, 338, 341, 286, 330, 321],
]
EOS = 2  # bx_gguf_models' `</s>`


def _listed(server: LlamaServer, ids: list[int]) -> list[tuple[int, float]]:
    """This test's own probe of the position after `ids`: the raw (pre-sampling) alternatives the server
    lists there, in its order, as (id, logprob)."""
    body = {"prompt": ids, "n_predict": 1, "temperature": 0.0, "n_probs": TOP, "return_tokens": True}
    answer = server.post("/completion", {**body, "post_sampling_probs": False, "cache_prompt": True})
    return [(t["id"], t["logprob"]) for t in answer["completion_probabilities"][0]["top_logprobs"]]


def test_a_speculative_server_whose_choice_is_not_its_reported_argmax_is_compared_not_refused(
    llama_tree, gguf, tmp_path, capsys
):
    """llama.cpp's speculative server (`--spec-type draft-simple`) against its plain one. At some positions
    its speculative steps produced, the token it chose is not the argmax it reports there: its
    end-of-sequence token, which ignore_eos keeps from being chosen, or a tie listed the other way.
    bitexact used to stop there with "greedy decoding did not pick the argmax" (exit 2). Now parity runs
    every prompt, compares them, and its verdict is the comparison's: DIFFERENT (exit 1) exactly where
    the raw answers of the two servers differ, EQUAL (exit 0) where they do not (on this CPU build the
    speculative server's verify steps compute the same bits as the plain decode, so its tokens equal the
    plain server's). Each such position is named in the summary, the report and the answer's stored
    meta, and checked against the server itself: the token its own answer holds there, and this test's
    own probe of that position listing another id first, with a logprob at least the chosen one's."""
    prompts = tmp_path / "twins.jsonl"
    rows = [json.dumps({"id": f"t{i}", "input_ids": ids}) + "\n" for i, ids in enumerate(TWIN_PROMPTS)]
    prompts.write_text("".join(rows))
    out = tmp_path / "out"
    with (
        LlamaServer(llama_tree, gguf["twins"], tmp_path / "spec.log", draft=gguf["draft"]) as spec,
        LlamaServer(llama_tree, gguf["twins"], tmp_path / "plain.log") as plain,
    ):
        argv = [
            *("parity", f"llamacpp+{spec.url}", f"llamacpp+{plain.url}", "--spec-a", "must", "--spec-b"),
            *("never", "--prompts", str(prompts), "--max-new-tokens", str(NEW), "--top-logprobs", str(TOP)),
        ]
        rc, summary, err = _run(capsys, [*argv, "--json", "--out", str(out)])
        raw_spec = [_native(spec, ids) for ids in TWIN_PROMPTS]
        raw_plain = [_native(plain, ids) for ids in TWIN_PROMPTS]
        found = [f for f in summary.get("not_argmax", []) if f["side"] == "A"]
        probes = []
        for f in found:
            index = int(str(f["prompt_id"])[1:])
            before = raw_spec[index]["tokens"][: f["position"]]
            probes.append(_listed(spec, [*TWIN_PROMPTS[index], *before]))
    differ = sum(x["tokens"] != y["tokens"] for x, y in zip(raw_spec, raw_plain, strict=True))
    assert rc == (1 if summary["differ"] else 0), err
    assert summary["prompts"] == len(TWIN_PROMPTS) and summary["tokens_differ"] == differ
    assert summary["a"]["spec"]["ran"] == len(TWIN_PROMPTS)
    stored = [json.loads(line) for line in next(out.glob("A-*.jsonl")).read_text().splitlines()[1:]]
    probed = {r["id"]: r["generation"]["meta"].get("probed_positions", []) for r in stored}
    at_probes = [f for f in found if f["position"] in probed[f["prompt_id"]]]
    assert {f["kind"] for f in at_probes} >= {"ignored", "tie"}, "nothing to show: pick other prompts"
    for f, listed in zip(found, probes, strict=True):
        raw = raw_spec[int(str(f["prompt_id"])[1:])]
        first, first_logprob = listed[0]
        assert raw["tokens"][f["position"]] == f["chosen"] != first
        assert dict(listed)[f["chosen"]] == f["chosen_logprob"] <= first_logprob
        if f["kind"] == "ignored":
            assert first == EOS and f["argmax"] == EOS
        if f["kind"] == "tie":
            assert (f["argmax"], f["argmax_logprob"], f["chosen_logprob"]) == (
                first,
                first_logprob,
                first_logprob,
            )
    recorded = {
        (r["id"], x["position"]) for r in stored for x in r["generation"]["meta"].get("not_argmax", [])
    }
    assert {(f["prompt_id"], f["position"]) for f in found} == recorded
    report = (out / "parity.md").read_text()
    assert "Chosen tokens that are not the engine's reported argmax" in report
    assert all(f"| A | {f['prompt_id']} | {f['position']} | {f['kind']} |" in report for f in found)
