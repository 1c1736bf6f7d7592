"""lab/perf/reuse.py, the prefix-reuse stage of the perf runner, against servers in SGLang 0.5.20's shapes
with a prefix cache (checkhelpers/bx_fake_servers.py's FakeServer, whose `/flush_cache` and
`meta_info.cached_tokens` follow SGLang's http_server.py and Req.cached_tokens): a cache of every sequence,
one that keeps a hybrid model's state only where a match stopped, one that never hits, and none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from checkhelpers.canned_sglang import CannedSGLang

from lab.perf import reuse

REPO = Path(__file__).resolve().parents[2]

PREFIXES = (96, 200)


def _post(server: CannedSGLang, seen: list[str]):  # noqa: ANN202
    import urllib.request

    def post(path: str, body: dict | None, timeout: float) -> str:
        seen.append(path)
        data = json.dumps(body).encode() if body is not None else b""
        request = urllib.request.Request(
            server.url + path, data=data, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.read().decode()

    return post


@pytest.mark.parametrize("behaviour", ["radix", "radix-hybrid"])
def test_cold_and_warm_per_prefix_with_hits_shown(tmp_path: Path, behaviour: str) -> None:
    seen: list[str] = []
    with CannedSGLang(behaviour) as server:
        found = reuse.measure(_post(server, seen), tmp_path, prefixes=PREFIXES, trials=2, log=lambda _: None)
    assert [p["prefix"] for p in found["prefixes"]] == list(PREFIXES)
    for p in found["prefixes"]:
        assert p["trials"] == 2 and p["cold_ms"] > 0 and p["warm_ms"] > 0
        assert all(0 < c <= p["prefix"] for c in p["warm_cached"])
    # a flush before the throwaway request and before every trial's cold one
    assert seen.count("/flush_cache") == 1 + 2 * len(PREFIXES)
    lines = (tmp_path / "reuse.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == {"settings": reuse.settings(PREFIXES, 2, 0)} and len(lines) == 5
    table = reuse.markdown({"exact-spec-radix": found})
    assert table.count("| exact-spec-radix |") == len(PREFIXES)


def test_a_rerun_keeps_the_rows_and_other_settings_are_refused(tmp_path: Path) -> None:
    with CannedSGLang("radix") as server:
        first = reuse.measure(_post(server, []), tmp_path, prefixes=PREFIXES, trials=1, log=lambda _: None)
        seen: list[str] = []
        again = reuse.measure(_post(server, seen), tmp_path, prefixes=PREFIXES, trials=1, log=lambda _: None)
        assert again == first and seen == []  # nothing owed: no request at all
        with pytest.raises(reuse.ReuseError, match="other settings"):
            reuse.measure(_post(server, []), tmp_path, prefixes=PREFIXES, trials=2, log=lambda _: None)


@pytest.mark.parametrize(
    ("behaviour", "why"),
    [("radix-never-hits", "is the radix cache on"), ("normal", "is the radix cache on")],
)
def test_a_warm_request_without_hits_fails_naming_why(tmp_path: Path, behaviour: str, why: str) -> None:
    with CannedSGLang(behaviour) as server, pytest.raises(reuse.ReuseError, match=why):
        reuse.measure(_post(server, []), tmp_path, prefixes=PREFIXES, trials=1, log=lambda _: None)


def test_a_count_that_is_none_is_refused(tmp_path: Path) -> None:
    with CannedSGLang("radix-bad-count") as server, pytest.raises(reuse.ReuseError, match="not a count"):
        reuse.measure(_post(server, []), tmp_path, prefixes=PREFIXES, trials=1, log=lambda _: None)


def test_the_perf_summary_shows_the_reuse_table(tmp_path: Path) -> None:
    from lab.perf import summary

    found = reuse.summary([{"prefix": 2048, "trial": 0, "cold_s": 0.5, "warm_s": 0.1, "warm_cached": 2048}])
    for name in ("exact-spec-radix", "stock-spec-radix"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "reuse.json").write_text(json.dumps(found))
    text = summary.summarize(tmp_path)
    assert "## Prefix reuse" in text
    assert "| exact-spec-radix | 2048 | 500.0 | 100.0 | 0.2 | 2048 | 1 |" in text
    assert "| stock-spec-radix | 2048 |" in text
