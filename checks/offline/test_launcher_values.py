"""exactlaunch.values (one check per kind of value the launcher appends or edits) and exactlaunch.options
(strict command lines), on the edges that have broken them: each accepted and refused value written out."""

from __future__ import annotations

from pathlib import Path

import pytest
from exactlaunch import values
from exactlaunch.options import Once, strict_parser, typed

REFUSED = {
    values.port: ["0", "65536", "030000", "\u0663\u0660\u0660\u0660\u0660", "3e4", " 1", "1 ", "", "-1"],
    values.host: ["", "--tp-size=2", "-h", "a b", "a..b", "a" * 64 + ".x", "h\n"],
    values.count: ["0", "01", "\u00b2", "1.0", "", "-2"],
    values.gpu_ids: ["", ",", "0,", "x", "0,0", " 0", "01", "1000"],
    values.fraction: ["0", "1", "1.0", "2", "nan", "inf", "1e-3", "-0.5", "", ".", "0,5"],
    values.flag: ["tp-size", "-x", "--", "--tp-size=2", "--a b", "---x"],
    values.flag_value: ["--x", "-x", "a\0b"],
    values.env_name: ["A=B", "1A", "", "A B", "Ä"],
    values.name: ["..", ".hidden", "-x", "a/b", "", "a" * 101],
    values.relative_path: ["/abs", "../x", "a/../b", "a\\b", ""],
    values.path_text: ["x\r", " x", "x ", "a\nb", "a\x7fb"],
}
ACCEPTED = {
    values.port: ["1", "30000", "65535"],
    values.host: ["0.0.0.0", "::", "::1", "localhost", "node-1.example.org", "host."],
    values.count: ["1", "12"],
    values.gpu_ids: ["0", "0,1", "3,1"],
    values.fraction: ["0.88", ".5", "0.99999"],
    values.flag: ["--tp-size", "--enable-deterministic-inference", "--a_b"],
    values.flag_value: ["triton", "-1", "-.5", "-", "", "a=b"],
    values.env_name: ["SGLANG_X", "_A1"],
    values.name: ["patched", "revert-0003", "a.b_c+d"],
    values.relative_path: ["deep_gemm/include/x.cuh", "a"],
    values.path_text: ["/nix/store/x/recipe.json", "a b"],
}


@pytest.mark.parametrize(("kind", "text"), [(k, t) for k, ts in REFUSED.items() for t in ts])
def test_each_kind_refuses_its_edges(kind: object, text: str) -> None:
    with pytest.raises(values.BadValue):
        kind(text)  # type: ignore[operator]


@pytest.mark.parametrize(("kind", "text"), [(k, t) for k, ts in ACCEPTED.items() for t in ts])
def test_each_kind_takes_its_values(kind: object, text: str) -> None:
    kind(text)  # type: ignore[operator]


def test_port_and_count_are_ascii_only_and_say_so() -> None:
    with pytest.raises(values.BadValue, match=r"in ASCII digits"):
        values.port("\u0663\u0660\u0660\u0660\u0660")  # int() would read 30000


def test_below_proves_the_path_inside_its_root(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "out").symlink_to(tmp_path)
    assert values.below(tmp_path / "root", "a/b") == tmp_path / "root" / "a" / "b"
    with pytest.raises(values.BadValue, match="leads out of"):
        values.below(tmp_path / "root", "out/x")


def test_folder_to_make(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert values.folder_to_make(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    with pytest.raises(values.BadValue, match="exists and is not a folder"):
        values.folder_to_make(tmp_path / "file")
    with pytest.raises(values.BadValue, match="is not a folder"):
        values.folder_to_make(tmp_path / "file" / "below")


def parser() -> object:
    p = strict_parser(prog="p")
    p.add_argument("--port", type=typed(values.port), action=Once)
    p.add_argument("--names", type=lambda t: t.split(","), action=Once)
    p.add_argument("--variant", action=Once)
    return p


def test_once_refuses_twice_and_an_empty_value_but_keeps_list_values(
    capsys: pytest.CaptureFixture[str],
) -> None:
    p = parser()
    assert p.parse_args(["--names", "a,b"]).names == ["a", "b"]  # type: ignore[attr-defined]
    for argv, message in [
        (["--port", "1", "--port", "2"], "--port given twice (1 and 2): give it once"),
        (["--port=--"], "--port needs a value (given [])"),
        (["--var", "x"], "unrecognized arguments: --var x"),
        (["--port", "\u00b2"], "argument --port: not a TCP port"),
    ]:
        with pytest.raises(SystemExit) as leave:
            p.parse_args(argv)  # type: ignore[attr-defined]
        assert leave.value.code == 2 and message in capsys.readouterr().err
