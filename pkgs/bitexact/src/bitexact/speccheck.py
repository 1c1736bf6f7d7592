"""Prove that speculation ran where it must, and did not where it must not (vLLM once silently turned
speculative decoding off when logprobs were requested; parity without speculation proves nothing)."""

from __future__ import annotations

from typing import Any

from bitexact.errors import SpecNotRunError
from bitexact.generation import Generation

REQUIREMENTS = ("must", "never", "any")


def spec_summary(generations: list[Generation], required: str) -> dict[str, Any]:
    ran = [g for g in generations if g.spec is not None and g.spec.ran]
    lengths = [g.spec.accept_length for g in ran if g.spec is not None and g.spec.accept_length is not None]
    return {
        "required": required,
        "prompts": len(generations),
        "ran": len(ran),
        "reported": sum(g.spec is not None for g in generations),
        "mean_accept_length": sum(lengths) / len(lengths) if lengths else None,
    }


def check_spec(generations: list[Generation], required: str, label: str, option: str = "--spec") -> None:
    """`option`: the verb's option that sets the requirement, named in the hint (`--spec-a` for parity's
    A side; golden and warm take `--spec`)."""
    if required == "must":
        missing = [g.prompt_id for g in generations if g.spec is None or not g.spec.ran]
        if missing:
            raise SpecNotRunError(
                f"{label}: speculation must run, but {len(missing)}/{len(generations)} prompts show "
                "no verify steps or drafted tokens in the engine's answer (SGLang's spec_verify_ct, "
                "llama.cpp's timings.draft_n, vLLM's spec_decode counters with one request in flight), "
                f"e.g. {missing[:5]}; the server may have "
                f"speculation off, or the engine does not report it (then pass {option} any)"
            )
    elif required == "never":
        ran = [g.prompt_id for g in generations if g.spec is not None and g.spec.ran]
        if ran:
            raise SpecNotRunError(
                f"{label}: this side is the no-speculation reference, but {len(ran)} prompts report verify "
                f"steps, e.g. {ran[:5]}; is the wrong server behind this URL?"
            )
