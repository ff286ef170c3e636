"""compat/verified.toml (recipes proven by `nox -s recipes`) and compat/pins.toml: canonical form,
cross-references against the other tables, the loader's refusals, and how `compat` / `doctor --tf` show it."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests import REPO
from tests.conftest import DATA, load_file_module
from tfgpu.core.errors import DataError
from tfgpu.kb import queries, records
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.parse import load_toml, verified_from_row
from tfgpu.kb.queries import dump_verified, load_pins, load_verified, verified_status
from tfgpu.kb.records import VERIFIED_PACKAGES
from tfgpu.kb.versions import series_of
from tfgpu.plan.envspec import pins_for

KB = load_kb()
ROWS = load_verified()
MX150 = str(DATA / "facts" / "mx150-laptop-ubuntu1804.json")


def _script() -> types.ModuleType:
    return load_file_module(REPO / "scripts" / "verify_recipes.py", "tfgpu_script_verify_recipes")


# --------------------------------------------------------------------------- canonical form


def test_verified_file_is_what_the_session_writes():
    """dump(load(text)) == text: the file is exactly what scripts/verify_recipes.py writes."""
    text = (REPO / "compat" / "verified.toml").read_text(encoding="utf-8")
    sources = {k: {kk: str(vv) for kk, vv in v.items()} for k, v in load_toml("verified")["sources"].items()}
    assert dump_verified(ROWS, sources) == text


def test_verified_rows_round_trip_through_the_loader():
    for row in ROWS:
        assert verified_from_row(row.to_row()) == row


# --------------------------------------------------------------------------- cross-references


def test_every_linux_series_has_a_verified_row_and_the_headline_release_too():
    tried = {series_of(r.tf) for r in ROWS}
    missing = [s for s in KB.series("linux") if KB.gpu_versions_in(s, "linux") and s not in tried]
    assert not missing, f"series never run by `nox -s recipes`: {missing}"
    assert any(str(r.tf) == "2.2.0" for r in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.tf}-{r.recipe}")
def test_verified_row_names_a_known_release_recipe_and_python(row: records.Verified):
    assert KB.gpu_release(row.tf, "linux") is not None, f"{row.tf} is not a GPU release on Linux"
    recipe = next((r for r in KB.recipes if r.id == row.recipe), None)
    assert recipe is not None, f"recipe {row.recipe} is not in compat/recipes.toml"
    assert recipe.applies(row.tf, "linux")
    assert recipe.backend == "pip" or (row.result == "skipped" and "conda" in row.reason)
    if row.result != "skipped":
        assert row.python in KB.pythons_for(row.tf, "linux"), f"no {row.python} wheel for {row.tf}"
    else:
        assert row.reason


@pytest.mark.parametrize("row", [r for r in ROWS if r.result != "skipped"], ids=lambda r: str(r.tf))
def test_verified_row_installed_the_pins_tfgpu_plans_today(row: records.Verified):
    """A row proves today's pins only if the install used them: re-run `nox -s recipes` after a pin changes."""
    assert row.pins.split() == [p.requirement for p in pins_for(row.tf)]
    versions = dict(row.versions)
    for pin in pins_for(row.tf):
        req = Requirement(pin.requirement)
        got = versions.get(req.name.replace("-", "_"), "")
        if got:
            assert req.specifier.contains(got, prereleases=True), f"{row.tf}: {req.name} {got} breaks {pin.requirement}"


def test_the_seed_release_imports_with_the_numpy_it_pins():
    """The headline bug: 2.2.0 resolved numpy 1.24 (np.object removed) and `import tensorflow` failed."""
    row = next(r for r in ROWS if str(r.tf) == "2.2.0")
    assert row.result == "ok", row.reason
    assert Version(dict(row.versions)["numpy"]) < Version("1.19")
    assert "numpy<1.19" in row.pins.split()


def test_every_pin_selects_a_release_and_parses():
    releases = [r.version for r in KB.gpu_releases("linux")]
    for pin in load_pins():
        assert any(v in pin.tf for v in releases), pin
        assert Requirement(pin.requirement).specifier, pin


def test_numpy_pins_never_contradict_each_other():
    """One numpy ceiling per release: two numpy pins on one release would be noise in every plan."""
    for rel in KB.gpu_releases("linux"):
        numpy = [p for p in pins_for(rel.version) if Requirement(p.requirement).name == "numpy"]
        assert len(numpy) <= 1, (rel.version, numpy)


# --------------------------------------------------------------------------- the loader refuses bad rows

GOOD = {"tf": "2.2.0", "recipe": "pip-system-cuda", "python": "3.8", "date": "2026-11-22", "result": "ok",
        "reason": "", "numpy": "1.18.5", "protobuf": "3.19.6", "keras": "", "h5py": "2.10.0",
        "typing_extensions": "", "cuda_libs": "", "pins": "numpy<1.19", "source": "tfgpu-recipes"}


@pytest.mark.parametrize(("change", "message"), [
    ({"result": "maybe"}, "result"),
    ({"result": "failed", "reason": ""}, "needs a reason"),
    ({"date": "22/11/2026"}, "YYYY-MM-DD"),
    ({"python": "3"}, "X.Y"),
    ({"colour": "red"}, "unknown key"),
    ({"tf": "two"}, "not a version"),
])
def test_a_bad_verified_row_is_refused(change: dict[str, str], message: str):
    with pytest.raises(DataError, match=message):
        verified_from_row({**GOOD, **change})


