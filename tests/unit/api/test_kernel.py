"""examples/notebook.ipynb executed in a real Jupyter kernel (ipykernel, driven by nbclient): the doctor, explain
and smoke cells show HTML and plain text and raise nothing. The `%pip install` cell (tagged "install") is left
out: the kernel runs this interpreter, where tfgpu is installed already. Slow (a kernel starts): `nox -s slow`."""

from __future__ import annotations

import os
import re

import pytest

from tests import REPO

pytestmark = [pytest.mark.slow, pytest.mark.real_subprocess]

NOTEBOOK = REPO / "examples" / "notebook.ipynb"


def _outputs(cell):  # type: ignore[no-untyped-def]
    return [o for o in cell.get("outputs", []) if o.get("output_type") in ("execute_result", "display_data")]


def test_the_example_notebook_runs_in_a_real_kernel(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))  # the kernel inherits this environment
    monkeypatch.setenv("TFGPU_PROBE_NVML", os.environ.get("TFGPU_PROBE_NVML", "0"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    install = [c for c in nb.cells if "install" in c.metadata.get("tags", [])]
    assert len(install) == 1
    assert "%pip install" in install[0].source
    nb.cells = [c for c in nb.cells if c not in install]
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.get("output_type") == "error"]
    doctor, one_release, explain, smoke = code
    for cell in (doctor, explain, smoke):
        (shown,) = _outputs(cell)
        page, text = shown["data"]["text/html"], shown["data"]["text/plain"]
        assert page.startswith('<div class="tfgpu-report">')
        assert "<script" not in page
        assert "\x1b[" not in text
    assert "doctor · knowledge base" in _outputs(doctor)[0]["data"]["text/plain"]
    assert "Recommendation" in _outputs(doctor)[0]["data"]["text/plain"]
    # (report.ok, report.recommendation): a tuple of a bool and a dict, or None
    assert re.match(r"\((True|False),\s", _outputs(one_release)[0]["data"]["text/plain"])
    assert "cudnn.version_mismatch" in _outputs(explain)[0]["data"]["text/html"]
    assert "tfgpu smoke" in _outputs(smoke)[0]["data"]["text/html"]
