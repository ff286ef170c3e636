"""Build small real wheels with the standard library (zipfile + METADATA + WHEEL + RECORD; PEP 427).

Used to make a local wheel index of a fake `tensorflow` (tests/fake_tf, the smoke test's fake) so
`tfgpu create` runs real uv / pip installs offline.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAKE_TF = REPO / "tests" / "fake_tf" / "tensorflow"


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(dest: Path, name: str, version: str, files: dict[str, bytes], *,
                extras: Iterable[str] = (), requires: Iterable[str] = ()) -> Path:
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Provides-Extra: {e}" for e in extras]
    meta += [f"Requires-Dist: {r}" for r in requires]
    content = dict(files)
    content[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    content[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tfgpu-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [f"{path},{_hash(data)},{len(data)}" for path, data in content.items()]
    record.append(f"{info}/RECORD,,")
    content[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in content.items():
            zf.writestr(path, data)
    return out


def build_fake_tensorflow(dest: Path, version: str = "2.20.0") -> Path:
    """tests/fake_tf packaged as tensorflow==VERSION (with an empty `and-cuda` extra), reporting that version."""
    files: dict[str, bytes] = {}
    for p in sorted(FAKE_TF.rglob("*.py")):
        data = p.read_bytes()
        if p.name == "__init__.py" and p.parent == FAKE_TF:
            data = data.replace(b'"FAKE_TF_VERSION", "2.15.0"', f'"FAKE_TF_VERSION", "{version}"'.encode())
        files["tensorflow/" + p.relative_to(FAKE_TF).as_posix()] = data
    return build_wheel(dest, "tensorflow", version, files, extras=("and-cuda",))
