"""Text made safe for a terminal: no escape sequences, control characters or bidi controls from facts,
logs, file names or values. No imports beyond ``re``: tfgpu.core.errors and tfgpu.core.safety both use it."""

from __future__ import annotations

import re

#: C0 controls (tab included), DEL and the C1 controls (U+0080..U+009F: 8-bit CSI/OSC on some terminals),
#: and Unicode's bidirectional controls (LRM/RLM, ALM, embeddings, overrides, isolates: the "Trojan
#: Source" characters, CVE-2021-42574), which reorder what a terminal shows.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: Escape sequences (CSI ... final byte; OSC ... BEL or ST, OSC 8 links included; other ESC X), then any
#: control character left (a lone ESC, a carriage return that would redraw the line).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_control(m: re.Match[str]) -> str:
    c = m.group(0)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c, f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def terminal_safe(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` without escape sequences (ANSI CSI, OSC including OSC 8 links) or other control
    characters, for a terminal: facts, logs and names come from elsewhere and must not redraw the
    screen, set the window title or hide a link. Newlines (and tabs) stay when ``keep_newlines``."""
    if _SURROGATE.search(text):  # a lone surrogate cannot be written to a UTF-8 terminal at all
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
    if not _CONTROL.search(text):
        return text
    text = _ANSI.sub("", text)

    def esc(m: re.Match[str]) -> str:
        c = m.group(0)
        if keep_newlines and c in "\n\t":
            return c
        return _escape_control(m)

    return _CONTROL.sub(esc, text)
