"""Reading a log for `tfgpu explain`: files, pipes and devices, any common text encoding, bounded in bytes and
line length; each line goes to the matcher (tfgpu.judge.explain.explain_lines' collector)."""

from __future__ import annotations

import codecs
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from tfgpu.core.errors import InputError
from tfgpu.core.record import field, record
from tfgpu.judge.explain import (
    MAX_LINE_CHARS,
    ExplainReport,
    _Collector,
    line_triggers,
)
from tfgpu.judge.explain_catalog import Catalog, load_catalog

#: Bytes read from a pipe at most (an endless pipe must end); a regular file is read to its end.
MAX_READ_BYTES = 4 * 1024 * 1024 * 1024
#: Bytes read at a time: large, so that finding the few lines worth matching is done by the regex engine.
_CHUNK = 1 << 20


def _decoder_for(head: bytes) -> codecs.IncrementalDecoder:
    """UTF-16 when the input starts with its BOM (PowerShell's `>` writes that), else UTF-8."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return codecs.getincrementaldecoder("utf-16")(errors="replace")
    return codecs.getincrementaldecoder("utf-8-sig")(errors="replace")


_SEPARATOR = re.compile(r"(\r\n|\n|\r)")


@record(frozen=False)
class _Splitter:
    """Decoded text in, line segments out: a line ends at ``\n`` (or ``\r\n``); a lone ``\r`` (Keras
    progress bars redraw with it) ends a segment of the same line, so an error printed after a
    progress bar is matched on its own, however long the bar. Each segment is cut to MAX_LINE_CHARS."""

    pending: list[str] = field(default_factory=list)
    pending_len: int = 0
    carry_cr: bool = False
    long: bool = False

    def push(self, text: str) -> Iterator[tuple[str, bool]]:
        """(segment, ends_the_line) pairs for the complete segments in ``text``."""
        if self.carry_cr:
            text = "\r" + text
            self.carry_cr = False
        if text.endswith("\r"):  # may be the first half of "\r\n"
            text = text[:-1]
            self.carry_cr = True
        if "\r" in text:
            parts = _SEPARATOR.split(text)
        else:
            pieces = text.split("\n")
            parts = [x for piece in pieces for x in (piece, "\n")][:-1]
        for i in range(0, len(parts) - 1, 2):
            yield self._take(parts[i]), parts[i + 1] != "\r"
        self._add(parts[-1])

    def finish(self) -> Iterator[tuple[str, bool]]:
        if self.pending or self.carry_cr:
            self.carry_cr = False
            yield self._take(""), True

    def _add(self, piece: str) -> None:
        if not piece:
            return
        room = MAX_LINE_CHARS - self.pending_len
        if room <= 0:
            self.long = True
            return
        if len(piece) > room:
            self.long = True
            piece = piece[:room]
        self.pending.append(piece)
        self.pending_len += len(piece)

    def _take(self, piece: str) -> str:
        if self.pending:
            self._add(piece)
            line = "".join(self.pending)
            self.pending, self.pending_len = [], 0
            return line
        if len(piece) > MAX_LINE_CHARS:
            self.long = True
            return piece[:MAX_LINE_CHARS]
        return piece


@record(frozen=False)
class _Reader:
    """Feeds a collector from decoded text, counting physical lines and NUL-byte lines.

    Whole lines inside a chunk are not split one by one: the catalog's triggers (tfgpu.judge.explain.line_triggers)
    find the lines that can give a finding, only those are fed, and the others are counted with ``str.count``. A
    line that a chunk cuts, or a chunk with NUL bytes, goes through the :class:`_Splitter`, which gives the same
    segments for any chunking."""

    col: _Collector
    triggers: tuple[re.Pattern[str], ...] | None
    splitter: _Splitter = field(default_factory=_Splitter)
    lineno: int = 1
    binary_lines: int = 0

    def feed(self, segments: Iterable[tuple[str, bool]]) -> None:
        for seg, ends in segments:
            if seg:
                if "\x00" in seg:
                    self.binary_lines += 1
                    seg = seg.replace("\x00", "")
                self.col.feed(self.lineno, seg)
            if ends:
                self.lineno += 1

    def push(self, text: str) -> None:
        """The next piece of decoded text: the end of the line a previous piece began goes to the splitter,
        then the complete lines, then the beginning of the line the next piece ends."""
        first = text.find("\n")
        if first < 0:
            self.feed(self.splitter.push(text))
            return
        self.feed(self.splitter.push(text[: first + 1]))
        last = text.rfind("\n")
        if last > first:
            self.lines(text, first + 1, last + 1)
        if last + 1 < len(text):
            self.feed(self.splitter.push(text[last + 1:]))

    def lines(self, text: str, start: int, end: int) -> None:
        """``text[start:end]``: complete lines (each ending with a newline) that follow a line end."""
        if self.triggers is None or text.find("\x00", start, end) >= 0:
            self.feed(self.splitter.push(text[start:end]))
            return
        if not self.splitter.long:
            self.splitter.long = _has_long_segment(text, start, end)
        lineno, counted, feed = self.lineno, start, self.col.feed_segment
        for begin in _candidates(self.triggers, text, start, end):
            lineno += text.count("\n", counted, begin)
            counted = begin
            line = text[begin:text.find("\n", begin, end)]
            if line.endswith("\r"):
                line = line[:-1]
            if "\r" in line:
                for seg in line.split("\r"):
                    if seg:
                        feed(lineno, seg[:MAX_LINE_CHARS])
            elif line:
                feed(lineno, line[:MAX_LINE_CHARS])
        self.lineno = lineno + text.count("\n", counted, end)


def _candidates(triggers: Sequence[re.Pattern[str]], text: str, start: int, end: int) -> list[int]:
    """Where the lines of ``text[start:end]`` that a trigger finds begin, in order."""
    begins: set[int] = set()
    plain = text.isascii()  # O(1) for a str: the triggers for typographic quotes cannot find anything
    for rx in triggers:
        if plain and not rx.pattern[0].isascii():
            continue
        # a trigger may start with the newline before its line (``\nerror:``): text[start - 1] is one
        search, pos = rx.search, max(start - 1, 0)
        while True:
            m = search(text, pos, end)
            if m is None:
                break
            at = m.start()
            if text[at] == "\n":
                at += 1
            if at < start:
                at = start
            begins.add(max(text.rfind("\n", start, at) + 1, start))
            pos = text.find("\n", at, end) + 1
            if pos == 0:  # pragma: no cover - every line of the block ends with a newline
                break
    return sorted(begins)


def _has_long_segment(text: str, start: int, end: int) -> bool:
    """Whether a line of ``text[start:end]`` has a segment (a part between carriage returns) longer than
    MAX_LINE_CHARS, as the splitter would cut. Every such line covers a whole window of half that length on a grid,
    so only the lines around a window without a newline are measured."""
    width = MAX_LINE_CHARS // 2
    k = start
    while k + width <= end:
        if text.find("\n", k, k + width) >= 0:
            k += width
            continue
        begin = max(text.rfind("\n", start, k) + 1, start)
        stop = text.find("\n", k, end)
        line = text[begin:stop]
        if any(len(seg) > MAX_LINE_CHARS for seg in (line[:-1] if line.endswith("\r") else line).split("\r")):
            return True
        k = stop + 1
    return False


def _seekable(stream: IO[bytes]) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, OSError, ValueError):
        return False


def explain_stream(
    stream: IO[bytes],
    *,
    name: str = "-",
    facts: Mapping[str, Any] | None = None,
    catalog: Catalog | None = None,
) -> ExplainReport:
    """Explain a binary stream of any size, every byte of it: a regular file to its end, a pipe for at most
    MAX_READ_BYTES. Memory stays bounded by the chunk size and MAX_LINE_CHARS."""
    cat = catalog or load_catalog()
    col = _Collector(cat, facts)
    reader = _Reader(col, line_triggers(cat))
    decoder: codecs.IncrementalDecoder | None = None
    total = 0
    bounded = not _seekable(stream)  # a regular file ends; an endless pipe must be cut
    stopped = False
    while True:
        size = _CHUNK
        if bounded:
            size = min(size, MAX_READ_BYTES - total)
            if size <= 0:
                stopped = bool(stream.read(1))
                break
        chunk = stream.read(size)
        if not chunk:
            break
        total += len(chunk)
        if decoder is None:
            decoder = _decoder_for(chunk)
        reader.push(decoder.decode(chunk))
    if decoder is not None:
        reader.push(decoder.decode(b"", final=True))
    reader.feed(reader.splitter.finish())
    notes: list[str] = []
    if stopped:
        notes.append(f"stopped reading after {MAX_READ_BYTES // 1048576} MB")
    if reader.splitter.long:
        notes.append(f"lines longer than {MAX_LINE_CHARS} characters were cut")
    if reader.binary_lines:
        notes.append(f"{reader.binary_lines} line(s) contain NUL bytes: this looks like a binary file, not a log")
    notes.extend(col.notes())
    return ExplainReport(tuple(col.result()), reader.lineno - 1, total, tuple(notes), name)


def _is_device(fh: IO[bytes]) -> bool:
    import os
    import stat

    mode = os.fstat(fh.fileno()).st_mode
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode)


def explain_file(
    path_or_stdin: str | Path | IO[bytes],
    *,
    facts: Mapping[str, Any] | None = None,
    catalog: Catalog | None = None,
) -> ExplainReport:
    """Explain a log file, ``"-"`` for standard input, or an open binary stream.

    A missing, unreadable or directory path raises :class:`InputError` (exit 2).
    """
    if not isinstance(path_or_stdin, (str, Path)):
        return explain_stream(path_or_stdin, name=getattr(path_or_stdin, "name", "-"),
                              facts=facts, catalog=catalog)
    if str(path_or_stdin) == "-":
        return explain_stream(sys.stdin.buffer, name="-", facts=facts, catalog=catalog)
    path = Path(path_or_stdin)
    if path.is_dir():
        msg = f"{path} is a directory, not a log file"
        raise InputError(msg, hint="give the log file itself, or - to read standard input")
    try:
        fh = path.open("rb")
    except FileNotFoundError as exc:
        msg = f"{path}: no such file"
        raise InputError(msg, hint="check the path, or pipe the log in: ... 2>&1 | tfgpu explain -") from exc
    except OSError as exc:
        msg = f"{path}: cannot read: {exc.strerror or exc}"
        raise InputError(msg, hint="check the file's permissions") from exc
    with fh:
        if _is_device(fh):  # /dev/zero, /dev/urandom (or a link to one): endless, and never a log
            msg = f"{path} is a device, not a log file"
            raise InputError(msg, hint="give the log file itself, or - to read standard input")
        try:
            return explain_stream(fh, name=str(path), facts=facts, catalog=catalog)
        except OSError as exc:
            msg = f"{path}: cannot read: {exc.strerror or exc}"
            raise InputError(msg, hint="check the file's permissions") from exc
