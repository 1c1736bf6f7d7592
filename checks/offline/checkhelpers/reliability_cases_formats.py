"""Catalogue rows of the shared file reader and schema check (pkgs/formats, exactformats): a recipe that is a
FIFO or a device, in all three programs; a byte-order mark; a schema that is newer, older or malformed; a
golden reformatted by a JSON formatter; a history line of a newer schema."""

from __future__ import annotations

import json
import os
from pathlib import Path

from checkhelpers.reliability_setup import (
    HISTORY_LINE,
    RECIPE_TEXT,
    URL,
    Case,
    Setup,
    both,
    checkout,
    common,
    golden,
    golden_args,
    prompts,
    recipe_with,
    write,
)


def fifo(rel: str) -> Setup:
    def setup(tmp: Path) -> None:
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(tmp / rel)

    return setup


def reformatted(rel: str = "g/h200/qwen3.8-27b-exact.json") -> Setup:
    """The file at `rel` as a JSON formatter that keeps every value writes it: integral floats as integers
    (-1.0 as -1), another indentation."""

    def number(value: object) -> object:
        if isinstance(value, dict):
            return {k: number(v) for k, v in value.items()}
        if isinstance(value, list):
            return [number(v) for v in value]
        if isinstance(value, float) and value.is_integer() and value != 0:
            return int(value)
        return value

    def setup(tmp: Path) -> None:
        path = tmp / rel
        path.write_text(json.dumps(number(json.loads(path.read_text())), indent=2) + "\n")

    return setup


def integral_logprob(gens: list) -> None:
    """The first answer's first position made a logprob of -1.0, its top row kept consistent."""
    first = gens[0]
    token = first.token_ids[0]
    first.logprobs[0] = -1.0
    first.top_logprobs[0] = [(token, -1.0), (token + 1, -2.0)]


RECIPE_FIX = r"give (a|the) recipe (JSON )?file \(nix/recipes/<name>.json\)"
bitexact_recipe = ("parity", URL, URL + "?timeout=5", "--preset", "recipe", "--recipe")

