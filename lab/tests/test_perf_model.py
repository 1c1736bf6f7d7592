"""lab/perf/model_27b.py: the 27B-shaped configs are the geometry the kernel checks assume, everything else
is lab/card/tiny_model.py's; the parameter count is what transformers builds from the config; the memory
sizing reproduces the pools of the committed e2e server logs and says the shape fits the H200."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import smallm_plan
from checkhelpers.driver_standins import H100_PCIE, H100_SXM, install_driver, nvml_env

from lab.card import tiny_model
from lab.perf import model_27b

REPO = Path(__file__).resolve().parents[2]

EVIDENCE = REPO / "docs" / "evidence" / "e2e-h200-2026-11-30" / "patched"


def _constants(path: Path) -> dict[str, object]:
    """Module-level constant assignments of a source file (the GPU checks import CUDA packages)."""
    out: dict[str, object] = {}
    for node in ast.parse(path.read_text()).body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            continue
        if isinstance(target, ast.Name):
            out[target.id] = value
        elif isinstance(target, ast.Tuple) and isinstance(value, tuple):
            out.update({t.id: v for t, v in zip(target.elts, value, strict=True) if isinstance(t, ast.Name)})
    return out


def test_geometry_is_what_the_kernel_checks_assume() -> None:
    gdn = _constants(REPO / "checks" / "gpu" / "gdn_rig.py")
    attn = _constants(REPO / "checks" / "gpu" / "attn_harness.py")
    cfg = model_27b.target_config()
    assert (gdn["H"], gdn["HV"], gdn["K"], gdn["V"], gdn["WIDTH"]) == (
        cfg["linear_num_key_heads"],
        cfg["linear_num_value_heads"],
        cfg["linear_key_head_dim"],
        cfg["linear_value_head_dim"],
        cfg["linear_conv_kernel_dim"],
    )
    assert (attn["NUM_HEADS"], attn["NUM_KV_HEADS"], attn["HEAD_DIM"]) == (
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["head_dim"],
    )
    # The projections SGLang 0.5.20's qwen3_5.py fuses from this config are the small-M sweep's shapes.
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    key, value = 16 * 128, 48 * 128
    fused = {
        (2 * 24 * 256 + 2 * 4 * 256, h),  # qkv_proj with the output gate
        (h, 24 * 256),  # o_proj
        (2 * key + 2 * value, h),  # in_proj_qkvz
        (2 * 48, h),  # in_proj_ba
        (h, value),  # out_proj
        (2 * i, h),  # gate_up_proj
        (h, i),  # down_proj
    }
    assert fused <= {(n, k) for n, k, _ in smallm_plan.SHAPES}
    assert cfg["max_position_embeddings"] == 262144
    assert cfg["layer_types"].count("full_attention") == 16 and len(cfg["layer_types"]) == 64


def test_everything_but_geometry_is_tiny_models() -> None:
    _, size = tiny_model.tokenizer_json()
    ids = tiny_model.token_ids(size)
    for ours, tiny, geometry in (
        (model_27b.target_config(), tiny_model.target_config(size, ids), model_27b.TARGET_GEOMETRY_KEYS),
        (model_27b.drafter_config(), tiny_model.drafter_config(size, ids), model_27b.DRAFTER_GEOMETRY_KEYS),
    ):
        assert set(ours) == set(tiny)
        changed = {k for k in ours if ours[k] != tiny[k]}
        assert changed <= geometry
        assert {k: ours[k] for k in ours if k not in geometry} == {
            k: tiny[k] for k in tiny if k not in geometry
        }
    drafter = model_27b.drafter_config()
    assert drafter["dflash_config"]["target_layer_ids"] == [1, 16, 31, 46, 61]
    assert drafter["dflash_config"]["mask_token_id"] == ids["mask"]
    assert drafter["block_size"] == drafter["dflash_config"]["block_size"] == 8


def test_target_parameters_are_what_transformers_builds() -> None:
    import torch
    from transformers import AutoModelForCausalLM, Qwen3_5TextConfig

    config = Qwen3_5TextConfig(**{k: v for k, v in model_27b.target_config().items() if k != "model_type"})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    built = sum(p.numel() for p in model.parameters())
    assert built == model_27b.target_params(model_27b.target_config())
    assert 53e9 < 2 * built < 55e9  # "about 54 GB in BF16" (the recipe's model card)


def test_parameter_counts_match_a_real_checkpoint() -> None:
    """The counting rules on tiny_model's configs give the tensors tiny_model writes (which SGLang loaded in
    the e2e run with no missing or unexpected key), drafter included."""
    _, size = tiny_model.tokenizer_json()
    ids = tiny_model.token_ids(size)
    init = tiny_model.Init(tiny_model.SEED)
    target = sum(t.numel() for t in tiny_model.target_weights(init, ids).values())
    drafter = sum(t.numel() for t in tiny_model.drafter_weights(init).values())
    assert model_27b.target_params(tiny_model.target_config(size, ids)) == target
    assert model_27b.drafter_params(tiny_model.drafter_config(size, ids)) == drafter


def _log(name: str) -> str:
    return (EVIDENCE / name).read_text()


@pytest.mark.evidence  # reads a raw result under docs/evidence
@pytest.mark.parametrize(
    ("log", "speculative"), [("server-recipe.head.log", True), ("server-no-spec.head.log", False)]
)
def test_pool_sizing_reproduces_the_e2e_server_logs(log: str, speculative: bool) -> None:
    """The formula, fed what SGLang printed before and after loading the tiny models on the H200, gives the
    KV token count and GDN state sizes it printed."""
    text = _log(log)
    avail = [float(x) for x in re.findall(r"Load weight begin\. avail mem=([\d.]+) GB", text)]
    after = [float(x) for x in re.findall(r"Load weight end\..*?avail mem=([\d.]+) GB", text)]
    tokens = int(re.search(r"#tokens: (\d+)", text).group(1))  # type: ignore[union-attr]
    ssm = float(re.search(r"ssm_state size: ([\d.]+)GB", text).group(1))  # type: ignore[union-attr]
    _, size = tiny_model.tokenizer_json()
    ids = tiny_model.token_ids(size)
    target = tiny_model.target_config(size, ids)
    drafter = tiny_model.drafter_config(size, ids) if speculative else None
    mamba, intermediate, _, _, predicted = model_27b.pools(
        target, drafter, avail_gib=avail[0], after_weights_gib=after[-1]
    )
    assert predicted == pytest.approx(tokens, rel=5e-4)
    assert round(mamba, 2) == ssm
    if speculative:
        logged = float(re.search(r"intermediate_ssm_state_cache size: ([\d.]+)GB", text).group(1))  # type: ignore[union-attr]
        assert round(intermediate, 2) == logged
    else:
        assert intermediate == 0.0 and "intermediate_ssm_state_cache" not in text


def test_the_27b_shape_fits_the_h200() -> None:
    spec, plain = model_27b.memory(speculative=True), model_27b.memory(speculative=False)
    for m in (spec, plain):
        assert m.fits and m.kv_tokens >= 262144
        assert m.static_gib == pytest.approx(m.avail_gib * 0.88)
    assert spec.intermediate_gib > 0 and plain.intermediate_gib == 0
    assert spec.kv_bytes_per_token == 16 * 4 * 256 * 4 + 5 * 4 * 256 * 4
    # a card with half the free memory would not hold the speculative server's pools
    assert not model_27b.memory(speculative=True, avail_gib=70.0).fits


def test_on_80_gb_fewer_request_slots_make_room_for_131072_tokens() -> None:
    """The H100's free memory: the speculative servers start at the recipe's 8 slots but cap requests below
    65536 tokens (the verify states crowd the KV out); 2 slots leave room for a 131072-token prompt and its
    new tokens. Without speculation the whole context fits."""
    avail = model_27b.CARDS["h100-sxm5-80gb"].avail_gib
    eight = model_27b.memory(speculative=True, avail_gib=avail)
    two = model_27b.memory(speculative=True, avail_gib=avail, max_running=2)
    assert eight.starts and not eight.fits and 32768 + 128 < eight.kv_tokens < 65536
    assert two.intermediate_gib == pytest.approx(eight.intermediate_gib * 3 / 9)
    assert 131072 + 128 < two.kv_tokens < 262144
    assert model_27b.memory(speculative=False, avail_gib=avail).fits
    assert model_27b.verdict(eight).startswith(f"starts, but no request can exceed {eight.kv_tokens} tokens")


def test_written_folders_load_with_transformers(tmp_path: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    model_27b.write(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "target")
    assert len(tokenizer) == model_27b.VOCAB
    ids = tokenizer.encode("The recipe's model, in its own shape. " * 20)
    _, base = tiny_model.tokenizer_json()
    assert max(ids) < base  # no merge builds the padding tokens
    assert len(tokenizer.decode([base, model_27b.VOCAB - 1], skip_special_tokens=False)) > 0
    config = AutoConfig.from_pretrained(tmp_path / "target")
    assert type(config).__name__ == "Qwen3_5TextConfig" and config.vocab_size == model_27b.VOCAB
    assert not list(tmp_path.glob("*/*.safetensors"))  # config only: SGLang's dummy loader makes the weights
    assert (tmp_path / "drafter" / "tokenizer.json").read_bytes() == (
        tmp_path / "target" / "tokenizer.json"
    ).read_bytes()


def test_cli_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    assert model_27b.main(["--estimate", "--card", "h200"]) == 0
    out = capsys.readouterr().out
    assert "speculative servers:" in out and "fits" in out and "DOES NOT FIT" not in out


def estimate_on(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`python -m lab.perf.model_27b --estimate` as a process (the product's gpuhost installed), on the
    card `env` shows."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("BITEXACT_") and k != "LD_LIBRARY_PATH"}
    return subprocess.run(
        [sys.executable, "-m", "lab.perf.model_27b", "--estimate"],
        cwd=tmp_path,
        env=base | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_estimate_reads_the_running_card(tmp_path: Path) -> None:
    """Without --card the estimate sizes the pools from the card it runs on (gpuhost through the NVML
    stand-in): an H100 SXM5 gets the H100's free memory and its verdict, not the H200's."""
    driver = install_driver(tmp_path / "lib")
    done = estimate_on({"BITEXACT_DRIVER_LIB": str(driver), **nvml_env(H100_SXM)}, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "of 78.50 GiB free (79.6 GiB h100-sxm5-80gb)" in done.stdout
    assert "no request can exceed 45420 tokens" in done.stdout


def test_without_a_card_the_estimate_asks_for_one(tmp_path: Path) -> None:
    """A machine without an NVIDIA driver (this one), or a card the table has no figure for: refused with
    the fix, never the H200's figure in silence."""
    done = estimate_on({"BITEXACT_DRIVER_LIB": str(tmp_path / "no-driver-here")}, tmp_path)
    assert done.returncode != 0 and "--card" in done.stderr, done.stderr[-2000:]
    driver = install_driver(tmp_path / "lib")
    done = estimate_on({"BITEXACT_DRIVER_LIB": str(driver), **nvml_env(H100_PCIE)}, tmp_path)
    assert done.returncode != 0 and "holds no free-memory figure" in done.stderr, done.stderr[-2000:]