def test_verified_status_says_which_recipes_were_proven(monkeypatch: pytest.MonkeyPatch):
    rows = (verified_from_row(GOOD), verified_from_row({**GOOD, "tf": "2.3.1", "result": "failed",
                                                         "reason": "import tensorflow failed"}))
    monkeypatch.setattr(queries, "load_verified", lambda: rows)
    ok = verified_status("2.2.0", "pip-system-cuda", "pip")
    assert ok["status"] == "verified"
    assert ok["text"] == "install verified 2026-11-22 (TF 2.2.0, Python 3.8)"
    assert ok["versions"]["numpy"] == "1.18.5"
    # another patch of a verified series: the series' install answers, naming its release
    assert verified_status("2.2.3", "pip-system-cuda", "pip")["tf"] == "2.2.0"
    failed = verified_status("2.3.0", "pip-system-cuda", "pip")
    assert failed["status"] == "failed"
    assert "import tensorflow failed" in failed["text"]
    assert verified_status("2.4.0", "pip-system-cuda", "pip")["text"] == "not verified here"
    assert verified_status("2.2.0", "conda-anaconda-tensorflow-gpu", "conda")["status"] == "cannot verify"
    container = verified_status("2.2.0", "tensorflow/tensorflow:2.2.0-gpu", "container")
    assert container["status"] == "not verified"
    assert "conda" not in container["text"]


# --------------------------------------------------------------------------- display


def test_compat_json_shows_each_recipes_verified_status(cli: Any):
    code, out, _ = cli("compat", "--tf", "2.2", "--os", "linux", "--json")
    assert code == 0
    installs = {i["id"]: i for row in json.loads(out)["rows"] for i in row["install"]}
    assert installs["pip-system-cuda"]["verified"]["status"] == "verified"
    assert installs["conda-anaconda-tensorflow-gpu"]["verified"]["status"] == "cannot verify"


def test_compat_human_says_install_verified_or_why_not(cli: Any):
    code, out, _ = cli("compat", "--tf", "2.2", "--os", "linux")
    assert code == 0
    assert "install verified" in out
    assert "conda recipes cannot be verified" in out


def test_doctor_for_a_release_says_whether_its_recipes_were_proven(cli: Any):
    _, out, _ = cli("doctor", "--facts", MX150, "--tf", "2.2.0", "--json")
    target = json.loads(out)["targets"][0]
    by_recipe = {b["recipe"]: b["verified"] for b in target["backends"]}
    assert by_recipe["pip-system-cuda"]["status"] == "verified"
    assert all(v["status"] == "cannot verify" for r, v in by_recipe.items() if r.startswith("conda"))
    _, human, _ = cli("doctor", "--facts", MX150, "--tf", "2.2.0", "--verbose")  # a detail (issue 29, item 7)
    assert "recipe pip-system-cuda (pip): install verified" in human


def test_doctor_without_tf_does_not_read_the_verified_table(cli: Any, monkeypatch: pytest.MonkeyPatch):
    """The full doctor stays fast: verified status is a `doctor --tf` detail."""
    def boom() -> tuple[records.Verified, ...]:
        raise AssertionError("read verified.toml")

    monkeypatch.setattr(queries, "load_verified", boom)
    _, out, _ = cli("doctor", "--facts", MX150, "--json")
    assert all("verified" not in t for t in json.loads(out)["targets"])


# --------------------------------------------------------------------------- the session's pure parts


@pytest.mark.parametrize("path", sorted((DATA / "recipes").glob("probe-*.json")), ids=lambda p: p.stem)
def test_library_summary_of_recorded_probes(path: Path):
    """Recorded probe outputs (tests/data/recipes/SOURCES.md): a recipe that brings CUDA passes only when
    every library loaded, libraries that need the driver's libcuda aside."""
    probe = json.loads(path.read_text(encoding="utf-8"))
    ok, text = _script().summarise_libs(probe, provides_cuda=bool(probe.get("nvidia_wheel_libs")), build_cuda="")
    wheel = probe.get("nvidia_wheel_libs") or []
    really_bad = [w for w in wheel if w.get("error") and "libcuda.so.1" not in w["error"]]
    assert ok == (not really_bad and all(e.get("loaded") for e in probe.get("build_info_libs") or []))
    if wheel:
        assert f"/{len(wheel)} nvidia-wheel libraries loaded" in text


def test_library_summary_of_a_system_cuda_recipe_says_it_was_not_checked():
    ok, text = _script().summarise_libs({"build_info_libs": [], "libcuda": "not found"}, provides_cuda=False,
                                        build_cuda="10.1")
    assert ok
    assert text.startswith("recipe uses the system CUDA 10.1")


def test_the_session_table_lists_every_row_and_its_reason():
    rows = [dict(GOOD), {**GOOD, "tf": "1.0.1", "result": "skipped", "reason": "no wheel"}]
    table = _script().render_table(rows)
    assert "2.2.0" in table
    assert "skipped: no wheel" in table
    assert all(k in table.splitlines()[0] for k in ("numpy", "protobuf", "keras", "h5py"))


def test_verified_packages_are_columns_of_the_table():
    assert set(VERIFIED_PACKAGES) <= set(GOOD)
