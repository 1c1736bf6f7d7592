"""Property-based tests of the launcher (`bitexact-server`): Hypothesis draws recipe files (the real recipe
with drawn variants, values, shapes and keys given twice) and command lines, and runs the real CLI
in-process, `--print` first and then as a start.

Invariants, for every draw:
- the exit code is 0 or 2, and nothing leaves as a traceback or as the crash guard's "internal error";
- a recipe with a key given twice is refused, naming the key;
- what `--print` prints is valid for what it is: argv elements a command line carries, environment names
  without `=`, the serving flags' values an address and a port, each replica's memory share below 1;
- `--print` and a start agree: when `--print` refuses, a start refuses with the same message; when it
  prints, a start execs exactly the printed argv with the printed environment (or hands the printed fleet
  to its supervisor), or refuses only for what `--print` leaves to a start (the exact-mode preflight).

A start runs up to the exec: os.execvpe and the fleet's supervisor are replaced by recorders (nothing is
served); the driver is the compiled stand-in of driver_standins.py, found by the launcher's own
discovery; the preflight is the real one (this Python has no sglang, so exact mode is refused).
Settings: fuzz_settings.py (CI: seeded and bounded; BITEXACT_FUZZ_PROFILE=long by hand).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import hypothesis
import pytest
from checkhelpers.driver_standins import compiler, install_driver
from checkhelpers.fuzz_settings import fuzz
from exactlaunch import cli, fleet, values
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "nix" / "recipes" / "qwen3.8-27b-exact.json"
BASE = json.loads(RECIPE.read_text())
EXACT = "--enable-deterministic-inference"

# Strings that have broken launchers before, or sit on a rule's edge; st.text adds the rest.
EDGES = [
    "", "-", "--", "-1", "-x", "--tp-size", "--tp-size=2", "tp-size", "0.5", "0.88", "1", "2", "0", "1.0",
    "nan", "inf", "1e3", ".5", "5.", "\u0663\u0660\u0660\u0660\u0660", "\u00b2", " 1", "1 ", "A=B", "A B",
    "a\nb", "x.json\r", "\x7f", "\u00e9", "0,1", ",", "0,0", "1,0", "::1", "0.0.0.0", "localhost", "host.",
    "-host", "a" * 70, "999999", "65535", "65536", "30000", EXACT, "--mem-fraction-static", "--port",
    "--host", "--base-gpu-id", "--speculative-algorithm", "no-spec", "recipe",
    # what the launcher decides (a recipe value was shown by --print and replaced at start), the weights
    # flags, names that become paths, a number that is no address
    "LD_LIBRARY_PATH", "TRITON_LIBCUDA_PATH", "SGLANG_DG_CACHE_DIR", "HF_HUB_OFFLINE", "CUDA_HOME",
    "--model-path", "--speculative-draft-model-path", "../x", "Fast", "300.1.1.1",
    "--mem-fraction-static=0.5",
]  # fmt: skip
text = st.one_of(
    st.sampled_from(EDGES),
    st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=10),
)
json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-3, 70000), st.floats(-2, 3), text)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=6,
)
# Environment names: often one the launcher sets itself (a recipe value for it was shown by --print and
# replaced by a start), else anything.
env_names = st.one_of(
    st.sampled_from(["LD_LIBRARY_PATH", "TRITON_LIBCUDA_PATH", "SGLANG_DG_CACHE_DIR", "HF_HUB_OFFLINE", "A"]),
    text,
)
variant_body = st.fixed_dictionaries(
    {},
    optional={
        "unset": st.one_of(st.lists(text, max_size=3), json_value),
        "set": st.one_of(st.dictionaries(text, text, max_size=3), json_value),
        "env": st.one_of(st.dictionaries(env_names, text, max_size=2), json_value),
        "speculative": st.one_of(st.booleans(), json_scalar),
        "description": st.one_of(text, json_scalar),
        "client": json_value,
        "flags": json_value,
    },
)
PATHS = [
    ("schema",), ("name",), ("launch", "argv"), ("launch", "env"), ("launch", "servingFlags"),
    ("engine", "patches"), ("deepGemm", "fencedHeader"), ("variants",), ("launch",), ("extra",),
    ("launch", "extra"),
]  # fmt: skip


@st.composite
def recipes(draw: st.DrawFn) -> tuple[str, str | None, list[str]]:
    """(recipe text, the key given twice in it or None, variant names worth asking for)."""
    data = json.loads(json.dumps(BASE))
    names = ["recipe", "no-spec"]
    for _ in range(draw(st.integers(0, 3))):
        kinds = ["variant", "replace", "memory", "argv", "non-exact", "non-exact", "env"]
        kind = draw(st.sampled_from(kinds))
        if kind in ("variant", "non-exact", "env") and not isinstance(data.get("variants"), dict):
            continue  # replaced by a drawn value of another kind before
        if kind == "variant":
            name = draw(st.one_of(st.sampled_from(["x", "no-spec"]), text))
            data["variants"][name] = draw(variant_body)
            names.append(name)
        elif kind == "non-exact":  # a variant without exact mode: a start does not stop at the preflight
            name = draw(st.sampled_from(["fast", "fast2"]))
            body = draw(variant_body)
            data["variants"][name] = {**body, "unset": [EXACT]} if draw(st.booleans()) else {"unset": [EXACT]}
            names += [name, name, name]  # asked for more often: a start of it runs up to the exec
        elif kind == "env":  # a variant that a start runs up to the exec, setting one variable
            name = draw(st.sampled_from(["fast", "fast2"]))
            data["variants"][name] = {"unset": [EXACT], "env": {draw(env_names): draw(text)}}
            names += [name, name, name]
        elif kind == "replace":
            *parents, key = draw(st.sampled_from(PATHS))
            target = data
            for part in parents:
                target = target.get(part) if isinstance(target, dict) else None
            if isinstance(target, dict):
                target[key] = draw(json_value)
        elif kind == "memory" and isinstance(data.get("launch"), dict):
            argv = data["launch"].get("argv")
            if isinstance(argv, list) and "--mem-fraction-static" in argv:
                fraction = draw(mostly(["0.3", "0.9", "0.99999", "1", "2", "0", "nan"]))
                argv[argv.index("--mem-fraction-static") + 1] = fraction
        elif kind == "argv" and isinstance(data.get("launch"), dict):
            argv = data["launch"].get("argv")
            if isinstance(argv, list):
                argv.extend(draw(st.lists(text, min_size=1, max_size=2)))
    rendered = json.dumps(data, indent=1)
    twice = None
    variants = data.get("variants")
    if isinstance(variants, dict) and variants and draw(sometimes(4)):
        # The same variant name once more, first in the object: Python's json would keep the last.
        twice = draw(st.sampled_from(sorted(variants)))
        head = '"variants": {'
        at = rendered.index(head) + len(head)
        extra = f"\n{json.dumps(twice)}: {json.dumps(draw(variant_body))},"
        rendered = rendered[:at] + extra + rendered[at:]
    return rendered, twice, names


def mostly(usual: list[str]) -> st.SearchStrategy[str]:
    """One of the usual values four times in five, else a drawn string."""
    return st.integers(0, 4).flatmap(lambda n: text if n == 0 else st.sampled_from(usual))


def sometimes(chance: int) -> st.SearchStrategy[bool]:
    return st.integers(1, chance).map(lambda n: n == 1)


@st.composite
def command_lines(draw: st.DrawFn, names: list[str]) -> list[str]:
    """The options after --recipe: a variant, serving flags, a fleet, and now and then a stray word."""
    args = ["--variant", draw(mostly(names))] if draw(st.integers(0, 3)) else []
    usual = {"--host": ["127.0.0.1", "0.0.0.0", "::1", "localhost"], "--port": ["30000", "30100", "65530"]}
    for option, common in usual.items():
        if draw(st.booleans()):
            value = draw(mostly(common))
            args += [f"{option}={value}"] if draw(st.booleans()) else [option, value]
    if draw(st.booleans()):
        args += ["--replicas", draw(mostly(["1", "2", "3"]))]
        if draw(st.booleans()):
            args += ["--gpus", draw(mostly(["0", "0,1", "1", "0,1,2"]))]
        if draw(sometimes(3)):
            args += ["--router-policy", draw(st.sampled_from([*fleet.POLICIES, "fastest"]))]
        if draw(sometimes(3)):
            args += ["--log-dir", draw(st.sampled_from(["logs", "/proc/x", "recipe.json"]))]
    if draw(sometimes(8)):
        args.insert(draw(st.integers(0, len(args))), draw(text))
    return args


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch folder with the compiled driver stand-in in driver/."""
    if compiler() is None:
        pytest.skip("no C compiler: the driver stand-in is compiled")
    root = tmp_path_factory.mktemp("fuzz-launcher")
    install_driver(root / "driver")
    return root


