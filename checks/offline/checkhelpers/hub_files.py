"""Stand-ins for the small files of the recipe's two weight repos (the real ones are ~55 GB): real bytes,
real hashes, for the weights and image tests; and the real huggingface_hub 1.32.0 (the server lock's
version, from its released wheel) asked, offline, to resolve a hub cache laid out from them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from checkhelpers.released_wheels import unpacked_wheel

# Stand-ins for the real repos' small files (the real ones are ~55 GB): real bytes, real hashes.
MODEL_FILES = {
    "config.json": b'{"architectures": ["Qwen3ForCausalLM"]}',
    "model-00001-of-00002.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      shard one",
    "model-00002-of-00002.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      shard two",
    "model.safetensors.index.json": b'{"weight_map": {}}',
    "tokenizer.json": b"{}",
    ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
}
DRAFTER_FILES = {"config.json": b'{"architectures": ["DFlashDraftModel"]}', "model.safetensors": b"drafter"}


RESOLVE = """
import json, sys
from huggingface_hub import hf_hub_download, snapshot_download
out = {"version": __import__("huggingface_hub").__version__}
for repo in sys.argv[1:]:
    out[repo] = {
        "snapshot": snapshot_download(repo),
        "config": open(hf_hub_download(repo, "config.json"), "rb").read().decode(),
    }
print(json.dumps(out))
"""


def resolve_offline(cache: Path, repos: list[str]) -> subprocess.CompletedProcess[str]:
    """Ask the real huggingface_hub 1.32.0, offline, for each repo as `--model-path <repo>` does."""
    tree = unpacked_wheel("huggingface_hub", "1.32.0")
    # PYTHONPATH names the released huggingface_hub unpacked for this check: an upstream package under test
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}
    env.pop("HF_HOME", None)
    return subprocess.run(
        [sys.executable, "-c", RESOLVE, *repos], capture_output=True, text=True, env=env, timeout=120
    )
