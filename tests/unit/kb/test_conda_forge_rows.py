"""compat/conda.toml's conda-forge rows: generated from the feedstock's main history, guarded here.

Pure tests of scripts/update_conda_forge.py (its CI-file reader against recorded feedstock files, its
history walk on plain values), the table's canonical form and cross-references, and the facts the
main history settles (issue 14, section 4)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.unit.kb.test_tables import COMPAT, _load_script, needs_tomllib
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.parse import load_toml
from tfgpu.kb.versions import normalize_cuda, version

CF = DATA / "conda-forge"
SCRIPT = _load_script("update_conda_forge")


def _cf_rows() -> list[dict[str, str]]:
    return [r for r in load_toml("conda")["packages"] if r["channel"] == "conda-forge"]


def _variants(v: str) -> set[str]:
    return {r["cuda"] for r in _cf_rows() if r["version"] == v}


# --------------------------------------------------------------------------- the CI-file reader


def test_megabuild_ci_file_lists_four_pythons_for_one_cuda() -> None:
    ci = SCRIPT.read_ci_yaml((CF / "ci_support-2cc3b12-linux_64_cuda_compiler_version12.8microarch_level1.yaml").read_text())
    assert sorted(SCRIPT.variants(ci)) == [("12.8", "9", p) for p in ("3.10", "3.11", "3.12", "3.13")]
    assert ci["zip_keys"] == ["c_compiler_version,cxx_compiler_version,c_stdlib_version,cuda_compiler_version"]


def test_one_python_per_file_layout() -> None:
    ci = SCRIPT.read_ci_yaml((CF / "ci_support-96c00ed-linux_64_cuda11.8-python3.10.yaml").read_text())
    assert SCRIPT.variants(ci) == [("11.8", "8", "3.10")]


def test_cpu_variant_is_not_a_cuda_build() -> None:
    ci = SCRIPT.read_ci_yaml((CF / "ci_support-31f9691-linux_64_cpu-python3.7.yaml").read_text())
    assert ci["cuda_compiler_version"] == ["None"]
    assert SCRIPT.variants(ci) == []


def test_recipe_version_and_build_number() -> None:
    assert SCRIPT.read_recipe('{% set version = "2.19.1" %}\n{% set build = 3 %}\n  number: {{ build }}\n') == ("2.19.1", 3)
    assert SCRIPT.read_recipe('{% set version = "2.13.1" %}\nbuild:\n  number: 1\n') == ("2.13.1", 1)
    assert SCRIPT.read_recipe("package: {}\n") == (None, None)
    assert SCRIPT.python_of("3.7.* *_73_pypy") is None


# --------------------------------------------------------------------------- the history walk (plain values)


def _snap(commit: str, v: str, build: int, cudas: list[str], pys: tuple[str, ...] = ("3.11",)) -> object:
    return SCRIPT.Snapshot(commit * 40, "2025-01-01", v, build, {(c, "9", p) for c in cudas for p in pys})


def test_a_variant_swapped_and_reverted_says_so() -> None:
    """2.19.1 on main: 12.8 (df7febe) -> 12.9 (393c877) -> 12.8 again (2cc3b12)."""
    rows = SCRIPT.build_rows([_snap("a", "2.19.1", 0, ["12.8"]), _snap("b", "2.19.1", 2, ["12.9"]),
                              _snap("c", "2.19.1", 3, ["12.8"], ("3.11", "3.12"))])
    r128, r129 = rows
    assert (r128.cuda, r128.dropped, sorted(r128.builds), sorted(r128.python)) == ("12.8", "", [0, 3], ["3.11", "3.12"])
    assert r129.dropped == "c" * 40
    assert "dropped at ccccccc (2025-01-01) for CUDA 12.8" in SCRIPT.render_row(r129)
    assert f'dropped = "{"c" * 40}"' in SCRIPT.render_row(r129)
    assert "back at ccccccc (2025-01-01), replacing CUDA 12.9" in SCRIPT.render_row(r128)


def test_a_new_version_is_not_a_drop() -> None:
    rows = SCRIPT.build_rows([_snap("a", "2.13.1", 1, ["11.2", "11.8"]), _snap("b", "2.14.0", 0, ["11.8"])])
    assert [(r.version, r.cuda, r.dropped) for r in rows] == [("2.13.1", "11.2", ""), ("2.13.1", "11.8", ""),
                                                              ("2.14.0", "11.8", "")]
    assert all(r.commit for r in rows)


# --------------------------------------------------------------------------- the table


def test_rows_are_in_the_generators_canonical_form() -> None:
    lines = [ln for ln in (COMPAT / "conda.toml").read_text(encoding="utf-8").splitlines()
             if ln.startswith(SCRIPT.ROW_PREFIX)]
    rows = _cf_rows()
    assert len(lines) == len(rows) > 0
    assert [SCRIPT.render_fields(r) for r in rows] == lines


def test_rows_cite_a_main_commit_and_name_their_variant() -> None:
    for r in _cf_rows():
        assert re.fullmatch(r"[0-9a-f]{40}", r["commit"]), r
        assert r["commit"][:7] in r["note"], r
        assert r["build"] == f"cuda{r['cuda'].replace('.', '')}*", r
        assert all(b.isdigit() for b in r["builds"].split(",")), r
        pys = r["python"].split(",")
        assert pys == sorted(pys, key=lambda p: tuple(map(int, p.split(".")))), r
        if "dropped" in r:
            assert re.fullmatch(r"[0-9a-f]{40}", r["dropped"]), r
            assert r["dropped"][:7] in r["note"], r


def test_every_variant_is_a_cuda_the_cuda_table_knows() -> None:
    kb = load_kb()
    for r in _cf_rows():
        assert kb.toolkit(r["cuda"]) is not None, r


def test_every_variant_has_the_gpu_code_of_its_build_family() -> None:
    """compat/tf_archs.toml's conda-forge rows (read from build.sh) cover every (version, CUDA) here."""
    kb = load_kb()
    for r in _cf_rows():
        a = kb.archs_for(r["version"], "linux", build="conda-forge", cuda=r["cuda"])
        assert a is not None, r
        assert a.build == "conda-forge", r


