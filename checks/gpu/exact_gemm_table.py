"""The exact GEMM sweep's table: its format, the rule's evaluation on it, and the fit (pure Python).

The lab's sweep (`bench_exact_gemm.py`) writes one table per card (`table_name`: compute capability, SM count,
L2 size) and `checks/offline/test_exact_gemm_tiles.py` holds patch 0005's rule (`exact_gemm_tiles.choose`,
read from the patch) to every committed table under `docs/evidence/exact-gemm-*/`, without a GPU.

A table (JSON, `SCHEMA`):
    device:      name, capability, sm_count, l2_bytes, torch, triton, cuda, driver
    candidates:  {id: full config} (exact_gemm_tiles.CONFIG_KEYS)
    shapes:      [{N, K, source, model (a GEMM of the 27B-shaped model), bits {id: "equal" | "differs: ..." |
                   "error: ..."}, us {M: {"cublas", "persistent", "rule", <id>...: us}}}]
Times are medians of CUDA-graph replays after an L2 flush, in microseconds; M keys are strings (JSON).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from smallm_table import TableError, module_from_patch, read_table  # the shared table code

SCHEMA = "bitexact-exact-gemm-sweep/1"
# Relative, as in smallm_table: run from the repository root.
EVIDENCE = Path("docs") / "evidence"
PATCH = Path("patches") / "sglang" / "0005-exact-gemm-route.patch"
TILES_PATH = "python/sglang/srt/batch_invariant_ops/exact_gemm_tiles.py"
# The fit's buckets: (max_m, the timed Ms it is fitted on); None is the open-ended last bucket.
BUCKETS: list[tuple[int | None, tuple[int, ...]]] = [
    (16, (1, 4, 8, 16)),
    (32, (24, 32)),
    (48, (48,)),
    (64, (64,)),
    (128, (96, 128)),
    (256, (256,)),
    (1024, (512,)),
    (4096, (2200,)),
    (None, (8192,)),
]
THRESHOLDS = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)


def table_name(capability: str, sm_count: int, l2_bytes: int) -> str:
    """File name of a card's table: e.g. exact-gemm-sm90-132sm-60mib.json for the H200."""
    return f"exact-gemm-sm{capability.replace('.', '')}-{sm_count}sm-{l2_bytes >> 20}mib.json"


def load_table(path: Path) -> dict:
    return read_table(path, SCHEMA, ("device", "candidates", "shapes"))


def committed_tables() -> list[Path]:
    return sorted(EVIDENCE.glob("exact-gemm-*/exact-gemm-sm*.json"))


def load_tiles_module(patch: Path = PATCH):  # noqa: ANN201 (a module)
    """patch 0005's exact_gemm_tiles.py as a module, straight out of the patch (standard library only)."""
    return module_from_patch(patch, TILES_PATH, "exact_gemm_tiles")


def model_shapes(table: dict) -> list[dict]:
    """The shapes the targets are medians over: the model's GEMMs, or every shape when a run chose others."""
    model = [s for s in table["shapes"] if s.get("model")]
    return model or list(table["shapes"])


def _ids_by_config(table: dict, check: Callable[[dict], dict]) -> dict[str, str]:
    return {json.dumps(check(c), sort_keys=True): cid for cid, c in table["candidates"].items()}


def rule_time(table: dict, shape: dict, m: int, choose: Callable[..., dict], check: Callable[[dict], dict]):
    """(id, us) of the config `choose` returns for this shape and M, if the table measured it bit-equal there;
    (id or a description, None) otherwise."""
    device = table["device"]
    config = check(choose(m, shape["N"], shape["K"], device["sm_count"], device["l2_bytes"]))
    cid = _ids_by_config(table, check).get(json.dumps(config, sort_keys=True))
    if cid is None:
        return f"unmeasured {config}", None
    if shape["bits"].get(cid) != "equal":
        return cid, None
    return cid, shape["us"].get(str(m), {}).get(cid)


def ratios(table: dict, choose: Callable[..., dict], check: Callable[[dict], dict], ms: list[int]) -> dict:
    """{M: [rule / cuBLAS per model shape]} for the Ms the table timed (None where the rule's pick is
    unmeasured or not bit-equal there)."""
    out: dict[int, list[float | None]] = {}
    for m in ms:
        row = []
        for shape in model_shapes(table):
            times = shape["us"].get(str(m))
            if not times or "cublas" not in times:
                continue
            _, us = rule_time(table, shape, m, choose, check)
            row.append(None if us is None else us / times["cublas"])
        if row:
            out[m] = row
    return out


