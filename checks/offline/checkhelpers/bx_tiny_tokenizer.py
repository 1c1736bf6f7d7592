"""Tiny transformers tokenizers (a `tokenizers` WordLevel model saved as PreTrainedTokenizerFast) for the
384-token test models, so token text can be mapped back to ids by a real tokenizer.

`unique`: id i decodes to `t{i}`, every text names one id. `paired`: ids 2k and 2k+1 are `p{k}` and
`p{k}_`, and the decoder drops `_`, so every text names two ids: nothing can be mapped.
"""

from __future__ import annotations

from pathlib import Path

from checkhelpers.bx_tiny_models import VOCAB


def make_tokenizer(path: Path, kind: str = "unique") -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if kind == "unique":
        vocab = {f"t{i}": i for i in range(VOCAB)}
    elif kind == "paired":
        vocab = {f"p{i // 2}" + ("_" if i % 2 else ""): i for i in range(VOCAB)}
    else:
        raise ValueError(kind)
    tok = Tokenizer(models.WordLevel(vocab, unk_token=next(iter(vocab))))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.Replace("_", "")
    PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(path)
    return path
