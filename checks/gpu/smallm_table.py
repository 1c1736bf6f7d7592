"""The small-M sweep's table: its format, the rule it is checked against, and the fit (pure Python).

The lab's sweep (`bench_smallm_sweep.py`) writes one table per card (`table_name`: keyed by compute
capability, SM count and L2 size, never the card's name) and `checks/offline/test_smallm_tiles.py` checks
the route's rule (`small_m_tiles.choose`, read from patch 0004) against every committed table under
`docs/evidence/smallm-*/`, without a GPU.

A table (JSON, `SCHEMA`):
    device:      name, capability "9.0", sm_count, l2_bytes, shared_per_block, torch, triton, cuda, driver
    copy_gbps:   {"memcpy_eager", "memcpy_graph", "kernel_eager"}: device-to-device copy, read + write, GB/s
    denominator: "memcpy_eager" (the issue's: an eager copy of >= 1 GiB in the same run)
    sweep_ms:    the Ms every candidate was timed at (times are flat in M; bits are checked at every M)
    candidates:  {id: config} (small_m_tiles.CONFIG_KEYS)
    shapes:      [{N, K, source, weight_bytes, large (>= 2 x L2), cublas_us {M: us}, first_route_us,
                   results {id: {"bits": "equal" | "differs: ..." | "error: ...", "us": {M: us} | null}},
                   all_m {name: {M: us}} for M = 1..16, roofline {name: {M: us}}}]
Times are medians of CUDA-graph replays after an L2 flush, in microseconds; M keys are strings (JSON).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path

SCHEMA = "bitexact-smallm-sweep/1"
# Paths in the repository, relative: the tables' tools and the tests that use them run from the repository
# root (an installed copy of this module lies outside any checkout, so its own path names none).
# Measured tables are raw results: docs/evidence/smallm-<card>-<date>/smallm-sm<cc>-<SMs>sm-<L2>mib.json.
EVIDENCE = Path("docs") / "evidence"
PATCH = Path("patches") / "sglang" / "0004-small-m-triton-route.patch"
TILES_PATH = "python/sglang/srt/batch_invariant_ops/small_m_tiles.py"
# The fit's search space for the rule's fill threshold (tiles per SM for the widest tile).
THRESHOLDS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
SMALL_GAIN = 1.02  # the fit gives small shapes their own config only when it is this much faster there
# What checks/offline/test_smallm_tiles.py holds the rule to on a committed table (mean time over the Ms):
REGRET_LARGE = 1.03  # shapes >= 2 x L2: within 3% of the best bit-equal candidate
REGRET_SMALL = 1.10  # launch-bound shapes: no target, but the rule should not pick badly there either
CUBLAS_SLACK = 1.03  # issue 12: never more than 3% slower than cuBLAS on shapes >= 2 x L2


def table_name(capability: str, sm_count: int, l2_bytes: int) -> str:
    """File name of a card's table: e.g. smallm-sm90-132sm-60mib.json for the H200."""
    return f"smallm-sm{capability.replace('.', '')}-{sm_count}sm-{l2_bytes >> 20}mib.json"


class TableError(ValueError):
    """A table that cannot be used, with the file and the reason."""


def read_table(path: Path, schema: str, keys: tuple[str, ...]) -> dict:
    """A sweep table of `schema` holding `keys` (this sweep's and the exact GEMM sweep's)."""
    try:
        table = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise TableError(f"{path}: cannot read the table ({error})") from None
    if table.get("schema") != schema:
        raise TableError(f"{path}: schema {table.get('schema')!r}, expected {schema!r} (rerun the sweep)")
    for key in keys:
        if key not in table:
            raise TableError(f"{path}: no {key!r}; a sweep table has {schema}'s keys")
    return table


def load_table(path: Path) -> dict:
    return read_table(path, SCHEMA, ("device", "candidates", "shapes", "sweep_ms"))


def committed_tables() -> list[Path]:
    return sorted(EVIDENCE.glob("smallm-*/smallm-sm*.json"))