def test_a_shallower_fallback_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """If 64 layers do not start, the largest shape that does is delivered: same layer geometry, fewer
    layers, and SGLang picks the drafter's context layers."""
    target, drafter = model_27b.target_config(layers=32), model_27b.drafter_config(layers=32)
    assert target["layer_types"].count("full_attention") == 8 and drafter["num_target_layers"] == 32
    assert "target_layer_ids" not in drafter["dflash_config"]
    full = model_27b.drafter_params(model_27b.drafter_config())
    assert model_27b.drafter_params(drafter) == full  # still 5 context features, one per draft layer
    assert model_27b.main([str(tmp_path), "--layers", "32", "--card", "h200"]) == 0
    assert '"num_hidden_layers": 32' in (tmp_path / "target" / "config.json").read_text()
    with pytest.raises(SystemExit):
        model_27b.main(["--estimate", "--layers", "30"])
    assert "multiple of 4" in capsys.readouterr().err


def test_the_script_runs_on_its_own(tmp_path: Path) -> None:
    """As lab/perf/host.sh runs it: a fresh Python, `python -m lab.perf.model_27b` from the repository
    root, no PYTHONPATH (an import path left behind by a file move once failed only on the GPU host)."""
    import subprocess

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lab.perf.model_27b",
            str(tmp_path / "m"),
            "--layers",
            "4",
            "--card",
            "h200",
        ],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "m" / "target" / "config.json").is_file()
    assert (tmp_path / "m" / "drafter" / "config.json").is_file()
