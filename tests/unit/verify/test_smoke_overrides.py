"""`tfgpu smoke` under overrides (issue 29, item 8): the smoke test runs TensorFlow on this machine, so an
assumed driver (--driver, TFGPU_DRIVER_VERSION) or another machine's --facts never turns into a statement about
this machine ("An NVIDIA driver 441.22 is installed ... No NVIDIA driver is installed in this system")."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import TESTS
from tfgpu.judge.explain_catalog import load_catalog

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def this_machine_has_no_driver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The probe of this machine (no driver, no GPU), with overrides applied as tfgpu.facts.gather applies them;
    and TensorFlow the fake package, printing the real `libcuda.so.1` line of compat/explain.toml."""
    import tfgpu.facts.gather as gather

    def fake_gather(*, facts_file: Any = None, overrides: dict[str, str | None] | None = None,
                    env_overrides: bool = True, **_: Any) -> tuple[dict[str, Any], list[str]]:
        driver = None
        if env_overrides:
            driver = __import__("os").environ.get("TFGPU_DRIVER_VERSION") or None
        driver = (overrides or {}).get("driver") or driver
        if facts_file:
            driver = json.loads(Path(facts_file).read_text())["driver"]["version"]
        return {"schema": "tfgpu.facts/1", "driver": {"version": driver, "cuda": None}, "gpus": [],
                "cuda_toolkits": [], "cudnn": []}, []

    monkeypatch.setattr(gather, "gather_facts", fake_gather)
    sample = next(e.sample for e in load_catalog().entries if e.id == "dlopen.libcuda")
    log = tmp_path / "tf-stderr.log"
    log.write_text(sample + "\n")
    monkeypatch.setenv("PYTHONPATH", str(TESTS / "fake_tf"))
    monkeypatch.setenv("FAKE_TF_VERSION", "2.15.0")
    monkeypatch.setenv("FAKE_TF_GPUS", "0")
    monkeypatch.setenv("FAKE_TF_STDERR_FILE", str(log))


@pytest.mark.real_subprocess
@pytest.mark.usefixtures("this_machine_has_no_driver")
@pytest.mark.parametrize("assume", ["flag", "env", "facts"])
def test_an_assumed_driver_never_describes_this_machine(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        assume: str) -> None:
    args = ["smoke", "--python", sys.executable]
    if assume == "flag":
        args += ["--driver", "441.22"]
    elif assume == "env":
        monkeypatch.setenv("TFGPU_DRIVER_VERSION", "441.22")
    else:
        other = tmp_path / "other.json"
        other.write_text(json.dumps({"schema": "tfgpu.facts/1", "driver": {"version": "441.22"}, "gpus": []}))
        args += ["--facts", str(other)]
    code, out, err = cli(*args)
    assert code == 1, out + err
    said = out + err
    assert "no NVIDIA driver on this machine" in said or "No NVIDIA driver was found on this machine" in said, said
    for line in said.splitlines():
        if "441.22" in line:  # only the note that the assumption is not used
            assert "not used" in line, line
    code, out, _ = cli(*args, "--json")
    doc = json.loads(out)
    assert "441.22" not in json.dumps(doc)
