"""A golden record's per-prompt digests, small enough to commit where the record is not (a long reference
is megabytes of prompt text): the record's card, recipe, variant, settings and metadata, and per prompt
its id, its number of generated positions and bitexact's digests over the exact bytes of its token ids,
logprobs and top-k alternatives (`bitexact.golden.digests`). Two records with equal digests answered
alike bit for bit; the evidence tests compare these with the card's goldens.

Usage: python -m lab.card.reference_digests REFERENCE.json --note TEXT > REFERENCE.digests.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bitexact.golden import GoldenError, digests, load_golden

FIELDS = ("recipe", "card", "variant", "settings", "metadata")


def reference_digests(path: Path, note: str) -> dict[str, Any]:
    """The digests of the golden record at PATH; a record bitexact would refuse is refused here too."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GoldenError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise GoldenError(f"{path}: not UTF-8 text, so not a golden record") from None
    try:
        head = json.loads(text)
    except ValueError as exc:
        raise GoldenError(f"{path}: not JSON ({exc}), so not a golden record") from None
    if not isinstance(head, dict) or not isinstance(head.get("card"), str):
        raise GoldenError(f"{path}: not a golden record with a card (no string field 'card' at its top)")
    golden = load_golden(path, card=head["card"], recipe=None)  # verifies the record's own digest
    record = golden.record
    missing = [field for field in FIELDS if field not in record]
    if missing:
        raise GoldenError(f"{path}: the golden record lacks {', '.join(missing)}; re-record it with bitexact")
    return {
        "note": note,
        **{field: record[field] for field in FIELDS},
        "prompts": [
            {"id": gen.prompt_id, "digests": digests(gen), "positions": len(gen.token_ids)}
            for gen in golden.generations
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference", type=Path, help="a golden record (bitexact golden record's output)")
    parser.add_argument("--note", required=True, help="where and when it was recorded, and why digests")
    args = parser.parse_args(argv)
    try:
        out = reference_digests(args.reference, args.note)
    except GoldenError as exc:
        print(f"reference_digests: {exc}", file=sys.stderr)
        return 2
    try:
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")
        sys.stdout.flush()
    except OSError as exc:  # a closed pipe or a full disk: say so, not a traceback
        print(f"reference_digests: cannot write the digests: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