class Started(BaseException):
    """Raised where the launcher would exec: the crash guard (which catches Exception) lets it pass."""


@contextlib.contextmanager
def launcher_host(host: Path) -> Iterator[list[dict[str, Any]]]:
    starts: list[dict[str, Any]] = []

    def execvpe(program: str, argv: list[str], env: dict[str, str]) -> None:
        starts.append({"argv": list(argv), "env": dict(env)})
        raise Started

    def supervise(replicas: list[fleet.Process], router: fleet.Process, *_: Any) -> int:
        starts.append({"fleet": json.loads(fleet.plan_json(replicas, router))})
        return 0

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("BITEXACT_", "SGLANG_", "HF_"))}
    clean.pop("LD_LIBRARY_PATH", None)
    clean.update(BITEXACT_DRIVER_LIB=str(host / "driver"), XDG_CACHE_HOME=str(host / "cache"))
    with (
        mock.patch.dict(os.environ, clean, clear=True),
        mock.patch.object(cli.os, "execvpe", execvpe),
        mock.patch.object(cli.fleet, "supervise", supervise),
    ):
        yield starts


def run(args: list[str]) -> tuple[int | None, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code: int | None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(args)
        except SystemExit as leave:  # argparse's usage errors
            code = leave.code if isinstance(leave.code, int) else 2
        except Started:
            code = None
    return code, out.getvalue(), err.getvalue()


def event(what: str) -> None:
    if currently_in_test_context():  # the same checks also run outside Hypothesis, below
        hypothesis.event(what)


def _reason(stderr: str) -> str:
    """A coarse class of a refusal, for Hypothesis' statistics (--hypothesis-show-statistics)."""
    line = (errors(stderr) or [stderr.strip()[:60]])[0].removeprefix("bitexact-server: error: ")
    return re.sub(r"'[^']*'|`[^`]*`|\S*/\S*|[0-9]+", "_", line)[:50]


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "error:" in line]


