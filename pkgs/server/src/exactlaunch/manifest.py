"""The content manifest of a patched SGLang tree: the sha256 of every file the patch series touches.

The series cannot carry hashes of its own output: the patched files differ by base (the pinned commit, the
0.5.20 and 0.5.21 wheels). So the manifest is written after the series is applied, by whatever applied it
(pkgs/sglang's postInstall, the offline tests, the GPU tree recipe in docs/kernels.md), and the exact-mode
preflight re-hashes those files: a partly applied, hand-edited or stale tree is refused, naming the file.
Before writing, the writer proves the whole series is applied by reversing it, patch by patch, on a copy.

Standard library only, and no import of the rest of exactlaunch: the Nix build runs this file alone.

    python -m exactlaunch.manifest write SITE_DIR --series patches/sglang
    python -m exactlaunch.manifest verify SITE_DIR [--expect NAME ...]

SITE_DIR holds `sglang/` (site-packages, or SGLang's `python/` directory of a source tree); the series'
paths (`a/python/sglang/...`) are taken with `-p2`, as the patch contract says.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

MANIFEST = Path("sglang") / "srt" / "bitexact_manifest.json"
FORMAT = 1
STRIP = 2
_DIFF_TARGET = re.compile(r"\+\+\+ (\S+)")
_HEX64 = re.compile(r"[0-9a-f]{64}")


class ManifestError(ValueError):
    """The series, the tree or the manifest cannot be used; the message names the file and the fix."""


def series_paths(series: Sequence[Path]) -> list[Path]:
    """The patches in the order they apply: a directory's `*.patch` by name, or the files as given."""
    out: list[Path] = []
    # Absolute but not resolved: patch runs elsewhere, and a link's own name is the patch's name.
    for item in (s.absolute() for s in series):
        if item.is_dir():
            found = sorted(item.glob("*.patch"))
            if not found:
                raise ManifestError(f"{item} holds no *.patch files")
            out += found
        elif item.is_file():
            out.append(item)
        else:
            raise ManifestError(f"patch series {item} does not exist")
    return out


def touched_files(patch_text: str, name: str) -> dict[str, bool]:
    """{path under SITE_DIR: exists after the patch} for every file a git-format diff names."""
    out: dict[str, bool] = {}
    lines = patch_text.splitlines()
    in_header = False  # between `diff --git` and the first hunk, where `---`/`+++` name the files
    for i, line in enumerate(lines):
        if line.startswith("diff --git "):
            in_header = True
        elif line.startswith("@@"):
            in_header = False
        if not in_header or not line.startswith("--- ") or i + 1 >= len(lines):
            continue
        match = _DIFF_TARGET.match(lines[i + 1])
        if match is None:
            continue
        old, new = line[4:].split("\t")[0], match.group(1)
        deleted = new == "/dev/null"
        path = PurePosixPath(old if deleted else new)
        if len(path.parts) <= STRIP or ".." in path.parts:
            raise ManifestError(f"{name}: cannot take {path} with -p{STRIP} (expected a/python/sglang/...)")
        out[PurePosixPath(*path.parts[STRIP:]).as_posix()] = not deleted
    if not out:
        raise ManifestError(f"{name} names no files (not a unified diff?)")
    return out


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _reverse(copy: Path, patch: Path) -> str | None:
    """Reverse `patch` in `copy` exactly (no fuzz, never guessing the direction); None, or patch's output."""
    cmd = [
        "patch",
        "-R",
        "-f",
        f"-p{STRIP}",
        "--fuzz=0",
        "--no-backup-if-mismatch",
        "-r",
        "-",
        "-i",
        str(patch),
    ]
    try:
        result = subprocess.run(cmd, cwd=copy, capture_output=True, text=True)
    except FileNotFoundError:
        raise ManifestError("GNU patch is not on PATH: it proves the series is applied") from None
    return None if result.returncode == 0 else (result.stdout + result.stderr).strip()


def check_applied(site: Path, patches: Sequence[Path]) -> None:
    """Raise ManifestError unless every patch is applied in `site`: the series, reversed last to first on a
    copy of the files it touches, must come off exactly."""
    with tempfile.TemporaryDirectory(prefix="bitexact-manifest-") as temp:
        copy = Path(temp)
        for patch in patches:
            for rel in touched_files(patch.read_text(), patch.name):
                source = site / rel
                if source.is_file() and not (copy / rel).exists():
                    (copy / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, copy / rel)
        for patch in reversed(patches):
            failed = _reverse(copy, patch)
            if failed is not None:
                raise ManifestError(
                    f"{patch.name} is not applied in {site}: {', '.join(_failed_files(failed))} "
                    f"(reversing it on a copy failed): apply the series in name order with "
                    f"`patch -p{STRIP} --fuzz=0` first"
                )


