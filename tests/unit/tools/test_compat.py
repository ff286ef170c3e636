"""`tfgpu compat`: filters, the human table and detail view, the JSON document and its schema, bad input."""

from __future__ import annotations

import json
from importlib.resources import files

import pytest
from packaging.version import Version

from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.versions import normalize_cuda, series_of
from tfgpu.tools.compat import Query, compat_document, exit_code

jsonschema = pytest.importorskip("jsonschema")




@pytest.fixture(scope="module")
def validator():
    schema = json.loads((files("tfgpu") / "core" / "schemas" / "compat.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _json(cli, *args: str) -> tuple[int, dict]:
    code, out, err = cli("compat", *args, "--json")
    assert err == "", err
    return code, json.loads(out)


# --------------------------------------------------------------------------- the acceptance example


def test_tf_2_2_0_shows_python_cuda_cudnn_driver_and_recipes_with_sources(cli):
    kb = load_kb()
    code, out, err = cli("compat", "--tf", "2.2.0")
    assert code == 0, err
    assert f"knowledge base {kb.data_version} ({kb.date})" in out
    linux = out.split("TensorFlow 2.2.0 · Linux")[1].split("TensorFlow 2.2.0 · native Windows")[0]
    assert "Python      3.5–3.8" in linux
    assert "CUDA        10.1   cuDNN 7.6" in linux
    assert "minimum driver 418.39 (Linux)" in linux  # NVIDIA table 3: CUDA 10.1 GA >= 418.39
    assert kb.toolkit("10.1").min_driver_text("linux") == "418.39"
    recipes = {r.id: r for r in kb.recipes_for("2.2.0", "linux") if r.gpu}
    assert {r.backend for r in recipes.values()} >= {"conda", "pip"}
    urls = kb.sources("recipes")
    for rid, recipe in recipes.items():
        assert rid in linux
        assert urls[recipe.source]["url"] in linux
    assert "tensorflow-gpu=2.2.0" in linux
    assert "tensorflow==2.2.0" in linux
    assert "Releases    2.2.0 (" in linux
    assert "2.2.1" not in linux
    assert "minimum driver 418.96 (Windows)" in out


def test_a_series_names_its_exact_releases(cli):
    kb = load_kb()
    code, doc = _json(cli, "--tf", "2.2", "--os", "linux")
    assert code == 0
    (row,) = doc["rows"]
    expected = sorted((str(r.version) for r in kb.gpu_releases("linux") if series_of(r.version) == "2.2"),
                      key=Version, reverse=True)
    assert [r["version"] for r in row["releases"]] == expected
    assert len(expected) > 1
    code, out, _ = cli("compat", "--tf", "2.2", "--os", "linux")
    assert all(v in out for v in expected)


def test_a_major_selects_every_series_of_it(cli):
    code, doc = _json(cli, "--tf", "1", "--os", "linux")
    assert code == 0
    assert {r["series"].split(".")[0] for r in doc["rows"]} == {"1"}
    assert len(doc["rows"]) == len([s for s in load_kb().series("linux") if s.startswith("1.")])


# --------------------------------------------------------------------------- JSON


@pytest.mark.parametrize("args", [
    (), ("--tf", "2.2.0"), ("--driver", "470.82"), ("--os", "macos"), ("--python", "3.12"), ("--cuda", "11.2"),
    ("--tf", "2.16"), ("--os", "windows", "--driver", "452.39"),
])
def test_json_document_matches_its_schema(cli, validator, args):
    code, doc = _json(cli, *args)
    assert code in (0, 1)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, [(list(e.absolute_path), e.message[:200]) for e in errors[:5]]
    assert doc["schema"] == "tfgpu.compat/1"
    assert doc["data_version"] == load_kb().data_version


def test_full_table_is_every_build_row_newest_first(cli):
    kb = load_kb()
    code, doc = _json(cli)
    assert code == 0
    assert len(doc["rows"]) == len(kb.builds)
    versions = [Version(r["tf_version"]) for r in doc["rows"]]
    assert versions == sorted(versions, reverse=True)
    for row in doc["rows"]:
        assert row["sources"], row["tf_version"]
        if row["os"] != "macos":
            assert row["compute_capabilities"]["sass"]
            t = kb.toolkit(row["cuda"])
            assert row["min_driver"] == t.min_driver_text(row["os"])
            if Version(row["tf_version"]) >= Version("1.5"):  # compat/recipes.toml starts at 1.5
                assert row["install"], f"{row['tf_version']} {row['os']}: no recipe"
            for rec in row["install"]:
                assert "{tf}" not in rec["packages"]
                assert "{python}" not in rec["packages"]
        assert Version(row["python_min"]) <= Version(row["python_max"])


def test_human_table_prints_data_version_and_every_series(cli):
    kb = load_kb()
    code, out, _ = cli("compat")
    assert code == 0
    assert kb.data_version in out
    assert kb.date in out
    for b in kb.builds:
        assert str(b.tf) in out


# --------------------------------------------------------------------------- filters


def test_python_filter_keeps_releases_with_a_wheel(cli):
    code, doc = _json(cli, "--python", "3.12")
    assert code == 0
    assert doc["rows"]
    for row in doc["rows"]:
        assert all("3.12" in r["pythons"] for r in row["releases"])
    kb = load_kb()
    with_wheel = {series_of(r.version) for r in kb.gpu_releases("linux") if "3.12" in r.linux_pythons}
    assert {r["series"] for r in doc["rows"] if r["os"] == "linux"} == with_wheel


def test_python_in_a_nominal_range_is_flagged(cli):
    _code, doc = _json(cli, "--python", "3.3", "--tf", "1.15", "--os", "linux")
    (row,) = doc["rows"]
    assert row["releases"] == []  # no cp33 wheel for 1.15
    assert any("nominal" in n["text"] for n in row["notes"])


def test_cuda_filter(cli):
    code, doc = _json(cli, "--cuda", "11.2")
    assert code == 0
    kb = load_kb()
    assert len(doc["rows"]) == len([b for b in kb.builds if normalize_cuda(b.cuda) == "11.2"])
    assert {r["cuda"] for r in doc["rows"]} == {"11.2"}
    code, doc = _json(cli, "--cuda", "10")  # the table writes CUDA 10.0 as "10"
    assert {r["cuda"] for r in doc["rows"]} == {"10.0"}


def test_no_match_exits_1_with_a_message(cli):
    code, out, _err = cli("compat", "--os", "windows", "--cuda", "12.3")
    assert code == 1
    assert "no TensorFlow GPU build matches" in out


def test_driver_says_which_releases_run_and_why_not_the_others(cli):
    kb = load_kb()
    code, doc = _json(cli, "--driver", "470.82", "--os", "linux")
    assert code == 0
    by_series = {r["series"]: r["driver"] for r in doc["rows"]}
    assert by_series["2.11"]["status"] == "pass"  # CUDA 11.2 needs 460.27.03
    assert by_series["2.14"]["status"] == "warn"  # CUDA 11.8 only through minor-version compatibility
    assert "minor-version compatibility" in by_series["2.14"]["reason"]
    fifteen = by_series["2.15"]
    assert fifteen["status"] == "fail"
    assert kb.toolkit("12.2").min_driver_text("linux") in fifteen["reason"]
    assert "2.15.0 (linux)" in doc["driver"]["does_not_run"]
    code, out, _ = cli("compat", "--driver", "470.82", "--os", "linux")
    assert "cannot run:" in out
    assert "why: needs CUDA 12.2, which needs driver >= 535.54.03" in out


def test_driver_that_runs_nothing_exits_1(cli):
    code, doc = _json(cli, "--driver", "300.1", "--os", "linux")
    assert code == 1
    assert {r["driver"]["status"] for r in doc["rows"]} == {"fail"}


def test_macos_rows_say_no_cuda_since_1_1(cli):
    code, doc = _json(cli, "--os", "macos")
    assert code == 0
    assert [r["tf_version"] for r in doc["rows"]] == ["1.1.0", "1.0.0"]
    for row in doc["rows"]:
        assert any("since 1.1" in n["text"] for n in row["notes"])
        assert row["min_driver"] is None
        assert row["install"] == []


# --------------------------------------------------------------------------- notes from the data


def test_2_16_1_and_2_16_2_notes(cli):
    _, doc = _json(cli, "--tf", "2.16.1", "--os", "linux")
    (row,) = doc["rows"]
    assert any(n["source"] == "https://github.com/tensorflow/tensorflow/issues/63362" for n in row["notes"])
    _, doc = _json(cli, "--tf", "2.16.2", "--os", "linux")
    (row,) = doc["rows"]
    assert [r["version"] for r in row["releases"]] == ["2.16.2"]
    assert not any(n["id"] == "pip-2.16.1-nvidia-libs" for n in row["notes"])
    assert any(n["id"] == "pip-2.16.2-nvidia-libs" for n in row["notes"])


def test_placeholder_and_windows_notes(cli):
    _, doc = _json(cli, "--tf", "2.12", "--os", "linux")
    assert any("placeholder" in n["text"] for n in doc["rows"][0]["notes"])
    assert doc["rows"][0]["dist"] == "tensorflow"
    _, doc = _json(cli, "--tf", "2.10", "--os", "windows")
    assert any("2.11" in n["text"] and "WSL2" in n["text"] for n in doc["rows"][0]["notes"])
    _, doc = _json(cli, "--tf", "2.0", "--os", "linux")
    assert doc["rows"][0]["dist"] == "tensorflow-gpu"  # the tensorflow 2.0.0 wheel is CPU-only


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(("args", "names"), [
    (("--tf", "9.9"), "closest known: 2.9"),
    (("--tf", "banana"), "--tf 2."),
    (("--tf", "2.16.0"), "closest known: 2.16.1"),
    (("--tf", "7"), "closest known: 1, 2"),
    (("--driver", "x"), "known floors"),
    (("--cuda", "99"), "closest known: 12.5"),
    (("--cuda", "abc"), "known: 8.0"),
    (("--python", "abc"), "known: 2.7"),
    (("--python", "3.99"), "closest known: 3.13"),
    (("--os", "bsd"), "linux, windows, macos"),
    (("--os", "windows", "--tf", "2.12"), "closest known: 2.10"),
    (("--os", "macos", "--tf", "2.2"), "no CUDA GPU build since 1.1"),
])
def test_bad_input_exits_2_with_one_line_naming_known_values(cli, args, names):
    code, out, err = cli("compat", *args)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("tfgpu: error: ")
    assert "Traceback" not in err
    assert names in err


# --------------------------------------------------------------------------- the query layer, without the CLI


def test_exit_code_rules():
    kb = load_kb()
    assert exit_code(compat_document(kb, Query(tf="2.2.0"))) == 0
    assert exit_code({"rows": []}) == 1


def test_wsl2_is_linux():
    kb = load_kb()
    doc = compat_document(kb, Query(os="wsl2", tf="2.15"))
    assert {r["os"] for r in doc["rows"]} == {"linux"}


def test_conda_forge_builds_carry_their_own_gpu_code(cli, validator):
    code, doc = _json(cli, "--tf", "2.19", "--os", "linux")
    assert code == 0
    validator.validate(doc)
    (row,) = doc["rows"]
    forge = row["conda_forge_builds"]
    assert forge, row
    newest = forge[0]
    assert newest["tf"] == "2.19.1"
    assert "12.0" in newest["sass"]  # tensorflow-feedstock 13015ae: sm_120 for RTX 50-series
    assert "12.0" in row["compute_capabilities"]["ptx_fails"]  # which the official wheels cannot run
    order = [(Version(b["tf"]), Version(b["cuda"])) for b in forge]
    assert order == sorted(order, reverse=True)  # newest release and CUDA variant first