def assert_printed_is_valid(printed: dict[str, Any]) -> None:
    argv, env = printed["argv"], printed["env"]
    assert all(isinstance(a, str) and "\0" not in a for a in argv)
    assert all(values.ENV_NAME.fullmatch(k) and "\0" not in v for k, v in env.items())
    for flag, check in values.SERVING.items():
        for i in (i for i, a in enumerate(argv) if a == flag):
            check(argv[i + 1])  # raises BadValue for a value --print should have refused
    verbatim = [argv[i + 1 : i + 2] for i, a in enumerate(argv) if a == fleet.MEM_FLAG]
    for replica in printed.get("fleet", {}).get("replicas", []):
        edited = replica["argv"]
        shares = [edited[i + 1 : i + 2] for i, a in enumerate(edited) if a == fleet.MEM_FLAG]
        if shares != verbatim:  # a share the fleet computed (the recipe's own value is passed verbatim)
            for share in shares:
                values.fraction(*share)


def check_agreement(args: list[str], host: Path) -> str:
    """Run `args` with --print and as a start; assert they agree; say how the start ended."""
    with launcher_host(host) as starts:
        shown, out, err = run(["--print", *args])  # first: after a `--`, --print would be a free word
        assert shown in (0, 2), (shown, err)
        assert "Traceback" not in err + out and "internal error" not in err, err
        started, _, start_err = run(args)
    assert "Traceback" not in start_err and "internal error" not in start_err, start_err
    if shown == 2:
        event(f"refused: {_reason(err)}")
        assert started == 2 and not starts, (args, err, start_err)
        assert errors(start_err)[:1] == errors(err)[:1], (err, start_err)
        return "refused"
    printed = json.loads(out)
    assert_printed_is_valid(printed)
    if starts:
        (start,) = starts
        outcome = "fleet" if "fleet" in start else "exec"
        event(f"printed; a start ran it ({outcome})")
        if "fleet" in start:
            assert start["fleet"] == printed["fleet"]
        else:
            assert start["argv"] == printed["argv"]
            assert {k: start["env"][k] for k in printed["env"]} == printed["env"]
        return outcome
    # Only what --print leaves to a start may stop it: exact mode's preflight (no sglang here).
    event("printed; the start stopped at the preflight")
    assert started == 2 and printed["exact"], (args, start_err)
    assert "refusing to start in exact mode" in start_err, start_err
    return "preflight"


