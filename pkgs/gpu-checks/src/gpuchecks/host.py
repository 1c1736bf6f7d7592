"""What this host is, read before anything runs: the card (NVML, through gpuhost: its golden slug) and, in
the Python the kernel checks and servers run on, what torch sees (compute capability, SM count, L2 size)
and which host features hold. A feature is something a kernel check may need beyond the card, probed by
running it for real:

- `deepgemm-runs`: DeepGEMM imports and computes a bf16 GEMM as SGLang calls it
  (`deep_gemm.bf16_gemm_nn(a, b, out)` on 2-D operands, batch_invariant_ops.py). DeepGEMM's `_C.so`
  links libtorch and calls ATen through its C++ ABI, so a wheel built for another torch can load and then
  misread the tensors it is given; the probe's error is kept as the reason.

Kernel checks declare what they need (`@pytest.mark.capability(...)`, `@pytest.mark.host_feature(...)`);
the runner runs what applies and lists the rest with the reason (gpuchecks.selection)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

FEATURES = ("deepgemm-runs",)

# Runs in the kernel checks' Python (its torch, its deep_gemm): one JSON line on stdout.
PROBE = r"""
import json, sys
out = {"torch": None, "cuda": False, "features": {}, "why": {}}
try:
    import torch
except Exception as e:
    out["why"]["torch"] = f"torch does not import: {type(e).__name__}: {e}"
    print(json.dumps(out)); sys.exit(0)
out["torch"] = torch.__version__
if not torch.cuda.is_available():
    out["why"]["cuda"] = "torch sees no CUDA device"
    print(json.dumps(out)); sys.exit(0)
out["cuda"] = True
p = torch.cuda.get_device_properties(0)
out["device"] = {
    "name": p.name,
    "capability": f"{p.major}.{p.minor}",
    "sm_count": p.multi_processor_count,
    "l2_bytes": getattr(p, "L2_cache_size", None),
    "memory_bytes": p.total_memory,
}
print(json.dumps(out))
"""


# Runs in a process of its own (a DeepGEMM built for another torch may crash rather than raise): one JSON
# line on stdout, {"runs": bool, "why": str}.
DEEPGEMM_PROBE = r"""
import json, sys
import torch
try:
    import deep_gemm
except Exception as e:
    print(json.dumps({"runs": False, "why": f"deep_gemm does not import: {type(e).__name__}: {e}"}))
    sys.exit(0)
gen = torch.Generator(device="cpu").manual_seed(0)
m, n, k = 17, 4096, 5120
a = torch.randn((m, k), generator=gen).to(torch.bfloat16).cuda()
w = torch.randn((n, k), generator=gen).mul_(k ** -0.5).to(torch.bfloat16).cuda()
b = w.t()  # [K, N], as nn.Linear hands it to matmul_persistent
c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
shapes = ", ".join(f"{n} {tuple(t.shape)} (dim {t.dim()})" for n, t in (("a", a), ("b", b), ("c", c)))
try:
    deep_gemm.bf16_gemm_nn(a, b, c)
    torch.cuda.synchronize()
except Exception as e:
    why = f"deep_gemm.bf16_gemm_nn on 2-D bf16 operands ({shapes}), as SGLang calls it, failed: "
    print(json.dumps({"runs": False, "why": why + f"{type(e).__name__}: {str(e).strip()[:600]}"}))
    sys.exit(0)
err = (c.float() - (a.float() @ b.float())).abs().max().item()
ok = err < 0.1
how = f"within {err:.3g} of torch" if ok else f"{err:g} off torch"
why = f"deep_gemm.bf16_gemm_nn ({shapes}) ran, {how}"
print(json.dumps({"runs": ok, "why": why}))
"""


class HostError(RuntimeError):
    """The host cannot run the GPU checks; the message says why and what to do."""


@dataclass
class Host:
    slug: str | None
    identity: dict[str, Any] | None
    torch: str | None
    device: dict[str, Any] | None
    features: dict[str, bool] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)

    @property
    def capability(self) -> str | None:
        return None if self.device is None else str(self.device["capability"])

    @property
    def memory_bytes(self) -> int | None:
        return None if self.device is None else int(self.device["memory_bytes"])

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        if self.device is None:
            return f"no CUDA device ({'; '.join(self.why.values())})"
        dev = self.device
        l2 = f", L2 {dev['l2_bytes'] / 2**20:.0f} MiB" if dev.get("l2_bytes") else ""
        return (
            f"{dev['name']} (card {self.slug or 'unread'}, compute capability {dev['capability']}, "
            f"{dev['sm_count']} SMs{l2}, {dev['memory_bytes'] / 2**30:.0f} GiB), torch {self.torch}"
        )


def read_card(
    environ: Mapping[str, str] | None = None,
) -> tuple[str | None, dict[str, Any] | None, str | None]:
    """(slug, NVML identity, why not) of this machine's card, through gpuhost (the launcher's reader)."""
    try:
        from gpuhost.cards import CardIdentityError, local_card, slug_for
    except ImportError as error:
        return None, None, f"gpuhost does not import ({error}): run the runner in the server's Python"
    try:
        card = local_card(environ)
    except CardIdentityError as error:
        return None, None, str(error)
    if card is None:
        return None, None, "no NVIDIA driver on this machine"
    return slug_for(card), card.to_json(), None


def probe(python: list[str], env: Mapping[str, str], timeout_s: float = 300) -> dict[str, Any]:
    """Run PROBE in the kernel checks' Python; its JSON answer."""
    done = subprocess.run(
        [*python, "-c", PROBE], env=dict(env), capture_output=True, text=True, timeout=timeout_s
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise HostError(
            f"the host probe ({' '.join(python)} -c ...) exited {done.returncode}: "
            f"{done.stderr.strip()[-1500:]}"
        )
    data = json.loads(lines[-1])
    if not isinstance(data, dict):
        raise HostError(f"the host probe printed {lines[-1]!r}, not an object")
    return data


def probe_deepgemm(python: list[str], env: Mapping[str, str], timeout_s: float = 600) -> tuple[bool, str]:
    """(runs, why) of DEEPGEMM_PROBE; a crash or a hang is an absent feature, with what it left."""
    try:
        done = subprocess.run(
            [*python, "-c", DEEPGEMM_PROBE], env=dict(env), capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return False, f"the DeepGEMM probe did not finish in {timeout_s:.0f} s"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
        return False, f"the DeepGEMM probe crashed ({how}): {done.stderr.strip()[-800:]}"
    data = json.loads(lines[-1])
    return bool(data["runs"]), str(data["why"])


def read_host(python: list[str], env: Mapping[str, str]) -> Host:
    slug, identity, why_card = read_card(env)
    data = probe(python, env)
    if data.get("cuda"):
        runs, why_dg = probe_deepgemm(python, env)
        data.setdefault("features", {})["deepgemm-runs"] = runs
        data.setdefault("why", {})["deepgemm-runs"] = why_dg
    why = {str(k): str(v) for k, v in data.get("why", {}).items()}
    if why_card:
        why["card"] = why_card
    features = {name: bool(data.get("features", {}).get(name, False)) for name in FEATURES}
    for name in FEATURES:
        why.setdefault(name, why.get("cuda") or why.get("torch") or "not probed")
    if data.get("cuda"):
        why.pop("cuda", None)
    return Host(
        slug=slug,
        identity=identity,
        torch=data.get("torch"),
        device=data.get("device") if data.get("cuda") else None,
        features=features,
        why=why,
    )
