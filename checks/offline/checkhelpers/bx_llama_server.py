"""llama.cpp's real `llama-server`, as Debian packages it, run on this CPU machine for the tests.

Debian has llama.cpp only in sid (unstable), built against sid's C library (glibc >= 2.43; the machine is
bookworm, 2.36). So the packages, and the sid libraries they need, are downloaded with apt-get from the
mirror this machine's apt already uses, under a private apt state (the system's package lists and
installed packages are not touched), unpacked with `dpkg -x` into the artifacts cache, and the server is
started through sid's own dynamic loader with sid's libraries. ggml's CPU backends are separate files
(one per CPU generation); ggml looks for them beside the executable, which for a program started through
the loader is the loader's folder, so they are linked there and ggml picks the best one this CPU runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from checkhelpers.net_support import free_port
from checkhelpers.repo import REPO as REPO_ROOT

# the server and what it links against, from sid (apt-get download fetches exactly these, no resolver)
SID_PACKAGES = (
    "llama.cpp-tools",
    "libllama0",
    "libggml0",
    "libc6",
    "libstdc++6",
    "libgcc-s1",
    "libgomp1",
    "libssl3t64",
)
LIB = "usr/lib/x86_64-linux-gnu"


def cache_dir() -> Path:
    """The artifacts cache the offline suite uses (checkhelpers/released_wheels.py), same override."""
    root = Path(os.environ.get("BITEXACT_ARTIFACTS", REPO_ROOT / ".cache" / "artifacts"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def system_mirror() -> tuple[str, str]:
    """(URI, keyring) of the Debian archive this machine's apt is set up with (deb822 or one-line)."""
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields = dict(
                (k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in stanza.splitlines()) if v
            )
            suites = fields.get("Suites", "").split()
            if fields.get("URIs") and suites and not any("security" in s for s in suites):
                keyring = fields.get("Signed-By", "/usr/share/keyrings/debian-archive-keyring.gpg")
                return fields["URIs"].split()[0], keyring
    listing = Path("/etc/apt/sources.list")
    if listing.exists():
        for line in listing.read_text().splitlines():
            found = re.match(r"deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line.strip())
            if found and "security" not in found.group(2):
                return found.group(1), "/usr/share/keyrings/debian-archive-keyring.gpg"
    raise RuntimeError("no Debian archive in /etc/apt/sources.list(.d); cannot fetch llama.cpp from sid")


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed ({result.returncode}): {result.stderr[-800:]}")
    return result.stdout


def install() -> Path:
    """The unpacked tree (downloaded once; a `.complete` stamp names the versions)."""
    root = cache_dir() / "debian-sid" / "llama.cpp"
    tree = root / "tree"
    stamp = root / ".complete"
    if stamp.exists():
        return tree
    uri, keyring = system_mirror()
    apt = root / "apt"
    debs = root / "debs"
    for folder in (apt / "lists" / "partial", apt / "cache" / "archives" / "partial", debs, tree):
        folder.mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(f"deb [signed-by={keyring}] {uri} sid main\n")
    options = [
        f"-oDir::Etc::SourceList={apt / 'sources.list'}",
        "-oDir::Etc::SourceParts=/nonexistent",
        f"-oDir::State::Lists={apt / 'lists'}",
        f"-oDir::Cache={apt / 'cache'}",
        "-oAPT::Sandbox::User=root",
        "-oDebug::NoLocking=1",
    ]
    _run(["apt-get", *options, "-qq", "update"])
    _run(["apt-get", *options, "-qq", "download", *SID_PACKAGES], cwd=debs)
    versions = []
    for deb in sorted(debs.glob("*.deb")):
        _run(["dpkg-deb", "-x", str(deb), str(tree)])
        versions.append(deb.name)
    lib = tree / LIB
    for backend in sorted((lib / "ggml").glob("backends*/libggml-cpu-*.so")):
        link = lib / backend.name
        if not link.exists():
            link.symlink_to(backend.relative_to(lib))
    stamp.write_text("\n".join(versions) + "\n")
    return tree


def command(tree: Path) -> list[str]:
    lib = tree / LIB
    return [
        str(lib / "ld-linux-x86-64.so.2"),
        "--library-path",
        f"{lib}:{lib / 'llama'}",
        str(tree / "usr" / "bin" / "llama-server"),
    ]


def version(tree: Path) -> str:
    """`llama-server --version`, e.g. 'version: 0.7.0 (build 11669, commit Debian)'."""
    out = subprocess.run([*command(tree), "--version"], capture_output=True, text=True, timeout=60)
    line = next((ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("version:")), "")
    if not line:
        raise RuntimeError(f"llama-server --version printed no version: {(out.stdout + out.stderr)[-500:]}")
    return line.removeprefix("version:").strip()


class LlamaServer:
    """One `llama-server` on 127.0.0.1 with the given model (and draft model), stopped on exit."""

    def __init__(self, tree: Path, model: Path, log: Path, draft: Path | None = None) -> None:
        self.port = free_port()
        self.log = log
        args = ["-m", str(model), "--alias", "tiny", "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["-np", "1", "-c", "1024", "-t", "2", "--no-webui", "--offline", "--no-warmup"]
        if draft is not None:
            args += ["--spec-draft-model", str(draft), "--spec-type", "draft-simple"]
        self.argv = [*command(tree), *args]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LlamaServer:
        with self.log.open("wb") as sink:
            self.process = subprocess.Popen(self.argv, stdout=sink, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"llama-server exited ({self.process.returncode}): {self.log.read_text()[-1500:]}"
                )
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        self.__exit__()
        raise RuntimeError(f"llama-server did not become healthy in 60 s: {self.log.read_text()[-1500:]}")

    def __exit__(self, *exc: Any) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())
