"""Pure parts of --from-lock and the config file: lock reading, plans from locks, config precedence, ToS notes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import TESTS
from tests.conftest import needs_engine
from tfgpu.backends import lockfiles
from tfgpu.backends.config import Config, load_config, parse_config
from tfgpu.backends.lockfiles import Lock, LockedPackage, detect_lock_kind, read_custom_metadata, read_lock
from tfgpu.core.errors import InputError, UsageError
from tfgpu.core.record import replace
from tfgpu.kb.knowledge import load_kb
from tfgpu.plan.channels import is_anaconda_channel
from tfgpu.plan.fromlock import plan_from_lock
from tfgpu.plan.planner import plan_environment
from tfgpu.plan.request import BuildRequest

KB = load_kb()
DATA = TESTS / "data" / "lock"
RECORDED = DATA / "conda-lock-4912053-install-with-pip-deps.yml"
HOME = "/home/u/.local/share/tfgpu"
FACTS: dict[str, Any] = {"schema": "tfgpu.facts/1", "platform": {"os": "linux", "wsl": None},
                         "python": {"interpreters": [{"version": "3.11.7", "path": "/usr/bin/python3.11"}]},
                         "gpus": [{"memory_mib": 2048}], "driver": {"version": "550.54.15", "cuda": "12.4"}}
TOOLS: dict[str, str | None] = {"uv": "/usr/bin/uv", "mamba": None, "micromamba": None, "conda": None}



# --------------------------------------------------------------------------- reading locks

@needs_engine
def test_a_real_conda_lock_with_pip_packages_plans_hashed_no_deps_installs() -> None:
    info = read_lock(RECORDED)
    assert info.kind == "conda"
    assert info.platforms == ("linux-64", "linux-aarch64")
    plan = plan_from_lock(KB, FACTS, info, BuildRequest(platform="linux-64", prefix="/envs/x"), engine_python="/py")
    assert plan.steps[0].argv == ("/py", "-m", "tfgpu.backends.rattler", "install-lock", "--prefix", "/envs/x", "--lock",
                                  str(RECORDED), "--platform", "linux-64")
    pip = plan.steps[1].argv
    assert pip[:6] == ("/envs/x/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-deps")
    req = next(a for a in pip if a.startswith("requests @ "))
    assert req.endswith("#sha256=58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f")
    assert plan.python == "3.12"
    assert "python=3.12.0=hab00c5b_0_cpython" in plan.conda_specs
    assert plan.env_vars == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}  # a 2 GB GPU in the facts
    assert any(s.kind == "write-file" and "activate.d" in (s.path or "") for s in plan.steps)


#: The recipe's pip part as `tfgpu lock` records it (uv pip compile --generate-hashes, create's pins included).
LOCKED_PIP_PART = ("tensorflow==2.11.1 --hash=sha256:" + "1" * 64 + " --hash=sha256:" + "2" * 64
                   + " numpy==1.26.4 --hash=sha256:" + "3" * 64)


@needs_engine
def test_custom_metadata_round_trips_through_our_writer_and_the_locked_pip_part_is_planned_hashed(tmp_path: Path) -> None:
    lock = replace(lockfiles.read_conda_lock(RECORDED), content_hash={"linux-64": "a" * 64, "linux-aarch64": "b" * 64},
                   custom_metadata={"tfgpu_tf": "2.11.1", "tfgpu_recipe_linux-64": "conda-forge-cudatoolkit-pip-2.11",
                                    "tfgpu_pip_linux-64": LOCKED_PIP_PART, "odd": "it's: 'quoted'"})
    path = lockfiles.write_lockfile(lock, tmp_path / "conda-lock.yml")
    text = path.read_text()
    assert read_custom_metadata(text) == lock.custom_metadata
    info = read_lock(path)
    plan = plan_from_lock(KB, FACTS, info, BuildRequest(platform="linux-64", prefix="/envs/x"))
    assert plan.tf == "2.11.1"
    assert plan.recipe_id == "conda-forge-cudatoolkit-pip-2.11"
    written = plan.steps[2]
    assert written.kind == "write-file"
    assert written.path == "/envs/x/conda-meta/tfgpu-pip-requirements.txt"
    assert written.content == ("tensorflow==2.11.1 --hash=sha256:" + "1" * 64 + " --hash=sha256:" + "2" * 64 + "\n"
                               "numpy==1.26.4 --hash=sha256:" + "3" * 64 + "\n")
    install = plan.steps[3].argv
    assert install[-4:] == ("--require-hashes", "--no-deps", "-r", written.path)
    assert "LD_LIBRARY_PATH" in plan.env_vars  # the recipe's activation
    assert "XLA_FLAGS" in plan.env_vars


@needs_engine
def test_an_unhashed_pip_part_is_refused_like_an_unhashed_pip_lock_line(tmp_path: Path) -> None:
    """Issue 28: every pip requirement a lock carries is pinned and hashed. What an older tfgpu recorded for a conda
    recipe's pip part (`tensorflow==2.11.*`, resolved at install time) is refused with the fix (lock it again:
    `tfgpu lock` now locks the pip part with hashes), never installed unverified."""
    lock = replace(lockfiles.read_conda_lock(RECORDED), content_hash={"linux-64": "a" * 64, "linux-aarch64": "b" * 64},
                   custom_metadata={"tfgpu_tf": "2.11.1", "tfgpu_pip_linux-64": "tensorflow==2.11.*"})
    path = lockfiles.write_lockfile(lock, tmp_path / "conda-lock.yml")
    with pytest.raises(InputError, match=r"pip part for linux-64: requirement .tensorflow==2\.11\.\*. is not pinned") as info:
        read_lock(path)
    assert "tfgpu lock" in (info.value.hint or "")


def test_custom_metadata_absent_or_empty() -> None:
    assert read_custom_metadata(RECORDED.read_text()) == {}
    assert read_custom_metadata("version: 1\nmetadata:\n  custom_metadata: {}\n  platforms: []\npackage: []\n") == {}


@pytest.mark.parametrize(("text", "kind"), [
    ("# comment\nversion: 1\nmetadata: {}\n", "conda"),
    ("tensorflow==2.20.0 \\\n    --hash=sha256:" + "a" * 64 + "\n", "pip"),
    ("just text\n", "conda"),  # the conda-lock reader refuses it in one line
    ("version: 6\nenvironments: {}\n", "conda"),  # pixi.lock
])
def test_lock_kind_comes_from_the_content(text: str, kind: str) -> None:
    assert detect_lock_kind(text) == kind


def test_pip_lock_plans_a_venv_and_require_hashes(tmp_path: Path) -> None:
    path = tmp_path / "requirements.lock.txt"
    path.write_text("# Locked by tfgpu (recipe pip-and-cuda) for linux-64, Python 3.11.\n"
                    "tensorflow[and-cuda]==2.16.1 \\\n    --hash=sha256:" + "a" * 64 + "\n    # via -r req.in\n"
                    "nvidia-cudnn-cu12==8.9.7.29 ; sys_platform == 'linux' \\\n    --hash=sha256:" + "b" * 64 + "\n")
    info = read_lock(path)
    assert (info.kind, info.python) == ("pip", "3.11")
    assert [(p.name, p.version) for p in info.packages] == [("tensorflow", "2.16.1"), ("nvidia-cudnn-cu12", "8.9.7.29")]
    plan = plan_from_lock(KB, FACTS, info, BuildRequest(platform=""), tools=TOOLS, home=HOME)
    assert plan.prefix == f"{HOME}/envs/tf2.16.1"
    assert plan.steps[0].argv == ("/usr/bin/uv", "venv", "--no-project", "--python", "/usr/bin/python3.11", plan.prefix)
    assert plan.steps[1].argv[-4:] == ("--require-hashes", "--no-deps", "-r", str(path))
    assert "LD_LIBRARY_PATH" in plan.env_vars  # 2.16 needs its nvidia/*/lib on LD_LIBRARY_PATH
    with pytest.raises(UsageError, match=r"needs Python 3\.11"):
        plan_from_lock(KB, dict(FACTS, python={}), info, BuildRequest(platform=""), tools={"uv": None})


H = " --hash=sha256:" + "c" * 64


@pytest.mark.parametrize(("line", "match"), [
    ("okpkg==1.0" + H + " --index-url http://evil.invalid/simple", "'--index-url'"),
    ("okpkg==1.0 evilpkg==6.6.6" + H, "not `name==version"),
    ("okpkg==1.0@file:///tmp/x" + H, "not pinned with =="),
    ("okpkg==${VERSION}" + H, "not pinned with =="),  # pip expands ${VAR} in requirements files
    ("okpkg>=1.0" + H, "not pinned with =="),
    ("okpkg==1.0.*" + H, "not pinned"),
    ("okpkg==1.0", "has no --hash"),
    ("./evil" + H, "not pinned"),
    ("okpkg==1.0 ; python_version >= 'x' or --" + H, "'--'"),
])
def test_every_pip_lock_line_is_a_pinned_hashed_requirement_and_nothing_else(tmp_path: Path, line: str, match: str) -> None:
    """Issue 28: a lock is read as pip reads it, and any line that is not `name==version` + `--hash` is refused."""
    path = tmp_path / "requirements.lock.txt"
    path.write_text("okfirst==2.0" + H + "\n" + line + "\n")
    with pytest.raises(InputError, match=match):
        read_lock(path)


@pytest.mark.parametrize("declaration", ["# -*- coding: latin-1 -*-", "#!/bin/sh\n# vim: fileencoding=utf-16", "# coding=cp1252"])
def test_a_lock_declaring_an_encoding_other_than_utf8_is_refused(tmp_path: Path, declaration: str) -> None:
    path = tmp_path / "requirements.lock.txt"
    path.write_text(declaration + "\nokpkg==1.0" + H + "\n")
    with pytest.raises(InputError, match="declares the encoding"):
        read_lock(path)
    path.write_text("# -*- coding: UTF8 -*-\nokpkg==1.0" + H + "\n")
    assert [p.name for p in read_lock(path).packages] == ["okpkg"]


@pytest.mark.parametrize("url", [
    "file:///srv/src/evil", "file:///srv/src/evil/", "file://localhost/srv/src/evil", "git+https://h.invalid/e.git",
    "https://h.invalid/evil.whl?x=1", "file://otherhost/share/evil.whl", "ftp://h.invalid/evil.whl",
    "https://h.invalid/evil.whl ; rm", "https://h.invalid/evil.whl\\..\\x"])
def test_a_locked_pip_url_is_an_archive_or_refused(url: str) -> None:
    from tfgpu.backends.lockfiles import locked_pip_requirement

    pkg = LockedPackage(name="certifi", version="1", manager="pip", platform="linux-64", url=url, sha256="d" * 64)
    with pytest.raises(InputError, match="not an http"):
        locked_pip_requirement(pkg, "l.yml")
    ok = replace(pkg, url="https://h.invalid/certifi-1-py3-none-any.whl#egg=certifi")
    assert locked_pip_requirement(ok, "l.yml") == "certifi @ https://h.invalid/certifi-1-py3-none-any.whl#sha256=" + "d" * 64


# --------------------------------------------------------------------------- the config file

def test_config_is_read_from_tfgpu_config(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('channels = ["conda-forge", "https://example.invalid/m"]\n[backends]\nprefer = "pip"\n')
    cfg = load_config({"TFGPU_CONFIG": str(path)})
    assert cfg == Config(path=path, channels=("conda-forge", "https://example.invalid/m"), prefer="pip")
    assert load_config({"XDG_CONFIG_HOME": str(tmp_path / "none")}) == Config()


@pytest.mark.parametrize(("text", "match"), [
    ("channel = ['conda-forge']\n", "unknown key"),
    ("channels = 'conda-forge'\n", "list of channel"),
    ("channels = ['']\n", "list of channel"),
    ("[backends]\nprefer = 'poetry'\n", "not a backend"),
    ("[backends]\nprefered = 'pip'\n", "unknown key"),
    ("channels = [\n", "cannot be read"),
])
def test_bad_config_is_a_one_line_input_error(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=match) as info:
        load_config({"TFGPU_CONFIG": str(path)})
    assert str(path) in info.value.one_line()
    assert "\n" not in info.value.one_line()


def test_missing_tfgpu_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_config({"TFGPU_CONFIG": str(tmp_path / "nope.toml")})
    assert parse_config({}, tmp_path / "x") == Config(path=tmp_path / "x")


def test_preferred_backend_is_tried_first_and_falls_back_with_a_note() -> None:
    auto = plan_environment(KB, FACTS, BuildRequest(tf="2.16.1"), tools=TOOLS, home=HOME)
    assert auto.backend == "pip"
    pref = plan_environment(KB, FACTS, BuildRequest(tf="2.16.1", prefer="rattler", prefer_source="config /c.toml"), tools=TOOLS, home=HOME, engine_python="/py")
    assert pref.backend == "rattler"
    assert pref.backend_reason.startswith("config /c.toml prefers rattler: ")
    # TF 2.2 has no pip recipe that brings CUDA and no Python 3.8 here: the preference cannot apply
    fallback = plan_environment(KB, FACTS, BuildRequest(tf="2.2.0", prefer="pip", prefer_source="config /c.toml"), tools=TOOLS, home=HOME, engine_python="/py")
    assert fallback.backend == "rattler"
    assert any(n.startswith("config /c.toml prefers backend pip, which cannot build") for n in fallback.notes)


def test_config_channels_replace_the_recipes_with_a_note_naming_the_file() -> None:
    plan = plan_environment(KB, FACTS, BuildRequest(tf="2.2.0", backend="rattler", channels=("conda-forge",), channels_source="config /c.toml"), tools=TOOLS, home=HOME, engine_python="/py")
    argv = plan.steps[0].argv
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--channel"] == ["conda-forge"]
    assert "channels from config /c.toml: conda-forge (recipe: defaults)" in plan.notes
    assert not any("Anaconda's channels are covered" in n for n in plan.notes)
    pip_plan = plan_environment(KB, FACTS, BuildRequest(tf="2.16.1", channels=("conda-forge",), channels_source="config /c.toml"), tools=TOOLS, home=HOME)
    assert not any("channels" in n for n in pip_plan.notes)  # config channels do not concern pip plans


# --------------------------------------------------------------------------- Anaconda's terms of service

@pytest.mark.parametrize(("channel", "anaconda"), [
    ("defaults", True), ("anaconda", True), ("https://repo.anaconda.com/pkgs/main", True),
    ("https://conda.anaconda.org/anaconda", True), ("conda-forge", False),
    ("https://conda.anaconda.org/conda-forge", False), ("file:///tmp/ch", False), ("nvidia", False),
])
def test_anaconda_channels_are_recognised(channel: str, anaconda: bool) -> None:
    assert is_anaconda_channel(channel, KB) is anaconda


def test_defaults_recipe_plan_notes_the_terms_and_the_conda_forge_alternative() -> None:
    p22 = plan_environment(KB, FACTS, BuildRequest(tf="2.2.0", backend="rattler"), tools=TOOLS, home=HOME, engine_python="/py")
    (tos,) = [n for n in p22.notes if "Terms of Service" in n and n.startswith("defaults:")]
    assert "200 or more people" in tos
    assert "https://anaconda.com/pricing/terms-of-service-faqs" in p22.sources
    assert "no conda-forge alternative for TensorFlow 2.2.0" in tos
    # a conda-forge recipe pointed at `defaults` by --channel: the alternative is the recipe's own channel
    p218 = plan_environment(KB, FACTS, BuildRequest(tf="2.18.0", backend="rattler", channels=("defaults",)), tools=TOOLS, home=HOME, engine_python="/py")
    (tos,) = [n for n in p218.notes if "Terms of Service" in n]
    assert "itself uses conda-forge" in tos
    p218cf = plan_environment(KB, FACTS, BuildRequest(tf="2.18.0", backend="rattler"), tools=TOOLS, home=HOME, engine_python="/py")
    assert not any("Anaconda's channels are covered" in n for n in p218cf.notes)


def test_lock_from_anaconda_urls_gets_the_note() -> None:
    pkgs = (LockedPackage("tensorflow-gpu", "2.2.0", "conda", "linux-64", build="h0d30ee6_0", sha256="0" * 64,
                          url="https://repo.anaconda.com/pkgs/main/linux-64/tensorflow-gpu-2.2.0-h0d30ee6_0.conda"),
            LockedPackage("python", "3.8.10", "conda", "linux-64", build="h12debd9_8", sha256="1" * 64,
                          url="https://repo.anaconda.com/pkgs/main/linux-64/python-3.8.10-h12debd9_8.conda"))
    info = Lock(path="/l.yml", kind="conda", platforms=("linux-64",), packages=pkgs,
                    channels=("https://repo.anaconda.com/pkgs/main",))
    plan = plan_from_lock(KB, FACTS, info, BuildRequest(platform="linux-64"), home=HOME)
    assert (plan.tf, plan.python, plan.prefix) == ("2.2.0", "3.8", f"{HOME}/envs/tf2.2.0")
    assert any("Terms of Service" in n for n in plan.notes)


@needs_engine
def test_from_lock_plans_match_the_plan_schema(tmp_path: Path) -> None:
    import json
    from importlib import resources

    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("tfgpu").joinpath("core/schemas/plan.schema.json").read_text(encoding="utf-8"))
    pip_lock = tmp_path / "r.txt"
    pip_lock.write_text("tensorflow==2.20.0 --hash=sha256:" + "a" * 64 + "\n")
    plans = [plan_from_lock(KB, FACTS, read_lock(RECORDED), BuildRequest(platform="linux-aarch64"), home=HOME),
             plan_from_lock(KB, FACTS, read_lock(pip_lock), BuildRequest(platform=""), tools=TOOLS, home=HOME)]
    for plan in plans:
        jsonschema.Draft202012Validator(schema).validate(plan.to_json())
    assert plans[0].name == "conda-lock-4912053-install-with-pip-deps"  # no TensorFlow in it: named after the file
    assert plans[0].tf == "unknown"
    assert (plans[1].tf, plans[1].backend, plans[1].tool) == ("2.20.0", "pip", "uv")
