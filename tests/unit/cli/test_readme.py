"""The README (issue 29, item 10): under 1,500 words, its two set-up commands first, the five commands, the exit
codes, one CI snippet that installs from a checkout or a wheel (no address nothing shows to exist), links to docs/
that exist; the pages generated from the code are up to date."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
Cli = Callable[..., tuple[int, str, str]]


def test_the_readme_is_under_1500_words_and_starts_with_the_two_commands() -> None:
    assert len(README.split()) <= 1500  # `wc -w README.md`
    lines = README.splitlines()
    assert lines[0] == "# tfgpu"
    assert lines[2].strip() == "python3 -m pip install . && tfgpu doctor"
    assert lines[3].strip() == "python3 -m pip install nox && nox -s tests"


def test_the_readme_has_the_five_commands_the_exit_codes_and_the_gpu_section() -> None:
    for command in ("tfgpu doctor", "tfgpu create", "tfgpu run", "tfgpu shell", "tfgpu smoke", "tfgpu explain"):
        assert f"`{command}" in README, command
    assert "## My TensorFlow does not see the GPU" in README
    table = README.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |", "| 130 |"):
        assert code in table


def _links(text: str) -> list[str]:
    return [m for m in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", m)]


def _anchors(page: Path) -> set[str]:
    """The anchors mkdocs gives a page's headings (its toc extension: lower case, punctuation dropped, spaces as -)."""
    out = set()
    for heading in re.findall(r"(?m)^#{1,6} (.+)$", page.read_text(encoding="utf-8")):
        slug = re.sub(r"[^\w\s-]", "", heading.strip().lower())
        out.add(re.sub(r"[\s]+", "-", slug))
    return out


def test_every_link_of_the_readme_names_a_file_and_an_anchor_that_exist() -> None:
    links = _links(README)
    assert "docs/guide.md" in links
    for link in links:
        path, _, anchor = link.partition("#")
        target = REPO / path
        assert target.is_file(), link
        if anchor:
            assert anchor in _anchors(target), link


def test_no_install_from_an_address_nothing_shows_to_exist() -> None:
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        assert "git+https://github.com/tfgpu" not in text, page
        assert "uses: tfgpu/tfgpu@" not in text, page


def test_the_ci_snippet_installs_from_a_checkout_or_a_wheel_and_its_commands_parse() -> None:
    yaml = pytest.importorskip("yaml")
    from tests.unit.render.test_output_fits import check_parses

    (block,) = re.findall(r"```yaml\n(.*?)```", README, flags=re.S)
    job = yaml.safe_load(block)["jobs"]["gpu-preflight"]
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert runs[0] == 'python3 -m pip install "$TFGPU_FROM"'
    assert job["env"]["TFGPU_FROM"].startswith("./")
    for run in runs[1:]:
        check_parses(run.split(">")[0].strip())


def test_the_readme_example_is_what_the_doctor_prints(cli: Cli) -> None:
    example = README.split("```\n$ ", 1)[1].split("```", 1)[0]
    command, *shown = example.splitlines()
    argv = command.split()[1:]
    code, out, err = cli(*argv)
    assert code == 0, err
    printed = out.splitlines()
    for line in shown:
        if line != "...":
            assert line in printed, line


def test_the_generated_pages_are_up_to_date() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import gen_docs
    finally:
        sys.path.remove(str(REPO / "scripts"))
    for path, text in gen_docs.pages().items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is out of date: python3 scripts/gen_docs.py --force"


def test_mkdocs_lists_every_page_and_every_page_exists() -> None:
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in pages(item)]
        if isinstance(nav, dict):
            return [p for v in nav.values() for p in pages(v)]
        return []

    listed = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert listed == on_disk
    assert json.dumps(sorted(listed))  # every nav entry is a page of docs/
