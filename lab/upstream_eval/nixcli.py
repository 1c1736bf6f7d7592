"""Running Nix on the scratch flake with its inputs overridden by local snapshots: `nix flake check
--no-build`, `nix eval` and `nix derivation show`, offline (no substituters, no registry, no sandbox) and
with import-from-derivation on or off."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SYSTEM = "x86_64-linux"


def config(ifd: bool = True) -> str:
    """NIX_CONFIG for an offline evaluation: flakes on, no binary cache, no registry, no sandbox."""
    return "\n".join(
        [
            "experimental-features = nix-command flakes",
            "substituters =",
            "build-users-group =",
            "sandbox = false",
            "flake-registry =",
            "accept-flake-config = false",
            "warn-dirty = false",
            f"allow-import-from-derivation = {'true' if ifd else 'false'}",
        ]
    )


@dataclass
class Nix:
    """One Nix binary (argv prefix) and the flake it evaluates, with `--override-input`s."""

    argv: list[str]
    flake: Path
    overrides: dict[str, Path] = field(default_factory=dict)
    timeout: int = 3600

    def run(self, args: list[str], ifd: bool) -> subprocess.CompletedProcess[str]:
        override = [
            a for name, path in self.overrides.items() for a in ("--override-input", name, f"path:{path}")
        ]
        env = {**os.environ, "NIX_CONFIG": config(ifd)}
        return subprocess.run(
            [*self.argv, *args, *override, "--no-write-lock-file"],
            capture_output=True,
            text=True,
            env=env,
            timeout=self.timeout,
        )

    @property
    def ref(self) -> str:
        return f"path:{self.flake}"

    def flake_check(self, ifd: bool) -> subprocess.CompletedProcess[str]:
        return self.run(["flake", "check", "--no-build", "--show-trace", self.ref], ifd)

    def eval_json(self, attr: str, apply: str | None = None, ifd: bool = True) -> Any:
        args = ["eval", "--json", f"{self.ref}#{attr}"] + (["--apply", apply] if apply else [])
        done = self.run(args, ifd)
        if done.returncode != 0:
            raise NixError(f"nix eval {attr}", done.stderr)
        return json.loads(done.stdout)

    def derivations(self, attrs: list[str], recursive: bool = False, ifd: bool = True) -> dict[str, Any]:
        """`nix derivation show` of outputs: drv path -> derivation (with `-r`, their whole closures)."""
        installables = [f"{self.ref}#{attr}" for attr in attrs]
        done = self.run(["derivation", "show", *(["--recursive"] if recursive else []), *installables], ifd)
        if done.returncode != 0:
            raise NixError(f"nix derivation show {' '.join(attrs)}", done.stderr)
        shown: dict[str, Any] = json.loads(done.stdout)
        return shown


class NixError(RuntimeError):
    """A Nix command failed; the message holds its last error lines."""

    def __init__(self, what: str, stderr: str) -> None:
        lines = [line for line in stderr.splitlines() if line.strip()]
        errors = [i for i, line in enumerate(lines) if line.lstrip().startswith("error:")]
        tail = lines[errors[-1] :] if errors else lines[-8:]
        super().__init__(f"{what} failed: " + "\n    ".join(tail[:12]))
