"""README's commands name real things: every flake output and app (names evaluated from the flake, as
test_nix_parse.py does), every verb and flag of our CLIs (their own parsers), every recipe variant, the
image the flake builds, Nix's own subcommands and flags (the installed Nix's --help). The checker itself
is shown to catch a typo of each kind, and README's links and size and `.ci/run`'s command are held to
the guide."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from checkhelpers.flake_eval import SYSTEM, flake_eval
from checkhelpers.hfcache_support import NIXPKGS_DOUBLES, nix_eval
from checkhelpers.image_eval import ADAPTER, image
from checkhelpers.readme_commands import REPO, Flake, code_lines, problems_in, simple_commands

pytestmark = [
    pytest.mark.nix,
    pytest.mark.skipif(
        shutil.which("nix") is None or not (REPO / ".git").exists(), reason="needs nix and a git checkout"
    ),
]

README = REPO / "README.md"


@pytest.fixture(scope="module")
def flake() -> Flake:
    names = {}
    for kind in ("packages", "apps", "checks"):
        done = flake_eval(f"{kind}.{SYSTEM}")
        assert done.returncode == 0, done.stderr
        names[kind] = set(json.loads(done.stdout))
    plain = image(None)
    dev = nix_eval(f"let d = {NIXPKGS_DOUBLES}; out = {ADAPTER}; in {{ inherit (out.image-dev) name tag; }}")
    return Flake(
        packages=names["packages"],
        apps=names["apps"],
        checks=names["checks"],
        image_refs={f"{plain['name']}:{plain['tag']}", f"{dev['name']}:{dev['tag']}"},
    )


def fresh(flake: Flake) -> Flake:
    return Flake(flake.packages, flake.apps, flake.checks, flake.image_refs)


def test_every_readme_command_names_real_outputs_verbs_and_flags(flake: Flake) -> None:
    text = README.read_text()
    assert problems_in(text, fresh(flake)) == []
    # The check saw the guide's commands (a parser that found none would pass vacuously).
    programs = {words[0] for _, line in code_lines(text) for words in simple_commands(line)}
    assert {"nix", "bitexact", "docker", "bash"} <= programs


@pytest.mark.parametrize(
    ("command", "complaint"),
    [
        ("nix run .#sever -- --port 30000", "no app or package 'sever'"),
        ("nix build .#servr", "no package 'servr'"),
        ("nix run .#server -- --prot 30000", "unknown option --prot: did you mean --port?"),
        ("nix run .#server -- --variant nospec", "no-spec"),
        ("nix run .#lock -- statuss", "invalid choice: 'statuss'"),
        ("nix run .#record-golden -- --forse", "unrecognized arguments: --forse"),
        ("nix biuld .#server", "not a subcommand of the installed Nix"),
        ("nix build --rebiuld .#server", "documents no option --rebiuld"),
        ("nix run .#image.copyToDocker", "no attribute 'copyToDocker'"),
        ("nix run .#image.copyTo -- docker-archive:x.tar:bitexact-sglang:latest", "the flake's image is"),
        ("bitexact parrity sglang+http://127.0.0.1:30000 sglang+http://127.0.0.1:30001", "invalid choice"),
        ("bitexact repeat sglang+http://127.0.0.1:30000 --repats 50", "unrecognized arguments"),
        ("bitexact golden check sglang+http://127.0.0.1 --recipe nix/recipes/qwen3.8-27b-exact.json", "port"),
        ("bitexact golden record sglang+http://127.0.0.1:30000 --variant no-spc", "no-spec"),
        ("bitexact parity sglang+http://h:1 sglang+http://h:2 --preset forced-rejet", "forced-reject"),
        ("bitexact golden check sglang+http://127.0.0.1:30000 --recipe nix/recipes/nope.json", "nope.json"),
        ("bitexact-server --list-variant", "unknown option --list-variant"),
        ("pinlock weights --snapshto DIR", "unrecognized arguments"),
        ("bitexact-driver shwo", "usage: bitexact-driver"),
        ("bitexact-driver exec", "exec needs a command"),
        (
            "docker run --gpus all bitexact-sglang:qwen3.8-27b-exact --varient no-spec",
            "unrecognized arguments",
        ),
        ("docker run --gpus all bitexact-sglang:latest", "the flake's images are"),
        ("docker load -i elsewhere.tar", "no earlier command writes that archive"),
        ("bash checks/offline/runn.sh", "no such script"),
        ("pip install ./pkgs/bitexactt", "no Python project"),
        ("bitexat parity A B", "not a program"),
    ],
)
def test_the_checker_catches_each_kind_of_typo(flake: Flake, command: str, complaint: str) -> None:
    problems = problems_in(f"    {command}\n", fresh(flake))
    assert any(complaint in problem for problem in problems), problems


def test_a_typo_in_the_readme_itself_fails(flake: Flake) -> None:
    text = README.read_text()
    for right, wrong in (
        ("nix run .#server --", "nix run .#servr --"),
        ("--variant no-spec", "--variant nospec"),
    ):
        assert right in text
        assert problems_in(text.replace(right, wrong, 1), fresh(flake)), wrong


def test_code_blocks_and_shell_lines_are_read_as_a_shell_would() -> None:
    text = (
        "para\n\n    A=1 nix build .#x -o y   # a comment .#nope\n    bitexact \\\n      repeat E\n\ntext\n"
    )
    assert [line for _, line in code_lines(text)] == [
        "A=1 nix build .#x -o y   # a comment .#nope",
        "bitexact  repeat E",
    ]
    fences = "```\nnix build .#a\n```\n```nix\n{ x = 1; }\n```\n```sh\nbitexact repeat E\n```\n"
    assert [line for _, line in code_lines(fences)] == ["nix build .#a", "bitexact repeat E"]
    assert simple_commands("a x && . b/c ; d 'e # f' # g") == [["a", "x"], [".", "b/c"], ["d", "e # f"]]
    assert simple_commands("X=$(nix build .#w) y") == [["nix", "build", ".#w"], ["y"]]


def test_ci_runs_the_readme_test_command() -> None:
    command = "bash checks/offline/run.sh"
    readme_lines = [line.strip() for _, line in code_lines(README.read_text())]
    assert command in readme_lines
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line.strip()]
    assert ci[-1] == f"exec {command}"


def test_readme_links_exist_and_it_stays_a_short_guide() -> None:
    text = README.read_text()
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links
    for link in links:
        if not link.startswith(("http://", "https://")):
            assert (REPO / link).exists(), link
    assert len(text.encode()) <= 10 * 1024, "README is a guide; reference material goes to docs/"


def test_readme_points_users_at_nothing_they_lack() -> None:
    text = README.read_text()
    assert "DESIGN.md" not in text and "shared folder" not in text
    assert not re.search(r"\b\d+ (of the )?\d+ (collected )?tests\b", text), "test counts go stale"


def test_docs_cite_no_private_notes() -> None:
    for page in sorted((REPO / "docs").glob("*.md")):
        body = page.read_text()
        for private in ("DESIGN.md", "measurements.md", "team notes"):
            assert private not in body, f"{page.name} cites {private}, which users do not have"
