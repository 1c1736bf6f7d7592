"""Catalogue rows for the image entrypoint (`docker run IMAGE`). Their inputs and checks are built with
reliability_setup.py's helpers; reliability_catalogue.py joins every program's rows."""

from __future__ import annotations

from checkhelpers.reliability_setup import Case, recipe_text, recipe_with, write

CASES: list[Case] = [
    # the image entrypoint
    Case(
        "ep-recipe-utf8",
        "entrypoint",
        "an image recipe that is not UTF-8",
        ("--preflight-only",),
        2,
        r"refusing to start: .*r.json: not UTF-8 text",
        write("r.json", b'{"\xff": 1}'),
        env={"BITEXACT_RECIPE": "{tmp}/r.json"},
    ),
    Case(
        "ep-recipe-schema",
        "entrypoint",
        "an image recipe of an unknown schema",
        ("--preflight-only",),
        2,
        r"refusing to start: recipe .*r.json has schema 3: it was written by a newer bitexact-server",
        recipe_with(schema=3),
        env={"BITEXACT_RECIPE": "{tmp}/r.json"},
    ),
    Case(
        "ep-recipe-unset",
        "entrypoint",
        "no BITEXACT_RECIPE",
        ("--preflight-only",),
        2,
        r"BITEXACT_RECIPE is unset",
        env={"BITEXACT_RECIPE": ""},
    ),
    Case(
        "ep-port",
        "entrypoint",
        "--port that is not a port",
        ("--port", "70000"),
        2,
        r"not a TCP port: '70000'",
    ),
    # the image entrypoint
    Case(
        "ep-port-twice",
        "entrypoint",
        "--port given twice",
        ("--port", "30000", "--port", "30001"),
        2,
        r"--port given twice \(30000 and 30001\): give it once",
    ),
    Case(
        "ep-recipe-key-twice",
        "entrypoint",
        "an image recipe giving a key twice",
        ("--preflight-only",),
        2,
        r'refusing to start: .*key "no-spec" is given twice',
        recipe_text('"forced-reject": {', '"no-spec": {"speculative": false},\n    "forced-reject": {'),
        env={"BITEXACT_RECIPE": "{tmp}/r.json"},
    ),
    Case(
        "ep-recipe-carriage-return",
        "entrypoint",
        "BITEXACT_RECIPE ending in a carriage return",
        ("--preflight-only",),
        2,
        r"refusing to start: BITEXACT_RECIPE: '.*r.json\\r' holds '\\r'",
        env={"BITEXACT_RECIPE": "{tmp}/r.json\r"},
    ),
]
