"""Issue 32, item 4: a module that imports a POSIX-only part of the standard library at its top fails on Windows the
moment it is imported (`tfgpu doctor` there would exit 3). Here every tfgpu module is imported with those modules
made unimportable, as on Windows, so the mistake fails on this Linux host first; CI runs the suite on Windows too
(.github/workflows/tests.yml), where the imports inside functions are exercised for real."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import REPO

#: Standard-library modules that exist on POSIX only (the Python docs' "Availability: Unix" modules tfgpu could
#: reach for: file locks, users and groups, resource limits, terminals).
POSIX_ONLY = ("fcntl", "grp", "pwd", "resource", "termios", "tty", "pty", "syslog", "crypt")

_IMPORT_ALL = """
import importlib, pkgutil, sys
for name in sys.argv[1:]:
    sys.modules[name] = None  # `import fcntl` now raises ImportError, as on Windows
import tfgpu
failed = []
for module in pkgutil.walk_packages(tfgpu.__path__, "tfgpu."):
    try:
        importlib.import_module(module.name)
    except Exception as exc:
        failed.append(f"{module.name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
"""


@pytest.mark.real_subprocess
def test_every_module_imports_without_the_posix_only_standard_library() -> None:
    res = subprocess.run([sys.executable, "-c", _IMPORT_ALL, *POSIX_ONLY], capture_output=True, text=True,
                         cwd=REPO, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == ""
    planted = subprocess.run([sys.executable, "-c", "import sys; sys.modules['fcntl'] = None; import fcntl"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert "ModuleNotFoundError: import of fcntl halted" in planted.stderr  # the stand-in for Windows refuses it
