"""The common end of the scripts that regenerate compat/ tables: report, write with --force, or diff."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path


def write_or_diff(path: Path, old: str, new: str, *, force: bool, what: str) -> int:
    """0 when ``path`` is up to date or was written (``force``); else print a unified diff and return 1."""
    if new == old:
        print(f"{path.name}: {what} up to date")
        return 0
    if force:
        path.write_text(new, encoding="utf-8")
        print(f"{path.name}: {what} written")
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                               f"a/compat/{path.name}", f"b/compat/{path.name}"))
    return 1
