"""Posted logs are not always the bytes the program printed: pages scraped from forums carry HTML entities,
blogs and word processors turn quotes typographic, coloured consoles add ANSI codes. Every catalog sample must
still be recognised as its own entry after each of these standard transformations."""

from __future__ import annotations

import html

import pytest

from tfgpu.judge import explain as ex
from tfgpu.judge import explain_catalog as excat
from tfgpu.kb.parse import load_toml


def _samples() -> list[tuple[str, str]]:
    rows = []
    for entry in load_toml("explain")["entries"]:
        also = [a[0] if isinstance(a, list) else a for a in entry.get("also", [])]
        rows += [(entry["id"], s) for s in [entry["sample"], *also]]
    return rows


SAMPLES = _samples()


def _typographic(line: str) -> str:
    out, double = [], False
    for ch in line:
        if ch == '"':
            out.append("\u201d" if double else "\u201c")
            double = not double
        else:
            out.append("\u2019" if ch == "'" else ch)
    return "".join(out)


TRANSFORMS = {
    "html": lambda s: html.escape(s, quote=True),
    "typographic": _typographic,
    "ansi": lambda s: f"\x1b[1;31m{s}\x1b[0m",
    "nbsp": lambda s: s.replace(" ", "\u00a0", 3),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_every_sample_survives_the_transformation(name: str) -> None:
    cat = excat.load_catalog()
    missed = []
    for entry_id, sample in SAMPLES:
        changed = TRANSFORMS[name](sample)
        if changed == sample:
            continue
        found = {e.id for e, *_ in ex._match_line(cat, ex.normalize_line(changed))}
        if entry_id not in found:
            missed.append((entry_id, changed))
    assert not missed, missed[:5]


def test_normalize_line_leaves_plain_lines_alone() -> None:
    plain = "2020-07-27 19:44:03.826179: E tensorflow/stream_executor/cuda/cuda_driver.cc:313] failed call to cuInit"
    assert ex.normalize_line(plain) is plain
    assert ex.normalize_line("make && make install") == "make && make install"
    assert ex.normalize_line("Could not load dynamic library &#39;libcudart.so.11.0&#39;; dlerror") == (
        "Could not load dynamic library 'libcudart.so.11.0'; dlerror")
    assert ex.normalize_line("\x1b[33mW tensorflow/x.cc:1] hi\x1b[0m") == "W tensorflow/x.cc:1] hi"


def test_explain_lines_reads_an_html_escaped_log() -> None:
    """A real catalog line as a scraped page shows it (``'`` as ``&#39;``) still names its cause."""
    sample = next(s for i, s in SAMPLES if i == "dlopen.cudnn")
    escaped = html.escape(sample, quote=True)
    assert "&#x27;" in escaped
    assert next(f.id for f in ex.explain_lines([escaped])) == "dlopen.cudnn"