def median_ratio(values: list[float | None]) -> float:
    """The median over shapes; a shape the rule cannot serve bit-equal counts as infinitely slow."""
    return statistics.median([float("inf") if v is None else v for v in values])


def fit(table: dict, tiles) -> dict:  # noqa: ANN001 (the tiles module)
    """The rule that minimises, bucket by bucket, the worst median (over the model's shapes) of route time
    over cuBLAS across the bucket's timed Ms (then the mean), choosing only candidates measured bit-equal on
    every shape: for each tile height and fill threshold, the best candidate per width, then one width's
    config swapped or one width dropped at a time while that improves the score."""
    equal = {
        cid for cid in table["candidates"] if all(s["bits"].get(cid) == "equal" for s in table["shapes"])
    }
    configs = {cid: tiles.check_config(table["candidates"][cid]) for cid in equal}
    buckets = []
    for max_m, ms in BUCKETS:
        timed = [m for m in ms if any(str(m) in s["us"] for s in table["shapes"])]
        if not timed:
            continue
        best = None
        for block_m in sorted({c["BLOCK_M"] for c in configs.values()}):
            widths = _best_per_width(table, configs, block_m, timed)
            if not widths:
                continue
            for threshold in THRESHOLDS:
                entry = {"max_m": max_m, "BLOCK_M": block_m, "small": None, "min_tiles_per_sm": threshold}
                scored = _improve(table, tiles, configs, {**entry, "widths": widths}, timed)
                if best is None or scored[0] < best[0]:
                    best = scored
        if best is not None:
            buckets.append(best[1])
    if not buckets:
        raise TableError("no bit-equal candidate was timed: nothing to fit")
    buckets[-1] = {**buckets[-1], "max_m": None}
    return {"buckets": buckets}


def _score(table: dict, tiles, entry: dict, ms: list[int]) -> tuple[float, ...]:  # noqa: ANN001
    rule = {"buckets": [{**entry, "max_m": None}]}
    per_m = ratios(table, lambda *shape: tiles.choose(*shape, rule=rule), tiles.check_config, ms)
    medians = [median_ratio(v) for v in per_m.values()]
    means = [statistics.fmean(float("inf") if x is None else x for x in v) for v in per_m.values()]
    return (max(medians), statistics.fmean(medians), statistics.fmean(means))


def _improve(table: dict, tiles, configs: dict[str, dict], entry: dict, ms: list[int]) -> tuple:  # noqa: ANN001
    """(score, entry) after greedy swaps of one width's config, or drops of one width, while they help."""
    best = (_score(table, tiles, entry, ms), entry)
    improved = True
    while improved:
        improved = False
        trials = []
        for width in best[1]["widths"]:
            if len(best[1]["widths"]) > 1:
                trials.append({w: c for w, c in best[1]["widths"].items() if w != width})
            for config in configs.values():
                if config["BLOCK_M"] == entry["BLOCK_M"] and config["BLOCK_N"] == width:
                    swapped = {k: v for k, v in config.items() if k not in ("BLOCK_M", "BLOCK_N")}
                    if swapped != best[1]["widths"][width]:
                        trials.append({**best[1]["widths"], width: swapped})
        for widths in trials:
            candidate = {**best[1], "widths": widths}
            score = _score(table, tiles, candidate, ms)
            if score < best[0]:
                best, improved = (score, candidate), True
    return best


def _best_per_width(table: dict, configs: dict[str, dict], block_m: int, ms: list[int]) -> dict[int, dict]:
    """For each tile width, the candidate of this BLOCK_M with the lowest summed time over cuBLAS over the
    model's shapes at `ms` (measured on every one of them), without BLOCK_M and BLOCK_N (the rule's)."""
    model = model_shapes(table)
    chosen: dict[int, dict] = {}
    for width in sorted({c["BLOCK_N"] for c in configs.values() if c["BLOCK_M"] == block_m}):
        scored = []
        for cid, config in configs.items():
            if config["BLOCK_M"] != block_m or config["BLOCK_N"] != width:
                continue
            cells = [  # the shapes timed at that M (the LM head only at decode M)
                (s["us"][str(m)].get(cid), s["us"][str(m)].get("cublas"))
                for s in model
                for m in ms
                if str(m) in s["us"]
            ]
            if cells and all(us is not None and cublas for us, cublas in cells):
                scored.append((sum(us / cublas for us, cublas in cells), cid))
        if scored:
            config = dict(configs[min(scored)[1]])
            del config["BLOCK_M"], config["BLOCK_N"]
            chosen[width] = config
    return dict(sorted(chosen.items(), reverse=True))


