"""The fuzzers' Hypothesis settings (the launcher's and pinlock's, checks/offline/test_fuzz_*.py, and
bitexact's, checks/offline/bitexact/test_bitexact_fuzz_*.py): a bounded, seeded profile for CI (the same
examples every run, a couple of minutes in all) and a long one by hand, chosen by BITEXACT_FUZZ_PROFILE:

    BITEXACT_FUZZ_PROFILE=long .venv/bin/python -m pytest --rootdir . -p no:cacheprovider \\
        --import-mode=importlib -q --hypothesis-show-statistics checks/offline/test_fuzz_*.py \\
        checks/offline/bitexact/test_bitexact_fuzz_*.py

`long` draws 25 times the examples with a fresh seed each run (Hypothesis prints the seed of a failure to
reproduce it with `--hypothesis-seed`). Neither profile writes an example database into the checkout.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("BITEXACT_FUZZ_PROFILE", "ci")
if PROFILE not in ("ci", "long"):
    raise RuntimeError(f"BITEXACT_FUZZ_PROFILE={PROFILE!r}: ci (the default) or long")
LONG_FACTOR = 25


def fuzz(examples: int) -> settings:
    """Settings for a property drawn `examples` times in CI (LONG_FACTOR times that by hand)."""
    return settings(
        max_examples=examples * (LONG_FACTOR if PROFILE == "long" else 1),
        derandomize=PROFILE == "ci",
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )
