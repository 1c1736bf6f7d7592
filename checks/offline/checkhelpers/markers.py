"""Markers for what a test needs beyond Python and the repository, so that a sandbox can select the rest: a
pytest plugin that checks/offline/pyproject.toml registers (entry point `pytest11`), so every pytest run
with checkhelpers installed has them, the checks' tests and the lab's alike, whatever subset runs.

`network`: downloads (released wheels from PyPI, `uv lock --check`, any URL). `nix`: runs Nix itself
(nix-instantiate, nix-store, nix hash, nix-prefetch-url), which a Nix build sandbox does not offer.
`docker`: runs containers (checks/offline/test_image_container.py; `.ci/run` installs and starts what
it needs). `browser`: runs a real headless browser (Debian's `chromium`, which .ci/run installs), which a
Nix build sandbox does not offer either. `evidence`: reads the raw results under docs/evidence, which the
flake check's source leaves out (it carries each folder's claims.json and the pages). `repository`: reads
the whole repository through git (the house's rules, test_house.py), of which the flake check's source is
a part, without git. A test that needs none carries no marker; `python -m checkhelpers.sandbox_selection`
runs exactly those (`-m "not network and not nix and not docker and not browser and not evidence and not
repository"`), here without network or Nix and as the `python-offline-tests` flake check.

Modules mark whole files with `pytestmark`, single tests with decorators, and tests that use a fixture
needing something through `FIXTURE_NEEDS = {"fixture": ("network",)}`: every test whose fixture closure
holds that fixture gets the markers, so a new test that uses it is marked without anyone remembering.
"""

from __future__ import annotations

import pytest

MARKERS = {
    "network": "downloads something (PyPI wheels, uv lock --check, any URL); deselect with -m 'not network'",
    "nix": "runs Nix commands (nix-instantiate, nix-store, nix hash); deselect with -m 'not nix'",
    "docker": "runs containers (a docker daemon, patchelf, a C compiler); deselect with -m 'not docker'",
    "browser": "renders in a headless browser (Debian's chromium); deselect with -m 'not browser'",
    "evidence": "reads raw results under docs/evidence (the offline flake check carries only each folder's "
    "claims.json and the pages); deselect with -m 'not evidence'",
    "repository": "reads the whole repository through git (the offline flake check's source is a part of it, "
    "without git); deselect with -m 'not repository'",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        needs: dict[str, tuple[str, ...]] = getattr(item.module, "FIXTURE_NEEDS", {})
        for fixture, markers in needs.items():
            unknown = set(markers) - set(MARKERS)
            if unknown:
                where = f"{item.module.__name__}.FIXTURE_NEEDS[{fixture!r}]"
                raise pytest.UsageError(f"{where}: unknown {sorted(unknown)}, known: {sorted(MARKERS)}")
            if fixture in item.fixturenames:
                for name in markers:
                    item.add_marker(name)