def test_what_main_history_settles() -> None:
    """issue 14 section 4: the facts the PR-branch reading had wrong."""
    assert _variants("2.14.0") == {"11.8"}  # no CUDA 11.2 build (f0f57d5)
    assert _variants("2.13.1") == {"11.2", "11.8"}  # 96c00ed
    assert "12.8" in _variants("2.18.0")  # 1d65c30
    for v in ("2.12.0", "2.13.0", "2.19.0"):  # lived on PR branches only
        assert _variants(v) == set()
    r129 = next(r for r in _cf_rows() if (r["version"], r["cuda"]) == ("2.19.1", "12.9"))
    assert r129["dropped"].startswith("2cc3b12")  # the 12.9 variant was reverted to 12.8
    assert next(r["python"] for r in _cf_rows() if (r["version"], r["cuda"]) == ("2.14.0", "11.8")) == "3.9,3.10,3.11"


def test_newest_variant_first_for_the_verdicts() -> None:
    builds = load_kb().conda_forge_tf_builds()
    keys = [(p.version, version(normalize_cuda(p.cuda))) for p in builds]
    assert keys == sorted(keys, reverse=True)


# --------------------------------------------------------------------------- the script end to end


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2025-11-03T00:00:00",
                        "GIT_COMMITTER_DATE": "2025-11-03T00:00:00", "PATH": "/usr/bin:/bin"})


@needs_tomllib
@pytest.mark.real_subprocess
def test_script_reads_first_parent_history_only(tmp_path: Path) -> None:
    """A feedstock whose PR branch passed through 2.19.0 before main merged 2.19.1: no 2.19.0 row; the
    diff mode leaves the file alone, --force writes it, and a second run finds it up to date."""
    repo = tmp_path / "feedstock"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    ci = (CF / "ci_support-2cc3b12-linux_64_cuda_compiler_version12.8microarch_level1.yaml").read_text()

    def commit(v: str, build: int, cuda_text: str, message: str) -> None:
        (repo / "recipe").mkdir(exist_ok=True)
        (repo / ".ci_support").mkdir(exist_ok=True)
        (repo / "recipe/meta.yaml").write_text(f'{{% set version = "{v}" %}}\n{{% set build = {build} %}}\n')
        (repo / ".ci_support/linux_64_cuda.yaml").write_text(cuda_text)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", message)

    commit("2.18.0", 2, ci, "2.18.0 on main")
    _git(repo, "checkout", "-q", "-b", "pr")
    commit("2.19.0", 0, ci.replace("'12.8'", "'12.6'"), "updated v2.19.0 (PR branch)")
    commit("2.19.1", 0, ci, "Update for 2.19.1 (PR branch)")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-ff", "pr", "-m", "Merge pull request")
    table = tmp_path / "conda.toml"
    table.write_text(f'packages = [\n{SCRIPT.ROW_PREFIX} version = "0" }},\n]\n')
    assert SCRIPT.main(["--git-dir", str(repo), "--file", str(table)]) == 1
    assert SCRIPT.main(["--git-dir", str(repo), "--file", str(table), "--force"]) == 0
    assert SCRIPT.main(["--git-dir", str(repo), "--file", str(table)]) == 0
    text = table.read_text()
    assert [m.group(1) for m in re.finditer(r'version = "([^"]+)"', text)] == ["2.18.0", "2.19.1"]
    assert 'python = "3.10,3.11,3.12,3.13", cuda = "12.8", cudnn = "9"' in text


