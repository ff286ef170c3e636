"""Text that crosses a trust boundary: values refused when they hold control characters, text made safe
for a shell comment, a terminal (no raw escape sequences) and GitHub's workflow-command parser.

Pure functions, no imports beyond ``re``: they run on the doctor's path.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tfgpu.core.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["check_text", "comment_safe", "safe_console", "terminal_safe", "terminal_safe_doc", "too_deep", "workflow_safe"]

# The terminal rules live in tfgpu.core.termtext (no imports) so that tfgpu.core.errors can use them too.
from tfgpu.core.termtext import _CONTROL, _escape_control, terminal_safe


def check_text(value: str, what: str) -> str:
    """``value`` unchanged, or UsageError (rc 2) when it holds a control character (a newline in a
    channel would become a command in `tfgpu plan --format sh`)."""
    if _CONTROL.search(value):
        msg = f"refusing {what} {value!r}: it contains control characters"
        raise UsageError(msg, hint="remove the newline, tab or escape character from it")
    return value


def too_deep(obj: object, limit: int = 64) -> bool:
    """Whether a JSON value nests deeper than ``limit`` (walked without recursion; scalars are skipped)."""
    level: list[object] = [obj]
    for _ in range(limit + 1):
        nxt: list[object] = []
        for value in level:
            if type(value) is dict:
                nxt.extend(v for v in value.values() if type(v) in (dict, list))
            elif type(value) is list:
                nxt.extend(v for v in value if type(v) in (dict, list))
        if not nxt:
            return False
        level = nxt
    return True


def comment_safe(text: str) -> str:
    """``text`` on one line, for a ``#`` comment in a shell script or YAML: control characters escaped."""
    return _CONTROL.sub(_escape_control, text)


def terminal_safe_doc(obj: object) -> object:
    """A JSON-shaped document with every string (keys too) made ``terminal_safe`` on one line."""
    if isinstance(obj, str):
        return terminal_safe(obj, keep_newlines=False)
    if isinstance(obj, dict):
        return {terminal_safe_doc(k): terminal_safe_doc(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [terminal_safe_doc(v) for v in obj]
    return obj


#: GitHub Actions reads a line starting with ``::`` (after whitespace) as a workflow command, and
#: ``::stop-commands::`` turns the parser off. Escaping the first colon stops both.
_WORKFLOW = re.compile(r"^(\s*):(?=:)", re.MULTILINE)
#: The older syntax, ``##[command]``, is found anywhere in a line.
_WORKFLOW_V1 = re.compile(r"##\[")


def workflow_safe(text: str) -> str:
    """``text`` with no line a GitHub Actions runner would take as a workflow command (``::error``,
    ``::stop-commands::``, ``::add-mask::``...): the leading ``::`` becomes ``%3A:`` (the runner's own
    escape for a colon in a command's data)."""
    return _WORKFLOW_V1.sub("#%23[", _WORKFLOW.sub(r"\1%3A", text))


def safe_console(**kwargs: Any) -> Console:
    """A rich Console whose every printed piece of text goes through :func:`terminal_safe`, whatever
    the renderable (str, Text, Table, Panel): a Dockerfile line, a log line, a GPU name or an
    environment's path cannot bring its own escape sequences to the terminal. rich's own styling and
    cursor control are added after this and stay."""
    from rich.console import Console as RichConsole
    from rich.console import RenderHook
    from rich.segment import Segment

    class _Safe:
        def __init__(self, renderable: Any) -> None:
            self.renderable = renderable

        def __rich_console__(self, console: Any, options: Any) -> Any:
            for seg in console.render(self.renderable, options):
                yield seg if seg.control else Segment(terminal_safe(seg.text), seg.style)

    class _Hook(RenderHook):
        def process_renderables(self, renderables: list[Any]) -> list[Any]:
            return [_Safe(r) for r in renderables]

    console = RichConsole(**kwargs)
    console.push_render_hook(_Hook())
    return console
