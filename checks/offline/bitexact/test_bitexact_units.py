"""Pure pieces: engine strings, comparison edge cases, prompts, long prompts, presets from the real recipe,
resumable result files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bitexact.cli import main
from bitexact.compare import compare, margin
from bitexact.engines.spec import parse_engine
from bitexact.errors import UsageError
from bitexact.generation import Generation
from bitexact.longprompts import long_prompt
from bitexact.presets import load_recipe, make_preset, preset_names
from bitexact.prompts import ByteTokenizer, default_battery, load_prompts
from bitexact.results import ResultStore

RECIPE = Path(__file__).resolve().parents[3] / "nix" / "recipes" / "qwen3.8-27b-exact.json"


def test_engine_strings():
    s = parse_engine("sglang+http://127.0.0.1:30000")
    assert (s.kind, s.target) == ("sglang", "http://127.0.0.1:30000")
    o = parse_engine("openai+http://h:8000/v1?model=Qwen/Qwen3.8-27B")
    assert (o.kind, o.target, o.params["model"]) == ("openai", "http://h:8000/v1", "Qwen/Qwen3.8-27B")
    h = parse_engine("hf:/m?device=cuda&batch=8")
    assert (h.kind, h.target, h.int_param("batch", 1)) == ("hf", "/m", 8)
    for bad, message in [
        ("openai+http://h:8000/v1", "model=NAME"),
        ("hf:/m?assistant=/d&batch=2", "one sequence at a time"),
        ("hf:/m?device=tpu", "device must be"),
        ("hf:/m?colour=red", "unknown option"),
        ("grpc://h:1", "unknown form"),
        ("sglang+http://127.0.0.1:x", "port must be a number"),
        ("sglang+http://127.0.0.1:70000", "port must be a number"),
        ("sglang+http://h:1?timeout=abc", "timeout='abc' is not a number"),
        ("openai+http://h:1/v1?model=m&timeout=0", "timeout must be > 0"),
        ("sglang+http://h:1?retries=two", "retries='two' is not an integer"),
    ]:
        with pytest.raises(UsageError, match=message):
            parse_engine(bad)
    with pytest.raises(UsageError, match="batch must be > 0"):
        parse_engine("hf:/m?batch=0").int_param("batch", 1)


def _gen(ids, lps, top=None):
    return Generation(prompt_id="x", token_ids=ids, logprobs=lps, top_logprobs=top or [])


def test_compare_finds_first_divergence_and_margin():
    top = [[(1, -0.1), (2, -0.3)], [(3, -0.5), (4, -0.6)], [(5, -0.2), (6, -0.9)]]
    a = _gen([1, 3, 5], [-0.1, -0.5, -0.2], top)
    assert compare(a, _gen([1, 3, 5], [-0.1, -0.5, -0.2], top)).equal
    c = compare(a, _gen([1, 4, 5], [-0.1, -0.6, -0.2], top))
    assert (c.first_divergence, c.first_token_divergence, c.token_a, c.token_b) == (1, 1, 3, 4)
    assert c.margin_a == pytest.approx(0.1) and c.token_margin_b == pytest.approx(0.1)
    z = compare(_gen([1], [0.0]), _gen([1], [-0.0]))  # bitwise: -0.0 is not 0.0
    assert (z.equal, z.tokens_equal, z.first_logprob_divergence) == (False, True, 0)
    short = compare(a, _gen([1, 3], [-0.1, -0.5], top[:2]))
    assert (short.first_divergence, short.first_token_divergence) == (2, 2)
    assert margin([(1, -1.0)]) is None


def test_text_keyed_alternatives_compare_by_value():
    a = _gen([1], [-0.1], [[(1, -0.1), (2, -0.3)]])
    b = _gen([1], [-0.1], [[("<1>", -0.1), ("<2>", -0.3)]])
    assert compare(a, b).equal
    assert not compare(a, _gen([1], [-0.1], [[("<1>", -0.1), ("<2>", -0.4)]])).equal


def test_default_battery_is_24_varied_prompts():
    battery = default_battery()
    assert len(battery) == 24 and len({p.id for p in battery}) == 24
    lengths = sorted(len(ByteTokenizer().encode(p.text or "")) for p in battery)
    assert lengths[0] < 40 and lengths[-1] > 500
    assert any("def " in (p.text or "") for p in battery)
    assert {"de-essay", "zh-poem", "ja-explain", "ar-question"} <= {p.id for p in battery}


def test_long_prompts_exact_length_deterministic_offline():
    a = long_prompt(131072, seed=3, tokenizer=ByteTokenizer())
    assert len(a.input_ids or ()) == 131072
    assert a == long_prompt(131072, seed=3, tokenizer=ByteTokenizer())
    assert a != long_prompt(131072, seed=4, tokenizer=ByteTokenizer())
    r = long_prompt(5000, vocab_size=100)
    assert len(r.input_ids or ()) == 5000 and max(r.input_ids or ()) < 100
    with pytest.raises(UsageError, match=r"need --tokenizer MODEL_DIR \(real text\) or --vocab-size N"):
        long_prompt(10)


def test_presets_follow_the_recipe_variants():
    recipe = load_recipe(str(RECIPE))
    assert {"recipe", "forced-reject", "inflight-8", "max-seqs-32", "backend-flashinfer", "long"} <= set(
        preset_names(recipe)
    )
    fr = make_preset(recipe, "forced-reject")
    assert (fr.a.variant, fr.a.spec, fr.b.variant, fr.b.spec) == ("forced-reject", "must", "no-spec", "never")
    assert make_preset(recipe, "inflight-8").a.inflight == 8
    assert make_preset(recipe, "max-seqs-32").b.variant == "recipe"
    assert make_preset(recipe, "long").long_prompts
    with pytest.raises(UsageError, match="unknown preset"):
        make_preset(recipe, "no-such")
    with pytest.raises(UsageError, match="no-spec is not a preset: it is engine B"):
        make_preset(recipe, "no-spec")


def test_prompt_file_errors(tmp_path):
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"id": "a", "input_ids": [1, 2]}\n{"id": "a", "text": "x"}\n')
    with pytest.raises(UsageError, match="duplicate prompt id"):
        load_prompts(bad)
    bad.write_text('{"id": "a"}\n')
    with pytest.raises(UsageError, match="neither"):
        load_prompts(bad)


def test_result_store_skips_torn_line_and_other_runs(tmp_path, prompt_file):
    prompts = load_prompts(prompt_file)
    store = ResultStore(tmp_path / "r.jsonl", {"engine": "x"})
    store.append(prompts[0], Generation(prompt_id="p0", token_ids=[1], logprobs=[-0.5]))
    ResultStore(tmp_path / "r.jsonl", {"engine": "other"}).append(
        prompts[1], Generation(prompt_id="p1", token_ids=[1], logprobs=[-0.5])
    )
    with (tmp_path / "r.jsonl").open("a") as handle:
        handle.write('{"run": "' + store.key + '", "prompt_dig')  # a crash mid-write
    assert list(store.load(prompts)) == ["p0"]


class _InterruptedAfter(ResultStore):
    """A Ctrl-C that lands right after the `after`-th result reached the file, before the runner
    counted it: the moment a real SIGINT hit under load (test_bitexact_transport, 2026-12-03)."""

    def __init__(self, path, key, after):
        super().__init__(path, key)
        self.after, self.appended = after, 0

    def append(self, prompt, generation):
        super().append(prompt, generation)
        self.appended += 1
        if self.appended == self.after:
            raise KeyboardInterrupt


class _ListEngine:
    group_size = 6

    def generate(self, prompts, settings):
        return iter([Generation(p.id, [5], [-0.5], [[(5, -0.5)]]) for p in prompts])


def test_an_interrupt_reports_what_the_file_holds(tmp_path, prompt_file, capsys):
    from bitexact.engines.base import Settings
    from bitexact.runner import run_battery

    prompts = load_prompts(prompt_file)
    store = _InterruptedAfter(tmp_path / "r.jsonl", {"engine": "x"}, after=3)
    with pytest.raises(KeyboardInterrupt):
        run_battery(_ListEngine(), prompts, Settings(max_new_tokens=1, top_logprobs=1), store, "A")
    assert len(store.load(prompts)) == 3
    assert f"interrupted; 3/{len(prompts)} results kept in {store.path}" in capsys.readouterr().err


def test_exit_codes_for_usage_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["parity"])
    assert exc.value.code == 2
    for argv, verbs in (([], "{parity,repeat,golden,bench,history,warm}"), (["golden"], "{record,check}")):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert f"required: {verbs}" in capsys.readouterr().err
    assert (
        main(["parity", "hf:/nonexistent", "hf:/nonexistent", "--prompts", str(tmp_path / "none.jsonl")]) == 2
    )
    assert "no such file" in capsys.readouterr().err
    assert main(["golden", "check", "hf:/x", "--card", "h200"]) == 2
    assert "keyed by recipe" in capsys.readouterr().err
    # bench's prompts are made before the engine is opened: no model load, no server contacted.
    assert main(["bench", "hf:/nonexistent", "--lengths", "16"]) == 2
    assert "long prompts need --tokenizer" in capsys.readouterr().err
    assert json.loads(RECIPE.read_text())["name"] == "qwen3.8-27b-exact"


def test_a_chosen_token_off_the_reported_argmax_is_named_and_how():
    from bitexact.answers import not_argmax

    rows = [
        [(7, -0.5), (8, -1.0)],  # the chosen 7 is the argmax
        [(8, -0.25), (7, -0.5)],  # 8 is above the chosen 7: below
        [(8, -0.5), (7, -0.5)],  # 8 ties with the chosen 7 and is listed first: tie
        [(2, -0.1), (7, -0.5), (8, -0.9)],  # 2 is the end token ignore_eos kept from being chosen
        [("seven", -0.5), ("eight", -0.5)],  # named by text: the first may be the chosen one; nothing said
    ]
    gen = Generation("p", [7] * 5, [-0.5] * 5, rows, meta={"ignored_ids": [2]})
    found = [(f["position"], f["kind"], f["argmax"]) for f in not_argmax(gen)]
    assert found == [(1, "below", 8), (2, "tie", 8), (3, "ignored", 2)]
    gen.meta = {}
    assert [f["kind"] for f in not_argmax(gen)] == ["below", "tie", "below"]


def test_no_verb_imports_another_and_no_private_name_crosses_a_module():
    """What the verbs share lives outside commands/ (options.py, sides.py, output.py, goldenselect.py);
    a name that leading underscore calls private is used only in its own module."""
    import ast

    import bitexact

    package = Path(bitexact.__file__).parent
    verbs = {p.stem for p in (package / "commands").glob("*.py")} - {"__init__"}
    assert {"golden", "parity", "warm", "history"} <= verbs
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bitexact"):
                names = [a.name for a in node.names]
                if path.parent.name == "commands" and (
                    node.module.startswith("bitexact.commands") and node.module != "bitexact.commands"
                ):
                    found.append(f"{path.name} imports {node.module}")
                if path.parent.name == "commands" and node.module == "bitexact.commands":
                    found += [f"{path.name} imports commands.{n}" for n in names]
                private = [n for n in names if n.startswith("_") and not n.startswith("__")]
                found += [f"{path.name} imports {node.module}.{n}" for n in private]
            if isinstance(node, ast.Import) and path.parent.name == "commands":
                found += [f"{path.name} imports {a.name}" for a in node.names if "commands." in a.name]
    assert found == []


def test_the_engine_strings_are_parsed_once_by_the_cli():
    """cli.given_engines parses a command's engine strings; the verbs, their --out key and their results
    file names take the specs it made, so no other module of bitexact calls parse_engine."""
    import ast

    import bitexact

    package = Path(bitexact.__file__).parent
    callers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "parse_engine"
    )
    assert callers == ["cli.py"]


def test_only_the_cli_and_the_verbs_take_the_parsed_command_line():
    """Each verb reads its argparse.Namespace at the top into what the services take (engine specs,
    PromptOptions, GoldenRequest, runs.Command); argv.py's argparse actions take one by argparse's API."""
    import ast

    import bitexact

    package = Path(bitexact.__file__).parent
    takers = []
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package)
        if where.parts[0] in ("cli.py", "commands", "argv.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                if any(
                    a.annotation is not None and "Namespace" in ast.unparse(a.annotation) for a in arguments
                ):
                    takers.append(f"{where}:{node.name}")
    assert takers == []
