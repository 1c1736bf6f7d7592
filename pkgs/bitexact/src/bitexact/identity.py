"""Who ran this: the card, its driver and CUDA versions, read through NVML, and the slug that keys goldens.

The reader and the card table are gpuhost's (pkgs/gpuhost, docs/cards.md), shared with the launcher, the
image entrypoint and the GPU checks; no host binary (nvidia-smi) is run. gpuhost is bitexact's optional
`card` extra: it ships with the server (its venv, where the GPU checks run bitexact) and installs with
`pip install ./pkgs/formats ./pkgs/gpuhost`; without it the card cannot be read here, and `--card SLUG`
names it.
"""

from __future__ import annotations

from typing import Any

from bitexact.errors import UsageError

CPU = "cpu"
NO_READER = (
    "the card cannot be read: gpuhost (the NVML card reader, pkgs/gpuhost; "
    "`pip install ./pkgs/formats ./pkgs/gpuhost`) is not importable here; pass --card SLUG"
)


def _gpuhost() -> Any:
    try:
        import gpuhost
    except ImportError as error:
        raise UsageError(NO_READER) from error
    return gpuhost


def gpu_info() -> dict[str, Any]:
    """Metadata for golden records: every card NVML lists, with its slug and the driver and CUDA
    versions; {} on a machine without an NVIDIA driver; {"error": ...} when one is there but its cards
    cannot be read (the record's key comes from --card or detect_card, not from this)."""
    try:
        gpuhost = _gpuhost()
    except UsageError as error:
        return {"error": str(error)}
    from gpuhost.nvml import local_cards

    try:
        cards = local_cards()
    except (gpuhost.NvmlError, gpuhost.DriverNotFound) as error:
        return {"error": str(error)}
    if cards is None:
        return {}
    return {
        "cards": [{**card.to_json(), "slug": gpuhost.slug_for(card)} for card in cards],
        "driver": cards[0].driver_version if cards else None,
        "cuda_driver": cards[0].cuda_driver_version if cards else None,
    }


def detect_card() -> str:
    """The golden slug of this machine's card (gpuhost's table), `cpu` on a machine without an NVIDIA
    driver. UsageError, naming --card, when a driver is there but its card cannot be named."""
    gpuhost = _gpuhost()
    try:
        card = gpuhost.local_card()
    except gpuhost.CardIdentityError as error:
        raise UsageError(str(error)) from error
    return CPU if card is None else gpuhost.slug_for(card)


def known_card_slugs(golden_dir: Any = None) -> list[str]:
    """The slugs a golden may be keyed by without --new-card: gpuhost's card table (where gpuhost is
    importable), `cpu`, and the cards that already have a golden directory."""
    slugs = {CPU}
    try:
        from gpuhost.cards import load_table

        slugs |= {row.slug for row in load_table()}
    except ImportError:
        pass
    if golden_dir is not None and golden_dir.is_dir():
        slugs |= {p.name for p in golden_dir.iterdir() if p.is_dir()}
    return sorted(slugs)


def card_properties(slug: str, local: bool) -> dict[str, Any] | None:
    """What the kernels read of card SLUG, as far as it is known here (a golden family holds its members to
    it): the card table's compute capability, SM count and L2 size (NVML reads neither SM count nor L2),
    and, where this machine's card is the one checked (`local`), NVML's compute capability in place of
    the table's. With --card, bitexact sees no card: the table is all there is. None without gpuhost."""
    try:
        gpuhost = _gpuhost()
    except UsageError:
        return None
    from gpuhost.cards import load_table

    row = next((r for r in load_table() if r.slug == slug), None)
    found: dict[str, Any] = {}
    if row is not None:
        found = {"compute_capability": row.compute_capability, "sm_count": row.sm_count, "l2_mib": row.l2_mib}
    if local:
        try:
            card = gpuhost.local_card()
        except gpuhost.CardIdentityError:
            card = None
        if card is not None and gpuhost.slug_for(card) == slug:
            found["compute_capability"] = card.compute_capability
    return found


# What names the model an engine serves, by engine kind (engines/*: identity()); compared between a golden
# and the server checked against it.
MODEL_KEYS = ("model_path", "model", "served_model_name", "revision", "model_files_sha256")


def served_model(identity: dict[str, Any]) -> dict[str, Any]:
    """The fields of an engine identity that say which model (and revision) it serves."""
    found = {key: identity[key] for key in MODEL_KEYS if identity.get(key) not in (None, "")}
    props = identity.get("props")
    if isinstance(props, dict) and props.get("model_path"):
        found.setdefault("model_path", props["model_path"])
    return found


def model_mismatch(recorded: dict[str, Any], served: dict[str, Any]) -> list[str]:
    """`field: golden X, server Y` for every model field both identities report and that differs."""
    a, b = served_model(recorded), served_model(served)
    return [
        f"{key}: golden {a[key]!r}, server {b[key]!r}" for key in sorted(set(a) & set(b)) if a[key] != b[key]
    ]
