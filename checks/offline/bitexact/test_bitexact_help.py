"""`bitexact --help` and each verb's: every argument described, defaults shown, examples given."""

from __future__ import annotations

import argparse

import pytest
from bitexact.cli import build_parser, main

VERBS = [["parity"], ["repeat"], ["golden", "record"], ["golden", "check"], ["bench"], ["history"], ["warm"]]


def _parser_of(verb: list[str]) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in verb:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


@pytest.mark.parametrize("verb", VERBS, ids=" ".join)
def test_every_argument_is_described_and_examples_are_shown(verb: list[str], capsys) -> None:
    parser = _parser_of(verb)
    undescribed = [a.dest for a in parser._actions if not a.help]
    assert undescribed == [], f"bitexact {' '.join(verb)}: no help for {undescribed}"
    with pytest.raises(SystemExit) as done:
        main([*verb, "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert "examples:\n  bitexact " + verb[0] in shown
    for action in parser._actions:  # a default that means something is printed with the option
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
            assert f"default: {action.default}" in " ".join(shown.split()), (verb, action.dest)


def test_the_top_level_help_lists_exit_codes_and_every_verb(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    assert "{parity,repeat,golden,bench,history,warm}" in shown
    for code in ("0 ", "1 ", "2 ", "130"):
        assert f"\n  {code}" in shown
