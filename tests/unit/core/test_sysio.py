"""tfgpu.core.sysio: the per-user directories agree with platformdirs (which tfgpu does not import on Linux)."""

from __future__ import annotations

import sys

import platformdirs
import pytest

from tfgpu.core.sysio import user_dir

FINDERS = {"cache": platformdirs.user_cache_dir, "config": platformdirs.user_config_dir,
           "data": platformdirs.user_data_dir}


@pytest.mark.parametrize("kind", sorted(FINDERS))
@pytest.mark.parametrize("xdg", [None, "/srv/xdg-{kind}", "   ", ""])
def test_user_dirs_are_platformdirs_answers(kind: str, xdg: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    var = {"cache": "XDG_CACHE_HOME", "config": "XDG_CONFIG_HOME", "data": "XDG_DATA_HOME"}[kind]
    if xdg is None:
        monkeypatch.delenv(var, raising=False)
    else:
        monkeypatch.setenv(var, xdg.format(kind=kind))
    assert str(user_dir(kind)) == FINDERS[kind]("tfgpu", appauthor=False)
    assert str(user_dir(kind, "rattler")) == FINDERS[kind]("rattler", appauthor=False)


def test_the_doctor_path_does_not_import_platformdirs() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("platformdirs is used as it is off Linux")
    import subprocess

    code = "import sys; from tfgpu.core.sysio import user_dir; user_dir('cache'); print('platformdirs' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
