"""Red-team attack: Unicode bidirectional controls (the "Trojan Source" characters, CVE-2021-42574) in
names and logs reorder what the terminal shows: a node called ``gpu\\u202e1.0.2`` reads as another. Before
the fix they reached the terminal raw and passed the control-character check on channels and names."""

from __future__ import annotations

import io

import pytest

from tfgpu.core.errors import UsageError
from tfgpu.core.safety import check_text, safe_console
from tfgpu.core.termtext import terminal_safe

pytestmark = pytest.mark.safety

BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e",
        "\u200f", "\u061c"]


@pytest.mark.parametrize("ch", BIDI)
def test_attack_bidi_controls_never_reach_the_terminal(ch: str) -> None:
    out = terminal_safe(f"gpu-node{ch}lmth.exe")
    assert ch not in out
    assert "gpu-node" in out
    buf = io.StringIO()
    safe_console(file=buf, width=100).print(f"node a{ch}b")
    assert ch not in buf.getvalue()


@pytest.mark.parametrize("ch", BIDI)
def test_attack_bidi_controls_in_a_channel_or_name_are_refused(ch: str) -> None:
    with pytest.raises(UsageError):
        check_text(f"conda-forge{ch}", "--channel")


def test_ordinary_unicode_passes() -> None:
    assert terminal_safe("Tesla V100 · 日本語 · café") == "Tesla V100 · 日本語 · café"