def new_file_from_patch(patch_text: str, path: str) -> str:
    """The content of a file that a git diff creates (`new file mode`), from the diff's `+` lines."""
    sections = re.split(r"^diff --git ", patch_text, flags=re.M)
    for section in sections:
        if not section.startswith(f"a/{path} b/{path}\n"):
            continue
        if "\nnew file mode " not in section.split("@@", 1)[0]:
            raise ValueError(f"the patch modifies {path} instead of creating it")
        body = section.split("\n@@ ", 1)[1].split("\n", 1)[1]
        lines = [line[1:] for line in body.splitlines() if line.startswith("+")]
        return "\n".join(lines) + "\n"
    raise ValueError(f"the patch does not create {path}")


def tiles_module_source(patch: Path = PATCH) -> str:
    """small_m_tiles.py as patch 0004 creates it (standard library only, so it runs anywhere)."""
    return new_file_from_patch(patch.read_text(), TILES_PATH)


def module_from_patch(patch: Path, path: str, name: str):  # noqa: ANN201 (a module)
    """The module a patch creates at `path`, straight out of the patch (a rule module: standard library)."""
    import types

    module = types.ModuleType(name)
    exec(
        compile(new_file_from_patch(patch.read_text(), path), f"{patch.name}:{path}", "exec"), module.__dict__
    )
    return module


def load_tiles_module(patch: Path = PATCH):  # noqa: ANN201 (a module)
    return module_from_patch(patch, TILES_PATH, "small_m_tiles")


# --- reading a table ---------------------------------------------------------------------------------------


def mean_us(times: dict | None) -> float:
    """Mean over the timed Ms (times are flat in M); inf when the candidate was not timed."""
    if not times:
        return math.inf
    return sum(times.values()) / len(times)


def is_large(shape: dict) -> bool:
    return bool(shape["large"])


def measured_shapes(table: dict) -> list[dict]:
    """The shapes the sweep finished (a shape that failed as a whole carries only its error)."""
    return [s for s in table["shapes"] if "results" in s]


def usable(table: dict) -> set[str]:
    """Candidates whose bits equal the first route's on every measured shape of the table (a candidate the
    budget left untimed somewhere stays usable; its time there counts as infinite)."""
    ids = set(table["candidates"])
    for shape in measured_shapes(table):
        ids &= {i for i, r in shape["results"].items() if r.get("bits") == "equal"}
    return ids


def best_time(shape: dict, ids: set[str]) -> tuple[str, float]:
    times = {i: mean_us(shape["results"][i]["us"]) for i in ids if i in shape["results"]}
    times = {i: t for i, t in times.items() if math.isfinite(t)}
    if not times:
        raise TableError(f"shape ({shape['N']}, {shape['K']}): no candidate with equal bits was timed")
    best = min(times, key=times.__getitem__)
    return best, times[best]


def candidate_of(table: dict, config: dict, check_config: Callable[[dict], dict]) -> str | None:
    """The id of the candidate whose full config equals `config`, or None if the sweep did not measure it."""
    want = check_config(config)
    for cid, candidate in table["candidates"].items():
        if check_config(candidate) == want:
            return cid
    return None


def evaluate(table: dict, choose: Callable[[int, int, int, int], dict], check_config) -> list[dict]:  # noqa: ANN001
    """Per shape: the rule's choice, its mean time, the best bit-equal candidate's, and cuBLAS's."""
    device = table["device"]
    ids = usable(table)
    rows = []
    for shape in measured_shapes(table):
        config = choose(shape["N"], shape["K"], device["sm_count"], device["l2_bytes"])
        cid = candidate_of(table, config, check_config)
        best_id, best_us = best_time(shape, ids)
        chosen_us = mean_us(shape["results"][cid]["us"]) if cid in ids else math.inf
        cublas_us = mean_us(shape["cublas_us"])
        rows.append(
            {
                "N": shape["N"],
                "K": shape["K"],
                "large": is_large(shape),
                "chosen": cid,
                "chosen_ok": cid in ids,
                "chosen_us": chosen_us,
                "best": best_id,
                "best_us": best_us,
                "regret": chosen_us / best_us,
                "cublas_us": cublas_us,
                "vs_cublas": chosen_us / cublas_us,
            }
        )
    return rows


