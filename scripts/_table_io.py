"""The common end of the scripts that regenerate compat/ tables: report, write with --force, or diff."""

from __future__ import annotations

import difflib
import os
import re
import sys
from pathlib import Path
from typing import TextIO

#: Set by `nox -s update_compat` (after scripts/fetch_upstreams.py brought every upstream): a script that finds
#: no source then fails (exit 2) instead of skipping, so a refresh never passes without reading its upstreams.
REQUIRE_ENV = "TFGPU_REQUIRE_UPSTREAMS"


def skip_or_fail(script: str, what: str, *, stream: TextIO | None = None) -> int:
    """No source for ``script``: 0 ("skipped", on ``stream``, stdout by default) when run by hand, 2 (on stderr)
    under $TFGPU_REQUIRE_UPSTREAMS."""
    if os.environ.get(REQUIRE_ENV):
        print(f"{script}: {what}; {REQUIRE_ENV} is set, so this is an error", file=sys.stderr)
        return 2
    print(f"{script}: {what}; skipped", file=stream or sys.stdout)
    return 0


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


def replace_block(text: str, block_re: re.Pattern[str], block: str, anchor: str, path: Path) -> str:
    """``block`` in place of what ``block_re`` finds in ``text``, or before the ``anchor`` line when it finds none
    (the first regeneration); SystemExit naming ``path`` when there is neither."""
    if block_re.search(text):
        return block_re.sub(lambda _m: block, text, count=1)
    if anchor not in text:
        msg = f"{path}: no `{anchor}` line to put the generated block before"
        raise SystemExit(msg)
    return text.replace(anchor, block + "\n" + anchor, 1)
