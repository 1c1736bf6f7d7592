"""Catalogue rows for the fleet of replicas (`python -m exactlaunch.fleet`). Their inputs and checks are
built with reliability_setup.py's helpers; reliability_catalogue.py joins every program's rows."""

from __future__ import annotations

import json

from checkhelpers.reliability_setup import Case, both, write

CASES: list[Case] = [
    # the fleet of replicas (bitexact-server --replicas N)
    Case(
        "fl-plan-missing",
        "fleet",
        "a fleet plan file that does not exist",
        ("{tmp}/plan.json",),
        2,
        r"plan .*plan.json: no such file; give the plan that `bitexact-server --replicas N --print` writes",
    ),
    Case(
        "fl-plan-no-fleet",
        "fleet",
        "a printed plan of one server, not of a fleet",
        ("{tmp}/plan.json",),
        2,
        r"no `fleet` in it: print it with `bitexact-server --replicas N --print`",
        write("plan.json", '{"variant": "recipe", "argv": ["python"]}'),
    ),
    # the fleet's printed plan
    Case(
        "fl-plan-shape",
        "fleet",
        "a plan whose replica lacks argv (a TypeError)",
        ("{tmp}/plan.json",),
        2,
        r"fleet.replicas\[0\] must be an object with exactly name, argv, env and url",
        write("plan.json", json.dumps({"fleet": {"replicas": [{"name": "replica-0"}], "router": {}}})),
    ),
    Case(
        "fl-plan-name",
        "fleet",
        "a plan whose replica name leads out of the log folder",
        ("{tmp}/plan.json",),
        2,
        r"fleet.replicas\[0\].name must be a name such as replica-0",
        write(
            "plan.json",
            json.dumps(
                {
                    "fleet": {
                        "replicas": [{"name": "../x", "argv": ["p"], "env": {}, "url": "http://h:1"}],
                        "router": {"name": "router", "argv": ["p"], "env": {}, "url": "http://h:2"},
                    }
                }
            ),
        ),  # fmt: skip
    ),
    Case(
        "fl-log-dir-file",
        "fleet",
        "a log folder that is a file",
        ("{tmp}/plan.json", "{tmp}/f"),
        2,
        r"log folder: .*/f exists and is not a folder",
        both(
            write("f", "x"),
            write(
                "plan.json",
                json.dumps(
                    {
                        "fleet": {
                            "replicas": [
                                {"name": "replica-0", "argv": ["p"], "env": {}, "url": "http://h:1"}
                            ],
                            "router": {"name": "router", "argv": ["p"], "env": {}, "url": "http://h:2"},
                        }
                    }
                ),
            ),
        ),  # fmt: skip
    ),
]