# --- fitting the rule to a table ---------------------------------------------------------------------------


def verdicts(rows: list[dict]) -> list[str]:
    """The offline checks' findings on `evaluate` rows: [] when the rule passes them."""
    found = []
    for r in rows:
        where = f"({r['N']}, {r['K']})"
        if not r["chosen_ok"]:
            found.append(
                f"{where}: the rule picks {r['chosen']}, which the sweep did not measure with equal bits"
            )
        elif r["regret"] > (REGRET_LARGE if r["large"] else REGRET_SMALL):
            found.append(
                f"{where}: the rule picks {r['chosen']} ({r['chosen_us']:.1f} us), best bit-equal "
                f"{r['best']} ({r['best_us']:.1f} us)"
            )
        if r["large"] and r["vs_cublas"] > CUBLAS_SLACK:
            found.append(
                f"{where}: {r['chosen_us']:.1f} us against cuBLAS {r['cublas_us']:.1f} us (> 3% slower)"
            )
    return found


def _width_for(n: int, sm_count: int, widths: tuple[int, ...], threshold: float) -> int:
    for width in sorted(widths, reverse=True):
        if -(-n // width) >= threshold * sm_count:
            return width
    return min(widths)


def _pipeline(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != "BLOCK_N"}


def fit_rule(table: dict, check_config: Callable[[dict], dict], is_small: Callable[..., bool]) -> dict:
    """The rule (small_m_tiles.RULE's form) with the least worst-case regret over the table's large shapes,
    then the least total regret; `small` is the one config best on the shapes the rule's `is_small` gate
    (small_m_tiles.is_small) sends to it, or None when the widths do as well there. Only candidates with
    equal bits on every shape are used."""
    ids = sorted(usable(table))
    if not ids:
        raise TableError("no candidate kept the bits on every shape and was timed: nothing to fit")
    configs = {i: check_config(table["candidates"][i]) for i in ids}
    sm_count = table["device"]["sm_count"]
    shapes = measured_shapes(table)
    large = [s for s in shapes if is_large(s)]
    l2_bytes = table["device"]["l2_bytes"]
    best = {id(s): best_time(s, set(ids))[1] for s in shapes}

    def ratio(shape: dict, cid: str) -> float:
        return mean_us(shape["results"][cid]["us"]) / best[id(shape)]

    by_width: dict[int, list[str]] = {}
    for cid in ids:
        by_width.setdefault(configs[cid]["BLOCK_N"], []).append(cid)

    def overall(cid: str, shapes: list[dict]) -> tuple[float, float]:
        values = [ratio(s, cid) for s in shapes] or [1.0]
        return (max(values), sum(values))

    best_rule, best_score = None, None
    for size in range(1, len(by_width) + 1):
        for widths in itertools.combinations(sorted(by_width), size):
            for threshold in THRESHOLDS:
                assigned: dict[int, list[dict]] = {w: [] for w in widths}
                for shape in large:
                    assigned[_width_for(shape["N"], sm_count, widths, threshold)].append(shape)
                pipelines, worst, total = {}, 0.0, 0.0
                for width in widths:
                    scored = assigned[width] or large  # a width unused here is still chosen on other cards
                    cid = min(by_width[width], key=lambda c: overall(c, scored))
                    pipelines[width] = _pipeline(configs[cid])
                    if assigned[width]:
                        w_max, w_sum = overall(cid, assigned[width])
                        worst, total = max(worst, w_max), total + w_sum
                score = (worst, total, -threshold)
                if best_score is None or score < best_score:
                    best_score = score
                    best_rule = {"small": None, "min_tiles_per_sm": threshold, "widths": pipelines}
    assert best_rule is not None
    small = [s for s in shapes if is_small(s["N"], s["K"], sm_count, l2_bytes, best_rule)]
    if small:

        def by_rule(shape: dict) -> float:
            width = _width_for(
                shape["N"], sm_count, tuple(best_rule["widths"]), best_rule["min_tiles_per_sm"]
            )
            config = {"BLOCK_N": width, **best_rule["widths"][width]}
            cid = next(c for c in ids if configs[c] == check_config(config))
            return ratio(shape, cid)

        rule_worst = max(by_rule(s) for s in small)
        small_id = min(ids, key=lambda c: overall(c, small))
        # a config of their own for small shapes only when it is clearly better there (L2 keys this split,
        # and on a card with another L2 it moves: see docs/kernels.md)
        if overall(small_id, small)[0] < rule_worst / SMALL_GAIN:
            best_rule["small"] = dict(configs[small_id])
    best_rule["widths"] = dict(sorted(best_rule["widths"].items(), reverse=True))
    return best_rule


def _ordered(config: dict, keys: tuple[str, ...]) -> dict:
    """`config` in the route's own key order (small_m_tiles.CONFIG_KEYS), as the patch writes configs."""
    return {key: config[key] for key in keys if key in config}


def python_literal(value: object, indent: int = 0) -> str:
    """`value` (dicts, lists, str, int, float, bool, None) as Python source in the style ruff formats."""
    pad = " " * (indent + 4)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{python_literal(k)}: {python_literal(v, indent + 4)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        items = [f"{pad}{python_literal(v, indent + 4)}," for v in value]
        return "[\n" + "\n".join(items) + "\n" + " " * indent + "]"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool | int | float) or value is None:
        return repr(value)
    raise TypeError(f"cannot write {type(value).__name__} into the rule")


def rule_literal(rule: dict) -> str:
    """`rule` as a Python literal for small_m_tiles.RULE (int keys stay ints, so it pastes as written)."""
    keys = tuple(load_tiles_module().CONFIG_KEYS)
    small = None if rule["small"] is None else _ordered(rule["small"], keys)
    widths = {int(w): _ordered(p, keys) for w, p in sorted(rule["widths"].items(), key=lambda i: -int(i[0]))}
    tidy = {"small": small, "min_tiles_per_sm": float(rule["min_tiles_per_sm"]), "widths": widths}
    return python_literal(tidy, 0)


# --- writing a fitted rule into patch 0004 -----------------------------------------------------------------


def _blob_id(content: str) -> str:
    """git's short blob id of `content` (the `index 0000000..<id>` line of a new-file diff)."""
    data = content.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:7]


