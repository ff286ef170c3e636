"""tfgpu's tests. Layout: unit/<stage> (one folder per stage package of src/tfgpu), security, faults, explain,
casebook, e2e; shared fixtures in conftest.py, recorded real outputs under data/ (each with its source)."""

from pathlib import Path

#: this folder, and the repository around it (test modules live at several depths: anchor paths here)
TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
