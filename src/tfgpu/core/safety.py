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
            # no line rich writes (wrapped ones included) starts a workflow command
            return _workflow_segments(console.render(self.renderable, options), Segment)

    class _Hook(RenderHook):
        def process_renderables(self, renderables: list[Any]) -> list[Any]:
            return [_Safe(r) for r in renderables]

    console = RichConsole(**kwargs)
    console.push_render_hook(_Hook())
    return console


def _workflow_segments(segments: Any, segment: Any) -> Any:
    """rich Segments made terminal-safe and escaped as :func:`workflow_safe` escapes text, however rich cut the
    line into segments: each line's segments are held until its end, the characters to escape are found in
    the line's whole text (the first ``:`` of a leading ``::``, the second ``#`` of ``##[``), then the segments
    are let go with those characters replaced."""
    line: list[tuple[str, Any]] = []

    def release() -> Any:
        text = "".join(t for t, _style in line)
        marks = {m.start(1): "%23" for m in _V1_MARK.finditer(text)}
        lead = _LEAD_MARK.match(text)
        if lead:
            marks[lead.start(1)] = "%3A"
        pos = 0
        for piece, style in line:
            shown = "".join(marks.get(pos + i, c) for i, c in enumerate(piece)) if marks else piece
            pos += len(piece)
            yield segment(shown, style)
        line.clear()

    for seg in segments:
        if seg.control:
            yield seg
            continue
        for piece in re.split(r"(\n)", terminal_safe(seg.text)):
            if piece == "\n":
                yield from release()
                yield segment(piece, seg.style)
            elif piece:
                line.append((piece, seg.style))
    yield from release()


#: What workflow_safe escapes, as positions: the first colon of a line starting (after spaces) with "::", and
#: the second "#" of each "##[".
_LEAD_MARK = re.compile(r"\s*(:):")
_V1_MARK = re.compile(r"#(#)\[")