CASES: list[Case] = [
    Case(
        "fmt-bx-recipe-fifo",
        "bitexact",
        "--recipe names a FIFO (refused before the open, which would wait for a writer)",
        (*bitexact_recipe, "{tmp}/r.json"),
        2,
        r"--recipe .*r.json is a named pipe \(FIFO\): reading it would wait for a writer; " + RECIPE_FIX,
        fifo("r.json"),
    ),
    Case(
        "fmt-ln-recipe-fifo",
        "launcher",
        "--recipe names a FIFO (it hung)",
        ("--recipe", "{tmp}/r.json", "--print"),
        2,
        r"recipe .*r.json is a named pipe \(FIFO\): reading it would wait for a writer; " + RECIPE_FIX,
        fifo("r.json"),
    ),
    Case(
        "fmt-pl-recipe-fifo",
        "pinlock",
        "--recipe names a FIFO (it hung)",
        ("--root", "{tmp}/repo", "--recipe", "{tmp}/r.json", "status"),
        2,
        r"recipe .*r.json is a named pipe \(FIFO\): reading it would wait for a writer; " + RECIPE_FIX,
        both(checkout(), fifo("r.json")),
    ),
    Case(
        "fmt-pl-recipe-device",
        "pinlock",
        "--recipe names a device",
        ("--root", "{tmp}/repo", "--recipe", "/dev/zero", "status"),
        2,
        r"recipe /dev/zero is a character device; " + RECIPE_FIX,
        checkout(),
    ),
    Case(
        "fmt-ln-recipe-utf16",
        "launcher",
        "a recipe saved as UTF-16 (valid UTF-8 byte by byte, with a NUL after every character)",
        ("--recipe", "{tmp}/r.json", "--print"),
        2,
        r"recipe .*r.json: not UTF-8 text \(byte 1, line 1: a NUL byte; it is UTF-16, or not text at all\)",
        write("r.json", RECIPE_TEXT.encode("utf-16-le")),
    ),
    Case(
        "fmt-pl-recipe-bom",
        "pinlock",
        "a recipe that starts with a UTF-8 byte-order mark (taken off, as in bitexact and the launcher)",
        ("--root", "{tmp}/repo", "--recipe", "{tmp}/r.json", "status"),
        1,
        r"ABSENT  nix/pins/sglang-src.json narHash",
        both(checkout(), write("r.json", b"\xef\xbb\xbf" + RECIPE_TEXT.encode())),
    ),
    Case(
        "fmt-pl-schema-decimal",
        "pinlock",
        'a recipe whose "schema" a formatter wrote as 1.0',
        ("--root", "{tmp}/repo", "--recipe", "{tmp}/r.json", "status"),
        2,
        r'`schema` is 1.0, a decimal; a schema is a whole number: write "schema": 1',
        both(checkout(), recipe_with(schema=1.0)),
    ),
    Case(
        "fmt-bx-schema-decimal",
        "bitexact",
        'a recipe whose "schema" a formatter wrote as 1.0 (it was accepted)',
        (*bitexact_recipe, "{tmp}/r.json"),
        2,
        r'`schema` is 1.0, a decimal; a schema is a whole number: write "schema": 1',
        recipe_with(schema=1.0),
    ),
    Case(
        "fmt-ln-schema-string",
        "launcher",
        'a recipe whose "schema" is the string "1"',
        ("--recipe", "{tmp}/r.json", "--print"),
        2,
        r'`schema` is the string "1"; a schema is a number: write "schema": 1 \(without quotes\)',
        recipe_with(schema="1"),
    ),
    Case(
        "fmt-pl-schema-newer",
        "pinlock",
        "a recipe of a newer schema",
        ("--root", "{tmp}/repo", "--recipe", "{tmp}/r.json", "status"),
        2,
        r"has schema 2: it was written by a newer pinlock \(this one reads schema 1\); upgrade pinlock",
        both(checkout(), recipe_with(schema=2)),
    ),
    Case(
        "fmt-bx-golden-newer",
        "bitexact",
        "a golden of a newer schema (it was told to re-record)",
        ("golden", "check", "sglang+{url}", *golden_args, *common),
        2,
        r"has schema 3: it was written by a newer bitexact \(this one reads schema 2\); upgrade bitexact",
        both(prompts, golden(lambda r: r.update(schema=3))),
        server="normal",
    ),
    Case(
        "fmt-bx-golden-reformatted",
        "bitexact",
        "a golden a JSON formatter rewrote (-1.0 as -1, indented): its values are equal when parsed",
        ("golden", "check", "sglang+{url}", *golden_args, *common),
        2,
        r"was reformatted after it was recorded: its values are equal when parsed, but numbers are written "
        r"differently .* restore the file as it was recorded \(`git checkout -- .*`.*\): nothing needs "
        r"recording again",
        both(prompts, golden(answers=integral_logprob), reformatted()),
        server="normal",
    ),
    Case(
        "fmt-bx-golden-bom",
        "bitexact",
        "a golden an editor saved with a byte-order mark (it was called corrupted)",
        ("golden", "check", "sglang+{url}", *golden_args, *common),
        0,
        r"golden check: EQUAL: 2/2 prompts equal",
        both(prompts, golden(), lambda tmp: _prefix_bom(tmp / "g/h200/qwen3.8-27b-exact.json")),
        server="normal",
    ),
    Case(
        "fmt-bx-history-newer",
        "bitexact",
        "a history line of a newer schema (it was called not a history line)",
        ("history", "h200", "--golden-dir", "{tmp}/g"),
        0,
        r"history.jsonl:2: a history line has schema 2: it was written by a newer bitexact \(this one reads "
        r"schema 1\); upgrade bitexact",
        write(
            "g/h200/history.jsonl",
            HISTORY_LINE + HISTORY_LINE.replace('"schema": 1', '"schema": 2'),
        ),
    ),
]


def _prefix_bom(path: Path) -> None:
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
