"""Check an image built by nix2container against the layer size cap.

`nix build .#image-layer-sizes` runs it on `.#image`'s description (nix2container's image JSON, whose
`layers` carry each layer's uncompressed tar `size` and its store `paths`): the weight layers are
planned under the cap (nix/lib/image-plan.nix), but the server closure is split by popularity and
only the built sizes can tell. Prints one line per layer; exit 1 when a layer is over the cap, 2 when
the file is not such an image description.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Layer:
    size: int
    paths: tuple[str, ...]

    def label(self) -> str:
        names = [p.rsplit("/", 1)[-1].split("-", 1)[-1] for p in self.paths]
        shown = ", ".join(names[:3]) + (f", ... ({len(names)} paths)" if len(names) > 3 else "")
        return shown or "(no store paths)"


class ImageError(ValueError):
    """The file is not a nix2container image description."""


def read_layers(data: Any) -> list[Layer]:
    if not isinstance(data, dict) or not isinstance(data.get("layers"), list):
        raise ImageError("no `layers` list: not a nix2container image description")
    layers = []
    for i, entry in enumerate(data["layers"]):
        size = entry.get("size") if isinstance(entry, dict) else None
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ImageError(f"layer {i} has no size")
        paths = tuple(str(p.get("path", "")) for p in entry.get("paths") or [] if isinstance(p, dict))
        layers.append(Layer(size=size, paths=paths))
    return layers


def report(layers: list[Layer], cap: int) -> tuple[list[str], list[int]]:
    """The lines to print and the indices of the layers over the cap."""
    lines, over = [], []
    for i, layer in enumerate(layers):
        flag = "  OVER THE CAP" if layer.size > cap else ""
        lines.append(f"layer {i:3d}  {layer.size / 1e9:8.3f} GB  {layer.label()}{flag}")
        if layer.size > cap:
            over.append(i)
    total = sum(layer.size for layer in layers)
    lines.append(f"{len(layers)} layers, {total / 1e9:.3f} GB uncompressed, cap {cap / 1e9:.3f} GB per layer")
    return lines, over


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="image-layer-sizes", description=__doc__.splitlines()[0])
    parser.add_argument(
        "image", type=Path, help="nix2container image JSON (the output of `nix build .#image`)"
    )
    parser.add_argument("--cap", type=int, required=True, help="largest allowed layer, in bytes")
    options = parser.parse_args(argv)
    try:
        layers = read_layers(json.loads(options.image.read_text()))
    except (OSError, json.JSONDecodeError, ImageError) as error:
        print(f"image-layer-sizes: {options.image}: {error}", file=sys.stderr)
        return 2
    lines, over = report(layers, options.cap)
    print("\n".join(lines))
    if over:
        print(f"image-layer-sizes: layers {over} are over the cap of {options.cap} bytes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
