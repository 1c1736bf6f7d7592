"""What `--help` shows: every argument described with its default, and examples for each verb."""

from __future__ import annotations

import argparse

ENGINE = (
    "the engine: sglang+http://HOST:PORT (SGLang's native API), openai+http://HOST:PORT/v1?model=NAME "
    "(any OpenAI-compatible server), llamacpp+http://HOST:PORT (llama.cpp's native /completion), "
    "hf:PATH?device=cpu|cuda&batch=N (transformers in process); options ?timeout=S&retries=N for servers"
)

EXAMPLES = {
    "parity": """examples:
  bitexact parity sglang+http://127.0.0.1:30000 sglang+http://127.0.0.1:30001
  bitexact parity sglang+http://127.0.0.1:30000 sglang+http://127.0.0.1:30001 --preset forced-reject \\
      --recipe nix/recipes/qwen3.8-27b-exact.json
  bitexact parity llamacpp+http://127.0.0.1:8080 llamacpp+http://127.0.0.1:8081 --prompts my.jsonl""",
    "repeat": """examples:
  bitexact repeat sglang+http://127.0.0.1:30000 -n 50 -b 8
  bitexact repeat hf:./model?device=cuda&batch=4 -n 10 --max-new-tokens 32""",
    "golden": """examples:
  bitexact golden record sglang+http://127.0.0.1:30000 --recipe nix/recipes/qwen3.8-27b-exact.json
  bitexact golden check sglang+http://127.0.0.1:30000 --recipe nix/recipes/qwen3.8-27b-exact.json
  bitexact golden check sglang+http://10.0.0.5:30000 --card h200 --recipe-name my-recipe --golden g.json""",
    "history": """examples:
  bitexact history h200                  # checks/golden/h200/history.jsonl -> .../history-h200.html
  bitexact history h200 --diff B1 B3     # what changed between two builds, in words
  bitexact history h200 --history result/history.jsonl --recipe-name qwen3.8-27b-exact""",
    "bench": """examples:
  bitexact bench sglang+http://127.0.0.1:30000 --lengths 640,2200,128k \\
      --recipe nix/recipes/qwen3.8-27b-exact.json
  bitexact bench openai+http://127.0.0.1:8000/v1?model=qwen --lengths 2200 --runs 3""",
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Examples kept as written; an option's default appended where its help does not already say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        quiet = (
            default is None or default is False or default == argparse.SUPPRESS or not action.option_strings
        )
        if quiet or "default" in text or "%(default)" in text:
            return text
        return text + " (default: %(default)s)"


def verb_parser(sub: argparse._SubParsersAction, name: str, **options: object) -> argparse.ArgumentParser:
    """A verb's parser with the formatter and its examples."""
    options.setdefault("formatter_class", HelpFormatter)
    if name in EXAMPLES:
        options.setdefault("epilog", EXAMPLES[name])
    return sub.add_parser(name, **options)  # type: ignore[arg-type]
