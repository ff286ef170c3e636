"""Read a lockfile for `create --from-lock` (effects: reads the file): conda-lock's format or hashed pip requirements.

Which kind a file is comes from its content, not its name: conda-lock files and pixi.lock are YAML
mappings starting with ``version:`` (after comments); a pip lock is a requirements file in which
every requirement carries ``--hash=`` (what ``uv pip compile --generate-hashes`` and ``tfgpu lock
--backend pip`` write). Anything else goes to the conda-lock reader, which refuses it in one line.
"""

from __future__ import annotations

import re
from pathlib import Path

from tfgpu.errors import InputError
from tfgpu.plan import LockedPkg, LockInfo

_YAML_START = re.compile(r"^(version|metadata|package|environments|packages)\s*:")
_REQ_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;\\]+)")
_HASH_TOKEN = re.compile(r"--hash=(sha256|sha384|sha512):[0-9a-fA-F]+")
_PY_HEADER = re.compile(r"^#.*\bPython (\d+\.\d+)\b")


def _logical_lines(text: str) -> list[str]:
    """Requirement lines with backslash continuations joined (pip's requirements-file syntax)."""
    out: list[str] = []
    cur = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        out.append(cur.strip())
        cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


def detect_lock_kind(text: str) -> str:
    """"pip" for a hashed requirements file, else "conda" (the conda-lock reader judges the rest)."""
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if _YAML_START.match(s):
            return "conda"
        break
    return "pip" if "--hash=" in text else "conda"


def read_pip_lock(path: Path, text: str) -> LockInfo:
    """A ``--require-hashes`` requirements file: every requirement ``name==version`` with a hash."""
    packages: list[LockedPkg] = []
    python = ""
    for line in text.splitlines():
        m = _PY_HEADER.match(line.strip())
        if m:
            python = m.group(1)
            break
    for line in _logical_lines(text):
        body = line.split(" #", 1)[0].strip() if not line.startswith("#") else ""
        if not body:
            continue
        # pip reads options from the file too (-r /etc/shadow, --index-url, -e, --trusted-host): a lock
        # holds pinned requirements with hashes and nothing else
        option = next((t for t in body.split() if t.startswith("-") and not _HASH_TOKEN.fullmatch(t)), None)
        if option is not None:
            msg = f"pip lock {path}: {option.split('=', 1)[0]!r} is not a pinned requirement with hashes; refusing it"
            raise InputError(msg, hint="a lock holds only `name==version --hash=sha256:...` lines; regenerate it "
                                       "with tfgpu lock --backend pip")
        m = _REQ_NAME.match(body)
        if not m:
            msg = f"pip lock {path}: requirement {body.split()[0]!r} is not pinned with =="
            raise InputError(msg, hint="a lock pins every package; regenerate it with tfgpu lock --backend pip")
        hashes = re.findall(r"--hash=sha256:([0-9a-fA-F]{64})", body)
        if not hashes:
            msg = f"pip lock {path}: {m.group(1)}=={m.group(3)} has no --hash=sha256 (pip's --require-hashes refuses it)"
            raise InputError(msg, hint="regenerate it with tfgpu lock --backend pip")
        packages.append(LockedPkg(platform="", manager="pip", name=m.group(1), version=m.group(3),
                                  sha256=hashes[0].lower()))
    if not packages:
        msg = f"pip lock {path} has no requirements"
        raise InputError(msg, hint="make one with: tfgpu lock --tf VERSION --backend pip")
    return LockInfo(path=str(path), kind="pip", platforms=(), packages=tuple(packages), python=python)


def read_custom_metadata(text: str) -> dict[str, str]:
    """conda-lock's ``metadata.custom_metadata`` (string -> string) from a block-style YAML file.

    rattler's lock reader does not expose it; this reads the block tfgpu's writer emits (and
    conda-lock's, which has the same shape): scalars plain or single/double quoted.
    """
    out: dict[str, str] = {}
    lines = text.splitlines()
    in_meta = False
    indent = -1
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        lead = len(line) - len(line.lstrip(" "))
        s = line.strip()
        if lead == 0:
            in_meta = s.startswith("metadata:")
            indent = -1
            continue
        if not in_meta:
            continue
        if indent < 0:
            if s.startswith("custom_metadata:") and s[len("custom_metadata:"):].strip() in ("", "{}"):
                indent = lead
            continue
        if lead <= indent:
            break
        key, sep, value = s.partition(": ")
        if not sep:
            key, value = s.rstrip(":"), ""
        out[_unquote(key)] = _unquote(value.strip())
    return out


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text


def read_lock_info(path: str | Path) -> LockInfo:
    """Read and validate a lockfile of either kind. InputError (exit 2, one line) when it is unusable."""
    path = Path(path).expanduser().absolute()
    if not path.is_file():
        msg = f"lockfile {path} does not exist" if not path.exists() else f"lockfile {path} is not a file"
        raise InputError(msg, hint="make one with: tfgpu lock --tf VERSION -o conda-lock.yml")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"lockfile {path} cannot be read as UTF-8 text: {exc}"
        raise InputError(msg) from None
    if detect_lock_kind(text) == "pip":
        return read_pip_lock(path, text)
    from tfgpu.lockfile import read_lockfile

    lock = read_lockfile(path)
    packages = tuple(
        LockedPkg(platform=p.platform, manager=p.manager, name=p.name, version=p.version, build=p.build or "",
                  url=p.url, sha256=p.sha256 or "")
        for p in lock.packages
    )
    custom = read_custom_metadata(text)
    return LockInfo(path=str(path), kind="conda", platforms=tuple(lock.platforms), packages=packages,
                    channels=tuple(lock.channels), custom=tuple(sorted(custom.items())))