@fuzz(examples=400)
@given(recipes(), st.data())
def test_drawn_recipes_are_refused_or_served_as_printed(
    host: Path, recipe: tuple[str, str | None, list[str]], data: st.DataObject
) -> None:
    text_, twice, names = recipe
    path = host / "recipe.json"
    path.write_text(text_)
    args = ["--recipe", str(path), *data.draw(command_lines(names))]
    if twice is not None:
        with launcher_host(host):
            code, _, err = run(["--print", "--recipe", str(path)])
        assert code == 2 and f"key {json.dumps(twice)} is given twice" in err, err
        return
    check_agreement(args, host)


@fuzz(examples=400)
@given(st.data())
def test_drawn_command_lines_are_refused_or_served_as_printed(host: Path, data: st.DataObject) -> None:
    """The real recipe with one variant out of exact mode (`fast`), so that starts run up to the exec."""
    recipe = host / "with-fast.json"
    if not recipe.exists():
        recipe.write_text(json.dumps({**BASE, "variants": {**BASE["variants"], "fast": {"unset": [EXACT]}}}))
    names = [*sorted(BASE["variants"]), "fast", "fast", "fast"]
    check_agreement(["--recipe", str(recipe), *data.draw(command_lines(names))], host)


@fuzz(examples=60)
@given(name=env_names, value=text)
def test_a_variant_environment_is_started_as_printed(host: Path, name: str, value: str) -> None:
    """One variable set by a variant that a start runs up to the exec: what --print shows is what the
    server gets (LD_LIBRARY_PATH from a recipe was printed, then replaced by the driver's at start)."""
    recipe = host / "with-env.json"
    fast = {"unset": [EXACT], "env": {name: value}}
    recipe.write_text(json.dumps({**BASE, "variants": {**BASE["variants"], "fast": fast}}))
    check_agreement(["--recipe", str(recipe), "--variant", "fast"], host)


@pytest.mark.parametrize(
    ("args", "outcome"),
    [
        (["--variant", "fast", "--host", "0.0.0.0", "--port", "30000"], "exec"),
        (["--variant", "fast", "--replicas", "2", "--port", "30100", "--gpus", "0,1"], "fleet"),
        (["--variant", "fast", "--replicas", "3", "--port", "30100", "--log-dir", "logs"], "fleet"),
        (["--variant", "no-spec", "--port", "30000"], "preflight"),
    ],
)
def test_a_start_runs_what_print_printed(host: Path, args: list[str], outcome: str) -> None:
    """The paths the fuzzer reaches only now and then, every time: an exec and a fleet, as printed."""
    data = json.loads(json.dumps(BASE))
    data["variants"]["fast"] = {"unset": [EXACT]}
    (host / "fast.json").write_text(json.dumps(data))
    assert check_agreement(["--recipe", str(host / "fast.json"), *args], host) == outcome


def test_the_agreement_check_can_fail(host: Path) -> None:
    """The property is not vacuous: a launcher whose --print refuses what its start runs is caught."""
    real = cli.plan
    refuse = iter([True, False])

    def plan(*args: Any, **kwargs: Any) -> cli.Launch:
        if next(refuse):
            raise cli.RecipeError("refused by --print only")
        return real(*args, **kwargs)

    with mock.patch.object(cli, "plan", plan), pytest.raises(AssertionError):
        check_agreement(["--recipe", str(RECIPE), "--variant", "no-spec"], host)


def test_the_failures_found_stay_fixed(host: Path) -> None:
    """Failures found while writing this fuzzer, each a catalogue row (ln-*, reliability_cases_launcher.py):
    by the fuzzer (`--port=--`), and by reading the code it drives (the long path, the share that rounds
    to 1)."""
    data = json.loads(json.dumps(BASE))
    argv = data["launch"]["argv"]
    argv[argv.index("--mem-fraction-static") + 1] = "0.99999"
    (host / "memory.json").write_text(json.dumps(data))
    found = {
        # argparse drops the `--` of `--port=--` and handed the launcher an empty list (a TypeError)
        ("--recipe", str(RECIPE), "--port=--", "--print"): r"--port needs a value \(given \[\]\)",
        # a path the OS calls too long: Path.is_dir raised OSError (a traceback)
        ("--recipe", "x" * 5000, "--print"): r"recipe x+: cannot read it: File name too long",
        # the second of two replicas on one GPU would take 0.99998 of what is left: "1" once rounded
        ("--recipe", str(host / "memory.json"), "--replicas", "2", "--port", "30000", "--print"): (
            r"share of GPU 0 rounds to 1, not a fraction below 1"
        ),
    }
    for args, message in found.items():
        with launcher_host(host):
            code, _, err = run(list(args))
        assert code == 2 and re.search(message, err), err