def replace_new_file(patch_text: str, path: str, content: str) -> str:
    """`patch_text` with the file it creates at `path` replaced by `content` (header, count and index too)."""
    sections = re.split(r"(?=^diff --git )", patch_text, flags=re.M)
    for i, section in enumerate(sections):
        if section.startswith(f"diff --git a/{path} b/{path}\n"):
            lines = content.splitlines()
            sections[i] = (
                f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..{_blob_id(content)}\n"
                f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n"
                + "".join(f"+{x}\n" for x in lines)
            )
            return "".join(sections)
    raise ValueError(f"the patch does not create {path}")


def hunk_problems(patch_text: str) -> list[str]:
    """Hunks whose header line counts disagree with their body (what would make `patch` reject them)."""
    problems = []
    lines = patch_text.splitlines()
    i = 0
    while i < len(lines):
        match = re.match(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@", lines[i])
        if not match:
            i += 1
            continue
        want_old = int(match.group(1) or 1)
        want_new = int(match.group(2) or 1)
        old = new = 0
        j = i + 1
        while j < len(lines) and (old < want_old or new < want_new):
            tag = lines[j][:1]
            old += tag in (" ", "-")
            new += tag in (" ", "+")
            j += 1
        if (old, new) != (want_old, want_new) or (j < len(lines) and lines[j][:1] in ("+", "-", " ")):
            problems.append(f"line {i + 1}: {lines[i]!r} announces {want_old}/{want_new}, the body differs")
        i = j
    return problems


def with_rule(
    patch_text: str, rule: dict, source: str, path: str = TILES_PATH, literal: str | None = None
) -> str:
    """A patch's text with the RULE dict of the file it creates at `path` (patch 0004's small_m_tiles.py by
    default) set to `rule` (or to the source `literal`) and its RULE_SOURCE to `source`."""
    lines = new_file_from_patch(patch_text, path).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("RULE: dict = {"))
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    lines[start : end + 1] = ("RULE: dict = " + (literal or rule_literal(rule))).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("RULE_SOURCE = "))
    lines[at] = f"RULE_SOURCE = {json.dumps(source)}"
    return replace_new_file(patch_text, path, "\n".join(lines) + "\n")