def summary(table: dict, choose: Callable[..., dict], check: Callable[[dict], dict], label: str) -> list[str]:
    """One line per timed M: the median over the model's shapes of rule, persistent kernel and best candidate
    against cuBLAS, and the worst shape for the rule."""
    ms = sorted({int(m) for s in table["shapes"] for m in s["us"]})
    lines = [f"{label}: median over the model's shapes of time / cuBLAS (worst shape in brackets)"]
    lines.append("M | rule | persistent | best bit-equal candidate")
    for m, row in ratios(table, choose, check, ms).items():
        persistent, best = [], []
        for shape in model_shapes(table):
            times = shape["us"].get(str(m)) or {}
            if "cublas" not in times:
                continue
            persistent.append(times["persistent"] / times["cublas"])
            equal = [us for cid, us in times.items() if shape["bits"].get(cid) == "equal"]
            best.append(min(equal) / times["cublas"] if equal else None)
        worst = max(float("inf") if v is None else v for v in row)
        lines.append(
            f"{m} | {median_ratio(row):.3f} ({worst:.3f}) | {statistics.median(persistent):.3f} | "
            f"{median_ratio(best):.3f}"
        )
    return lines


# --- writing a fitted rule into patch 0005 -----------------------------------------------------------------

BUCKET_KEYS = ("max_m", "BLOCK_M", "small", "min_tiles_per_sm", "widths")


def rule_literal(rule: dict, config_keys: tuple[str, ...]) -> str:
    """`rule` as a Python literal for exact_gemm_tiles.RULE: buckets in order, their keys in BUCKET_KEYS
    order, widths widest first with int keys, configs in the route's key order."""

    def ordered(config: dict) -> dict:
        return {key: config[key] for key in config_keys if key in config}

    buckets = []
    for entry in rule["buckets"]:
        tidy = {key: entry[key] for key in BUCKET_KEYS}
        tidy["small"] = None if entry["small"] is None else ordered(entry["small"])
        tidy["min_tiles_per_sm"] = float(entry["min_tiles_per_sm"])
        tidy["widths"] = {
            int(w): ordered(c) for w, c in sorted(entry["widths"].items(), key=lambda i: -int(i[0]))
        }
        buckets.append(tidy)
    from smallm_table import python_literal

    return python_literal({"buckets": buckets})


def with_rule(patch_text: str, rule: dict, source: str, config_keys: tuple[str, ...]) -> str:
    """Patch 0005's text with exact_gemm_tiles.RULE set to `rule` and RULE_SOURCE to `source`."""
    from smallm_table import with_rule as write_rule

    return write_rule(patch_text, rule, source, path=TILES_PATH, literal=rule_literal(rule, config_keys))


def rule_source(table: dict, table_path: Path) -> str:
    device = table["device"]
    return (
        f"fitted by checks/gpu/exact_gemm_table.py to {table_path.name} ({device['name']}, "
        f"{device['sm_count']} SMs, {device['l2_bytes'] >> 20} MiB L2, {table.get('date', 'undated')})"
    )


def main(argv: list[str]) -> int:
    """`set-rule TABLE [PATCH]`: fit the rule to a table and write it into patch 0005 (or PATCH).
    `summary TABLE`: the shipped rule against cuBLAS, M by M."""
    if len(argv) == 2 and argv[0] == "summary":
        table, tiles = load_table(Path(argv[1])), load_tiles_module()
        print("\n".join(summary(table, tiles.choose, tiles.check_config, "the shipped rule")))
        return 0
    if len(argv) not in (2, 3) or argv[0] != "set-rule":
        print(
            "usage: python checks/gpu/exact_gemm_table.py {set-rule TABLE.json [PATCH] | summary TABLE.json}",
            file=sys.stderr,
        )
        return 2
    table_path = Path(argv[1])
    patch = Path(argv[2]) if len(argv) == 3 else PATCH
    try:
        table = load_table(table_path)
        tiles = load_tiles_module(patch)
        rule = fit(table, tiles)
    except TableError as error:
        print(f"set-rule: {error}", file=sys.stderr)
        return 2
    patch.write_text(
        with_rule(patch.read_text(), rule, rule_source(table, table_path), tuple(tiles.CONFIG_KEYS))
    )
    print(f"set-rule: wrote the rule fitted to {table_path} into {patch}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