def test_script_without_a_feedstock_skips(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("TFGPU_CF_FEEDSTOCK", raising=False)
    assert SCRIPT.main(["--force"]) == 0
    assert "skipped" in capsys.readouterr().out


# --------------------------------------------------------------------------- Anaconda's feedstock


def test_anaconda_variant_config_on_linux() -> None:
    cbc = (CF / "anaconda-920f0c4-conda_build_config.yaml").read_text()
    assert SCRIPT._linux_values(cbc, "cuda_compiler_version") == ["None", "12.8"]
    assert SCRIPT._linux_values(cbc, "skip_cuda_pbp") == ["false"]


def test_anaconda_pythons_from_skip_selectors() -> None:
    # AnacondaRecipes/tensorflow-feedstock 920f0c4 recipe/meta.yaml lines 61-64
    meta = ("  skip: true  # [python_impl == 'pypy']\n"
            "  skip: true  # [py<310 or py>313]\n"
            "  skip: true  # [skip_cuda_pbp and (gpu_variant or \"\").startswith('cuda')]\n")
    assert SCRIPT.pythons_from_skips(meta) == ["3.10", "3.11", "3.12", "3.13"]
    assert SCRIPT.pythons_from_skips("  skip: true  # [py<39 or py>312]\n") == ["3.9", "3.10", "3.11", "3.12"]
    assert SCRIPT.pythons_from_skips("      skip: true  # [py<310]\n")[0] == "3.6"  # an output's skip: not the recipe's


def test_anaconda_rows_cite_their_commit_and_the_pipeline_flag() -> None:
    rows = [r for r in load_toml("conda")["packages"] if (r["channel"], r["name"]) == ("anaconda", "tensorflow")]
    assert {(r["version"], r["cuda"]) for r in rows} >= {("2.20.0", "12.8"), ("2.21.0", "12.9"), ("2.21.0", "13.0")}
    for r in rows:
        assert re.fullmatch(r"[0-9a-f]{40}", r["commit"]), r
        assert r["confidence"] == "recipe", r
        assert SCRIPT.render_fields(r) in (COMPAT / "conda.toml").read_text(encoding="utf-8")
    r220 = next(r for r in rows if r["version"] == "2.20.0")
    assert "skip_cuda_pbp true at 17af7c3..647150f" in r220["note"]
    assert "skip_cuda_pbp false from 920f0c4" in r220["note"]


def test_caveat_runs() -> None:
    text = SCRIPT._caveat_text([("skip_cuda_pbp true", "a" * 40), ("skip_cuda_pbp true", "b" * 40),
                                ("skip_cuda_pbp false", "c" * 40)])
    assert text[0].startswith("skip_cuda_pbp true at aaaaaaa..bbbbbbb (")
    assert text[1].startswith("skip_cuda_pbp false from ccccccc (")


def test_anacondas_build_of_a_release_does_not_make_conda_forge_have_it() -> None:
    """Anaconda's recipe declares a CUDA 12.8 build of 2.20.0; conda-forge's main never had 2.20: the
    conda-forge recipe is not available for it (an RTX 50 machine was told 2.20.0 via conda-forge)."""
    from tfgpu.judge.system import recipe_available

    kb = load_kb()
    forge = next(r for r in kb.recipes if r.id == "conda-forge-tensorflow-cuda")
    assert any(p.channel == "anaconda" for p in kb.conda_packages(name="tensorflow", v="2.20.0", os="linux"))
    assert not recipe_available(kb, forge, version("2.20.0"), "linux")
    assert recipe_available(kb, forge, version("2.19.1"), "linux")


def test_compat_json_names_the_feedstock_commits_and_the_reverted_variant() -> None:
    from tfgpu.tools.compat import _conda_forge_builds

    builds = {b["cuda"]: b for b in _conda_forge_builds(load_kb(), [version("2.19.1")])}
    assert builds["12.9"]["dropped_at"].endswith("/commit/2cc3b129b716df332eca23d6169be93bf05fabd6")
    assert builds["12.8"]["dropped_at"] is None
    assert builds["12.8"]["feedstock_commit"].endswith("/commit/df7febeca6d70dfef16a997a10d41df2b69c2b08")
    assert builds["12.8"]["python"] == ["3.10", "3.11", "3.12", "3.13"]
