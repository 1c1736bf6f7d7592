"""`bitexact-gpu-checks record`: this card's goldens, with the plan's `goldenRecord` commands (the prompts,
then the long prompts keyed `<recipe>-long`), on the patched tree's server. The flake's record-golden app
calls this verb; a GPU host without Nix calls it the same way. Each command writes its golden under
GOLDEN_DIR/<card>/ and a RECORDED line in that card's history; arguments after `--` go to each command
(`--force` to replace a golden, `--build-id ID`)."""

from __future__ import annotations

import time

from gpuchecks.plan import PlanError, fill
from gpuchecks.results import worst_exit
from gpuchecks.run import Run
from gpuchecks.servers import PortTaken, ServerFailed, log
from gpuchecks.trees import TreeError


def record(run: Run, extra: list[str]) -> int:
    inputs = run.i
    tree = inputs.trees["patched"]
    out = inputs.out / "record"
    out.mkdir(parents=True, exist_ok=True)
    names = [inputs.plan.recipe, f"{inputs.plan.recipe}-long"][: len(inputs.plan.golden_record_commands)]
    card = run.host.slug
    there = [inputs.golden_dir / card / f"{n}.json" for n in names] if card else []
    existing = [p for p in there if p.exists()]
    if existing and "--force" not in extra:
        # Refused before a server starts: bitexact would refuse the command after it.
        log(
            f"record: this card's goldens exist ({', '.join(map(str, existing))}); pass -- --force to "
            "replace them"
        )
        return 2
    info = run.build_info(tree)
    if info is None:
        log("record: the launcher could not describe the build (--build-info); a golden needs it")
        return 2
    variant = inputs.plan.golden_record_variant
    server = None
    results = []
    try:
        try:
            server = run.start(tree, variant, inputs.port, out / f"server-{variant}.log")
        except (PortTaken, ServerFailed, TreeError) as error:
            log(f"record: {error}")
            return 2
        values = {
            "URL": f"sglang+http://127.0.0.1:{inputs.port}",
            "RECIPE": str(inputs.recipe),
            "GOLDEN_DIR": str(inputs.golden_dir),
            "BUILD_INFO": str(info),
        }
        if inputs.model_snapshot is not None:
            values["MODEL_SNAPSHOT"] = str(inputs.model_snapshot)
        for command, name in zip(inputs.plan.golden_record_commands, ("short", "long"), strict=False):
            try:
                filled = [*fill(command, values), "--out", str(out / name), *extra]
            except PlanError as error:
                log(f"record: {error}")
                return 2
            started = time.monotonic()
            result = run.run_bitexact(filled, tree, out / "bitexact.log", {"BITEXACT_BUILD_INFO": str(info)})
            log(
                f"record: {' '.join(filled[:3])} ({name}): exit {result['exit']} after "
                f"{time.monotonic() - started:.0f} s"
            )
            results.append(result)
            if result["exit"] != 0:
                break
    except KeyboardInterrupt:
        log("record: interrupted")
        run.stop.set()
        return 130
    finally:
        run.stop_everything()  # the server, and a bitexact command still running
        if server is not None:
            server.stop()
    code = worst_exit(results)
    log(f"record: exit {code}; goldens under {inputs.golden_dir}, reports under {out}")
    return code