def _failed_files(output: str) -> list[str]:
    """The files GNU patch's output names before a failed hunk or a missing file."""
    current, failed = "?", []
    for line in output.splitlines():
        if line.startswith("patching file "):
            current = line.removeprefix("patching file ").strip("'")
        if (
            "FAILED" in line or "does not exist" in line or "No file to patch" in line
        ) and current not in failed:
            failed.append(current)
    return failed or [output.splitlines()[-1] if output else "patch failed"]


def build(site: Path, series: Sequence[Path]) -> dict[str, Any]:
    """The manifest of `site` after `series`; refused unless the whole series is applied."""
    patches = series_paths(series)
    check_applied(site, patches)
    files: dict[str, bool] = {}
    for patch in patches:
        files.update(touched_files(patch.read_text(), patch.name))
    return {
        "format": FORMAT,
        "series": [{"name": p.name, "sha256": sha256_file(p)} for p in patches],
        "files": {
            rel: (sha256_file(site / rel) if exists else None) for rel, exists in sorted(files.items())
        },
    }


def write(site: Path, series: Sequence[Path]) -> Path:
    """Write `sglang/srt/bitexact_manifest.json` under `site`; returns its path."""
    if not (site / "sglang").is_dir():
        raise ManifestError(f"{site} holds no sglang/ directory: give the site-packages directory")
    manifest = build(site, series)
    target = site / MANIFEST
    target.write_text(json.dumps(manifest, indent=2) + "\n")
    return target


def _load(site: Path) -> dict[str, Any]:
    path = site / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(
            f"{path} is missing: the tree was not built by pkgs/sglang, or was patched by hand without "
            "`python -m exactlaunch.manifest write SITE_DIR --series patches/sglang` afterwards"
        ) from None
    except (OSError, json.JSONDecodeError) as error:
        raise ManifestError(f"{path} is unreadable ({error}): write it again") from None
    files, series = data.get("files"), data.get("series") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or data.get("format") != FORMAT
        or not isinstance(series, list)
        or not all(isinstance(s, dict) and isinstance(s.get("name"), str) for s in series)
        or not isinstance(files, dict)
        or not all(v is None or (isinstance(v, str) and _HEX64.fullmatch(v)) for v in files.values())
    ):
        raise ManifestError(f"{path} is not a format-{FORMAT} manifest: write it again")
    return data


def verify(site: Path, expected_series: Sequence[str] | None = None) -> list[str]:
    """Problems of the tree under `site` against its manifest, one per file (empty when it matches)."""
    try:
        manifest = _load(site)
    except ManifestError as error:
        return [str(error)]
    problems: list[str] = []
    names = [s["name"] for s in manifest["series"]]
    if expected_series is not None and names != list(expected_series):
        problems.append(
            f"{site / MANIFEST} was written for the series {names}, the recipe needs {list(expected_series)} "
            "(a stale tree)"
        )
    for rel, digest in manifest["files"].items():
        path = site / rel
        if digest is None:
            if path.exists():
                problems.append(f"{path} exists, the series deletes it")
        elif not path.is_file():
            problems.append(f"{path} is missing")
        elif sha256_file(path) != digest:
            problems.append(
                f"{path} differs from what the series produced (sha256 {sha256_file(path)[:16]}…, manifest "
                f"{digest[:16]}…): a hand-edited, partly applied or stale tree"
            )
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m exactlaunch.manifest", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    write_cmd = sub.add_parser("write", help="prove the series is applied, then write the manifest")
    write_cmd.add_argument("site", type=Path, metavar="SITE_DIR")
    write_cmd.add_argument(
        "--series", type=Path, nargs="+", required=True, help="a directory of *.patch or the patch files"
    )
    verify_cmd = sub.add_parser("verify", help="re-hash the files against the manifest")
    verify_cmd.add_argument("site", type=Path, metavar="SITE_DIR")
    verify_cmd.add_argument("--expect", nargs="+", help="the series' file names, in order")
    options = parser.parse_args(argv)
    if options.command == "write":
        try:
            target = write(options.site, options.series)
        except ManifestError as error:
            print(f"manifest: error: {error}", file=sys.stderr)
            return 1
        count = len(json.loads(target.read_text())["files"])
        print(f"manifest: {target}: {count} files", file=sys.stderr)
        return 0
    problems = verify(options.site, options.expect)
    for problem in problems:
        print(f"manifest: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
