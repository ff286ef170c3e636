"""Text that crosses a trust boundary: values refused when they hold control characters, text made safe
for a shell comment, a terminal (no raw escape sequences) and GitHub's workflow-command parser.

Pure functions, no imports beyond ``re``: they run on the doctor's path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tfgpu.core.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["check_text", "comment_safe", "safe_console", "terminal_safe", "terminal_safe_doc", "too_deep", "workflow_safe"]

# The terminal rules live in tfgpu.core.termtext (no imports) so that tfgpu.core.errors can use them too.
from tfgpu.core.termtext import _ANSI as _ANSI
from tfgpu.core.termtext import _CONTROL as _CONTROL
from tfgpu.core.termtext import _escape_control as _escape_control
from tfgpu.core.termtext import terminal_safe as terminal_safe
from tfgpu.core.termtext import workflow_safe as workflow_safe


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
            at_start = True  # no line rich writes (wrapped ones included) starts a workflow command
            for seg in console.render(self.renderable, options):
                if seg.control:
                    yield seg
                    continue
                text = terminal_safe(seg.text)
                yield Segment(workflow_safe(text, at_line_start=at_start), seg.style)
                at_start = text.endswith("\n") or (at_start and not text.strip())

    class _Hook(RenderHook):
        def process_renderables(self, renderables: list[Any]) -> list[Any]:
            return [_Safe(r) for r in renderables]

    console = RichConsole(**kwargs)
    console.push_render_hook(_Hook())
    return console
