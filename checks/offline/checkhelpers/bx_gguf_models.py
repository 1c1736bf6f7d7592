"""Tiny llama-architecture GGUF models written with the `gguf` package (PyPI), for llama.cpp's server.

Random float32 weights from fixed seeds and a SentencePiece-style ("llama") vocabulary held in the GGUF
metadata: the control tokens, the 256 byte tokens `<0x00>`..`<0xFF>` at ids 3..258 (so bitexact's
`--tokenizer bytes`, which maps byte b to id b + 3, gives the ids llama.cpp's byte fallback would), then
`▁` and the printable ASCII characters as normal tokens. A draft model shares the vocabulary (llama.cpp
refuses a draft whose vocabulary differs from the target's) and is smaller. Keys and tensor names are
the ones llama.cpp's `llama` architecture loads (`gguf.constants`: MODEL_ARCH.LLAMA, MODEL_TENSOR.*).

`ascii_only` builds a model that never picks a control token or a byte token >= 0x80: embedding
dimension 0 holds a constant that no layer writes to (row 0 of attn_output and ffn_down is zero), so
after the final RMS norm it is always positive, and the output rows of those tokens weigh it with a large
negative number. llama.cpp's server gives no logprob entry for a token that ends inside a UTF-8
character (see openai_logprobs.check_count), so only such a model lets every position be compared; the
unconstrained model is there to show that bitexact refuses the incomplete answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Shape:
    layers: int
    embd: int
    heads: int
    kv_heads: int
    ff: int
    seed: int
    logit_scale: float = 8.0  # peakier distributions than plain N(0, 0.02) weights give
    ascii_only: bool = True
    twins: float = 0.0  # > 0: normal tokens in pairs of near twins (their output rows this far apart)


TARGET = Shape(layers=2, embd=64, heads=4, kv_heads=2, ff=128, seed=1)
DRAFT = Shape(layers=1, embd=32, heads=2, kv_heads=1, ff=64, seed=2)
# A wider target with near-twin tokens: the two of a pair tie at the top of a distribution now and then
# (llama.cpp's server lists the tie one way while its sampler chose the other), and its end-of-sequence
# token, less held down at this width, is the argmax at some positions, where ignore_eos makes the server
# choose another (answers.not_argmax).
TWINS = Shape(layers=2, embd=256, heads=4, kv_heads=2, ff=512, seed=1, twins=1e-6)
UNCONSTRAINED = Shape(layers=2, embd=64, heads=4, kv_heads=2, ff=128, seed=1, ascii_only=False)
BYTE_OFFSET = 3  # ids of <0x00>..<0xFF> start here, after <unk>, <s>, </s>
CONTEXT = 1024
CONSTANT = 4.0  # the value of embedding dimension 0 in ascii_only models
BANNED_WEIGHT = -50.0


def banned_ids() -> list[int]:
    """Control tokens and the byte tokens that start or continue a multi-byte UTF-8 character."""
    return [0, 1, 2] + [BYTE_OFFSET + b for b in range(0x80, 0x100)]


def vocabulary() -> tuple[list[str], list[int]]:
    import gguf

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256
    normal = ["\u2581"] + [chr(c) for c in range(33, 127)]
    tokens += normal
    types += [gguf.TokenType.NORMAL] * len(normal)
    return tokens, [int(t) for t in types]


def write_model(path: Path, shape: Shape, name: str) -> Path:
    import gguf
    import numpy as np

    tokens, types = vocabulary()
    n_vocab = len(tokens)
    rng = np.random.default_rng(shape.seed)
    head_dim = shape.embd // shape.heads

    def weight(*dims: int, scale: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(dims) * scale).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(shape.embd)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ff)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * 3 + [0.0] * 256 + [-1.0] * (n_vocab - 259))
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)  # prompts arrive as ids; nothing is prepended to them
    writer.add_add_space_prefix(False)

    def residual_write(rows: int, cols: int) -> np.ndarray:
        """A matrix whose output adds to the residual stream: row 0 stays zero in ascii_only models."""
        w = weight(rows, cols, scale=0.2)
        if shape.ascii_only:
            w[0, :] = 0.0
        return w

    embeddings = weight(n_vocab, shape.embd, scale=1.0)
    output = weight(n_vocab, shape.embd, scale=shape.logit_scale / shape.embd**0.5)
    if shape.ascii_only:
        embeddings[:, 0] = CONSTANT
        output[:, 0] = 0.0
        output[banned_ids(), 0] = BANNED_WEIGHT
    if shape.twins:
        normal = range(BYTE_OFFSET + 256 + 1, n_vocab - 1, 2)
        for first in normal:
            output[first + 1] = output[first] + weight(shape.embd, scale=shape.twins)
    writer.add_tensor("token_embd.weight", embeddings)
    for i in range(shape.layers):
        kv = shape.kv_heads * head_dim
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(shape.embd, np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(shape.embd, shape.embd, scale=0.2))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(kv, shape.embd, scale=0.2))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(kv, shape.embd, scale=0.2))
        writer.add_tensor(f"blk.{i}.attn_output.weight", residual_write(shape.embd, shape.embd))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(shape.embd, np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(shape.ff, shape.embd, scale=0.2))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(shape.ff, shape.embd, scale=0.2))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", residual_write(shape.embd, shape.ff))
    writer.add_tensor("output_norm.weight", np.ones(shape.embd, np.float32))
    writer.add_tensor("output.weight", output)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_models(folder: Path) -> dict[str, Path]:
    """The target and draft (ascii_only), the unconstrained target and the target with twins, as GGUF files
    in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    return {
        "target": write_model(folder / "tiny-target.gguf", TARGET, "bitexact-tiny-target"),
        "draft": write_model(folder / "tiny-draft.gguf", DRAFT, "bitexact-tiny-draft"),
        "unconstrained": write_model(folder / "tiny-any.gguf", UNCONSTRAINED, "bitexact-tiny-any"),
        "twins": write_model(folder / "tiny-twins.gguf", TWINS, "bitexact-tiny-twins"),
    }
