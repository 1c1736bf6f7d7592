"""docs/gpu-checks.md's fleet snippets, run by the real Nix (Debian's nix-bin, what CI installs) in a store of
its own (a private mount namespace over /nix): the `/etc/nix/machines` lines as written there, and the
key, sign, copy and trust commands of its binary-cache section.

What this shows: each machine line parses; a derivation that asks for `cuda` is sent to the GPU line
(Nix tries to reach it: `cannot build on 'ssh-ng://nix@gpu-a'`) and never to the CPU line; a path signed
with the generated key and copied to a `file://` cache is accepted by a store that trusts that key and
refused by one that trusts another. What it cannot: a real remote builder (no SSH host here).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "gpu-checks.md"

pytestmark = [
    pytest.mark.nix,
    pytest.mark.skipif(
        shutil.which("nix-build") is None or shutil.which("unshare") is None or os.geteuid() != 0,
        reason="needs Nix, unshare and root (a private /nix); CI has all three",
    ),
]

PAYLOAD = """{ features ? [ ] }: derivation {
  name = "payload"; system = builtins.currentSystem; builder = "/bin/sh";
  args = [ "-c" "echo payload > $out" ]; requiredSystemFeatures = features;
}
"""


def machine_lines() -> list[str]:
    block = DOC.read_text().split("# /etc/nix/machines", 1)[1]
    return [line.strip() for line in block.split("\n\n", 1)[0].splitlines() if line.strip()]


def in_private_store(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    store = tmp_path / "nix"
    store.mkdir()
    env = dict(os.environ)
    env["NIX_CONFIG"] = (
        "experimental-features = nix-command\nsubstituters =\nbuild-users-group =\nsandbox = false"
    )
    (tmp_path / "payload.nix").write_text(PAYLOAD)
    body = f'mount --bind "{store}" /nix || exit 90\ncd "{tmp_path}"\n{script}'
    return subprocess.run(
        ["unshare", "-m", "bash", "-c", body], env=env, capture_output=True, text=True, timeout=300
    )


def test_the_docs_machine_lines_send_cuda_work_to_the_gpu_builder_only(tmp_path: Path) -> None:
    gpu, cpu = machine_lines()
    assert gpu.startswith("ssh-ng://nix@gpu-a") and cpu.startswith("ssh-ng://nix@cpu-b")
    build = "nix-build payload.nix --arg features '[\"cuda\"]' --no-out-link --max-jobs 0 --builders"
    malformed = gpu.replace(" 1 1 ", " one 1 ")  # a word where the job count goes
    script = f"{build} '{gpu}' 2>&1; {build} '{cpu}' 2>&1; {build} '{malformed}' 2>&1; true"
    done = in_private_store(tmp_path, script)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    # the GPU line: parsed, chosen for the cuda derivation, then unreachable from here
    assert "(x86_64-linux, 1, cuda, cuda)" in out
    assert "cannot build on 'ssh-ng://nix@gpu-a'" in out
    # the CPU line: parsed, never tried for it
    assert "(x86_64-linux, 8, big-parallel, kvm, )" in out
    assert "cannot build on 'ssh-ng://nix@cpu-b'" not in out
    # the malformed line is refused as such, so the checks above can fail
    assert "bad machine specification" in out


def test_the_docs_cache_commands_sign_copy_and_are_trusted_by_key(tmp_path: Path) -> None:
    text = DOC.read_text()
    for command in (
        "nix key generate-secret --key-name cache.example.org-1 > secret-key",
        "nix key convert-secret-to-public < secret-key",
        "nix store sign --key-file secret-key --recursive",
        "nix copy --to file:///srv/nix-cache",
    ):
        assert command in text  # the commands below are the page's
    script = f"""set -e
nix key generate-secret --key-name cache.example.org-1 > secret-key
nix key convert-secret-to-public < secret-key > public-key
out=$(nix-build payload.nix --no-out-link 2>/dev/null)
nix store sign --key-file secret-key --recursive "$out"
nix copy --to file://{tmp_path}/cache "$out"
nix copy --from file://{tmp_path}/cache --to {tmp_path}/trusting "$out" \\
    --option trusted-public-keys "$(cat public-key)"
echo TRUSTED-COPY-OK
nix key generate-secret --key-name other-1 | nix key convert-secret-to-public > other-key
if nix copy --from file://{tmp_path}/cache --to {tmp_path}/other "$out" \\
    --option trusted-public-keys "$(cat other-key)" 2> refused; then echo OTHER-KEY-ACCEPTED; fi
cat refused
"""
    done = in_private_store(tmp_path, script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "TRUSTED-COPY-OK" in done.stdout and "OTHER-KEY-ACCEPTED" not in done.stdout
    assert "lacks a valid signature" in done.stdout
    assert (tmp_path / "cache" / "nix-cache-info").is_file()
