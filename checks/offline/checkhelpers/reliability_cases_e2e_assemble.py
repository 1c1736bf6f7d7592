"""Catalogue rows for the end-to-end tree assembler (checks/e2e/assemble.py). Their inputs and checks are
built with reliability_setup.py's helpers; reliability_catalogue.py joins every program's rows."""

from __future__ import annotations

from checkhelpers.reliability_setup import Case

CASES: list[Case] = [
    Case(
        "e2e-tree-unknown-patch",
        "e2e-assemble",
        "a tree without a patch the series does not have",
        ("tree", "--wheels", "{tmp}", "--work", "{tmp}/w", "--name", "t", "--without", "0009"),
        2,
        r"--without 0009: no such patch in the series \(0001-bitexact-marker.patch, ",
    ),
    Case(
        "e2e-assemble-name-escapes",
        "e2e-assemble",
        "a tree name leading out of --work",
        ("tree", "--wheels", "{tmp}", "--work", "{tmp}/w", "--name", "../x"),
        2,
        r"argument --name: '../x' is not a name",
    ),
]