def report(table: dict, rows: list[dict]) -> list[str]:
    """The shipped rule on a table, one line per shape: times (mean over the timed Ms) and the share of the
    table's copy bandwidth at M = 8 (bytes: weights, activations, output), against cuBLAS and the best."""
    copy = table["copy_gbps"][table["denominator"]]

    def share(shape: dict, us: float) -> str:
        nbytes = 2 * (shape["N"] * shape["K"] + 8 * shape["K"] + 8 * shape["N"])
        return f"{100 * nbytes / (us * 1e-6) / 1e9 / copy:.0f}%"

    device = table["device"]
    lines = [
        f"{device['name']}, {device['sm_count']} SMs, L2 {device['l2_bytes'] >> 20} MiB;"
        f" copy {copy:.0f} GB/s; '*' = under 2 x L2 (launch-bound)",
        "(N, K) | MB | rule: config, us, %copy | cuBLAS us, %copy | rule / cuBLAS"
        " | best bit-equal candidate, us",
    ]
    for shape, row in zip(measured_shapes(table), rows, strict=True):
        star = "" if row["large"] else "*"
        lines.append(
            f"({row['N']}, {row['K']}){star} | {shape['weight_bytes'] / 1e6:.0f} | {row['chosen']}, "
            f"{row['chosen_us']:.1f}, {share(shape, row['chosen_us'])} | {row['cublas_us']:.1f}, "
            f"{share(shape, row['cublas_us'])} | {row['vs_cublas']:.3f} | {row['best']}, {row['best_us']:.1f}"
        )
    return lines


def main(argv: list[str]) -> int:
    """`set-rule TABLE [PATCH]`: fit the rule to a committed table and write it into patch 0004.
    `report TABLE`: the shipped rule's choice, time and bandwidth share per shape of the table."""
    if len(argv) == 2 and argv[0] == "report":
        table = load_table(Path(argv[1]))
        tiles = load_tiles_module()
        print("\n".join(report(table, evaluate(table, tiles.choose, tiles.check_config))))
        return 0
    if len(argv) not in (2, 3) or argv[0] != "set-rule":
        print(
            "usage: python checks/gpu/smallm_table.py {set-rule TABLE.json [PATCH] | report TABLE.json}",
            file=sys.stderr,
        )
        return 2
    table_path = Path(argv[1])
    patch = Path(argv[2]) if len(argv) == 3 else PATCH
    try:
        table = load_table(table_path)
        tiles = load_tiles_module(patch)
        rule = fit_rule(table, tiles.check_config, tiles.is_small)
    except (TableError, ValueError) as error:
        print(f"set-rule: {error}", file=sys.stderr)
        return 2
    device = table["device"]
    source = (
        f"fitted by checks/gpu/smallm_table.py to {table_path.name} ({device['name']}, "
        f"{device['sm_count']} SMs, {device['l2_bytes'] >> 20} MiB L2, {table.get('date', 'undated')})"
    )
    patch.write_text(with_rule(patch.read_text(), rule, source))
    print(f"{patch}: RULE = {rule_literal(rule)}")
    rows = evaluate(table, lambda n, k, s, l2: tiles.choose(n, k, s, l2, rule=rule), tiles.check_config)
    for line in verdicts(rows) or ["the offline table checks find nothing on this table"]:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
