"""Catalogue rows for what an answer says beside its values, and for resuming (reliability_catalogue.py joins
them with the rest): every field a verdict, a record or a report uses is read strictly; every self-report
is held to what was sent, and only what was asked is compared; a chosen token that is not the reported
argmax is compared and reported, not refused; a resume is keyed by what is compared and never rests on
a row a refusal rests on."""

from __future__ import annotations

from checkhelpers.reliability_setup import Case, both, common, golden, golden_args, prompts

repeat = ("repeat", "sglang+{url}", "-n", "2", "-b", "1")

CASES: list[Case] = [
    Case(
        "bx-spec-count-bool",
        "bitexact",
        "a server reporting `spec_verify_ct: true` (a boolean where a count belongs)",
        (*repeat, *common),
        2,
        r"/generate \('p0#r\d+'\): meta_info\.spec_verify_ct is 'True', not a count \(a whole number >= 0\)",
        prompts,
        server="spec-bool",
    ),
    Case(
        "bx-latency-nan",
        "bitexact",
        "a server reporting a NaN latency (`e2e_latency`)",
        (*repeat, *common),
        2,
        r"/generate \('p0#r\d+'\): meta_info\.e2e_latency is 'nan', not a measure \(a finite number >= 0\)",
        prompts,
        server="latency-nan",
    ),
    Case(
        "bx-prompt-truncated",
        "bitexact",
        "a server that cut the prompt (SGLang's --allow-auto-truncate: fewer prompt tokens than sent)",
        ("golden", "check", "sglang+{url}", *golden_args, *common),
        2,
        r"prompt 'p0': the server says it computed 2 prompt tokens, but 3 were sent: it cut the prompt",
        both(prompts, golden()),
        server="truncated",
    ),
    Case(
        "bx-cached-over",
        "bitexact",
        "a server reporting more cached prompt tokens than the prompt holds",
        (*repeat, *common),
        2,
        r"prompt 'p0#r\d+': the server says 8 prompt tokens came from its cache, more than the prompt's 3",
        prompts,
        server="cached-over",
    ),
    Case(
        "bx-top-longer",
        "bitexact",
        "a server listing more top-k alternatives than asked, checked against a golden of the k asked",
        ("golden", "check", "sglang+{url}", *golden_args, *common),
        0,
        r"golden check: EQUAL: 2/2 prompts equal",
        both(prompts, golden()),
        server="longtop",
    ),
    Case(
        "bx-not-argmax",
        "bitexact",
        "a server whose chosen token is not the argmax its own top-k reports (as llama.cpp's speculative "
        "server's can be)",
        ("golden", "check", "sglang+{url}", *golden_args, *common),
        1,
        r"2 chosen tokens are not their engine's reported argmax \(first: side A, prompt 'p0', position 1",
        both(prompts, golden()),
        server="notargmax",
    ),
    Case(
        "bx-warm-withdrawn",
        "bitexact",
        "warm whose cold pass shows cache hits (no flush): the answers it rests on are not resumed",
        ("warm", "sglang+{url}", *common, "--shared-prefix", "37", "--vocab-size", "90"),
        2,
        r"the cold pass took prompt tokens from the cache .*stored answers it rests on are withdrawn",
        prompts,
        server="radix-no-flush",
    ),
]
