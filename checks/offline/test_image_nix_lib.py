"""nix/lib/tests/weights-images.nix (the builtins-only unit tests of hf-cache, image-plan and
gpu-batteries that the `nix-lib-weights-images` CPU flake check also runs) with the real Nix."""

from __future__ import annotations

import pytest
from checkhelpers.hfcache_support import nix_eval

pytestmark = pytest.mark.nix  # every test evaluates with the real nix-instantiate


def test_builtins_unit_tests_pass() -> None:
    result = nix_eval("import ./nix/lib/tests/weights-images.nix")
    assert result["failures"] == []
    assert result["count"] >= 18
