"""images/layer_sizes.py on image descriptions in nix2container's format (types.go: layers with digest,
size, diff_ids, paths), built from real tar files with their real sizes and digests."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from checkhelpers.hfcache_support import REPO

SCRIPT = REPO / "images" / "layer_sizes.py"


def layer(tmp: Path, name: str, payload: int) -> dict[str, Any]:
    """A layer entry for a real tar holding one file of `payload` bytes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(f"nix/store/{name}/data")
        info.size = payload
        tar.addfile(info, io.BytesIO(b"\0" * payload))
    data = buffer.getvalue()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    return {
        "digest": digest,
        "size": len(data),
        "diff_ids": digest,
        "paths": [{"path": f"/nix/store/{name}"}],
        "mediatype": "application/vnd.oci.image.layer.v1.tar",
    }


def run(image: Path, cap: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--cap", str(cap), str(image)], capture_output=True, text=True
    )


def test_layers_under_and_over_the_cap(tmp_path: Path) -> None:
    small, big = layer(tmp_path, "aaa-weights-part", 10_000), layer(tmp_path, "bbb-server-rest", 50_000)
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"version": 1, "image-config": {}, "layers": [small, big], "arch": "amd64"}))
    ok = run(image, cap=100_000)
    assert ok.returncode == 0, ok.stderr
    assert "layer   0" in ok.stdout and "weights-part" in ok.stdout
    assert f"2 layers, {(small['size'] + big['size']) / 1e9:.3f} GB uncompressed" in ok.stdout
    over = run(image, cap=30_000)
    assert over.returncode == 1
    assert "server-rest  OVER THE CAP" in over.stdout and "layers [1] are over the cap" in over.stderr


def test_not_an_image(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"layers": [{"digest": "x"}]}')
    done = run(bad, cap=1)
    assert done.returncode == 2 and "layer 0 has no size" in done.stderr
