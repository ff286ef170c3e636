"""Reading a log for `tfgpu explain`: files, pipes and devices, any common text encoding, bounded in bytes and
line length; each line goes to the matcher (tfgpu.judge.explain.explain_lines' collector)."""

from __future__ import annotations

import codecs
import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from tfgpu.core.errors import InputError
from tfgpu.core.record import field, record
from tfgpu.judge.explain import (
    MAX_LINE_CHARS,
    ExplainReport,
    _Collector,
)
from tfgpu.judge.explain_catalog import Catalog, load_catalog

#: Bytes matched from the start of the input; after that only the last TAIL_BYTES are matched.
MAX_SCAN_BYTES = 16 * 1024 * 1024
TAIL_BYTES = 2 * 1024 * 1024
#: Bytes read at most (an endless pipe must end); past this the rest is not read.
MAX_READ_BYTES = 512 * 1024 * 1024
_CHUNK = 1 << 16
_SKIP_CHUNK = 1 << 20


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
    """Feeds a collector from decoded text, counting physical lines and NUL-byte lines."""

    col: _Collector
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


def _utf16_codec(decoder: codecs.IncrementalDecoder | None) -> str | None:
    """"utf-16-le"/"utf-16-be" when the input was decoded as UTF-16 (by its BOM), else None."""
    if decoder is None or not type(decoder).__module__.endswith("utf_16"):
        return None
    return "utf-16-be" if getattr(decoder, "decoder", None) is codecs.utf_16_be_decode else "utf-16-le"


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
    """Explain a binary stream of any size: the first MAX_SCAN_BYTES are matched, then the real last
    TAIL_BYTES of the input (where tracebacks end), with line numbers counted through the middle.
    Memory stays bounded by those two limits; a pipe is read for at most MAX_READ_BYTES (a regular
    file to its end)."""
    col = _Collector(catalog or load_catalog(), facts)
    reader = _Reader(col)
    decoder: codecs.IncrementalDecoder | None = None
    total = 0
    bounded = not _seekable(stream)  # a regular file ends; an endless pipe must be cut
    stopped = False

    def read(size: int) -> bytes:
        nonlocal total, stopped
        if bounded:
            size = min(size, MAX_READ_BYTES - total)
            if size <= 0:
                stopped = True
                return b""
        chunk = stream.read(size)
        total += len(chunk)
        return chunk

    # 1. the head: everything up to MAX_SCAN_BYTES
    while total < MAX_SCAN_BYTES:
        chunk = read(_CHUNK)
        if not chunk:
            break
        if decoder is None:
            decoder = _decoder_for(chunk)
        reader.feed(reader.splitter.push(decoder.decode(chunk)))
    # 2. the rest: keep the last TAIL_BYTES raw, count the newlines of what falls out of that window
    ring: deque[bytes] = deque()
    ring_size = 0
    skipped_bytes = 0
    skipped_newlines = 0
    wide = _utf16_codec(decoder)
    while True:
        chunk = read(_SKIP_CHUNK)
        if not chunk:
            break
        ring.append(chunk)
        ring_size += len(chunk)
        while ring and ring_size - len(ring[0]) >= TAIL_BYTES:
            old = ring.popleft()
            ring_size -= len(old)
            skipped_bytes += len(old)
            skipped_newlines += old.decode(wide, "replace").count("\n") if wide else old.count(b"\n")
    notes: list[str] = []
    tail = b"".join(ring)
    if not skipped_bytes:  # nothing was skipped: the tail continues the head seamlessly
        if decoder is None and tail:
            decoder = _decoder_for(tail)
        if decoder is not None:
            reader.feed(reader.splitter.push(decoder.decode(tail, final=True)))
    else:
        assert decoder is not None
        reader.feed(reader.splitter.push(decoder.decode(b"", final=True)))
        partial = bool(reader.splitter.pending) or reader.splitter.carry_cr
        reader.feed(reader.splitter.finish())  # the head's last line, cut where the window ends
        first_skipped = reader.lineno
        newline = "\n".encode(wide) if wide else b"\n"
        cut = tail.find(newline)
        if cut >= 0 and (not wide or cut % 2 == 0):  # the window starts inside a line: start at the next
            tail = tail[cut + len(newline):]
            skipped_newlines += 1
        reader.lineno += skipped_newlines - (1 if partial else 0)
        reader.splitter = _Splitter()
        tail_decoder = codecs.getincrementaldecoder(wide or "utf-8")(errors="replace")
        if reader.lineno > first_skipped:
            where = f"lines {first_skipped}-{reader.lineno - 1}"
        else:
            where = f"part of line {reader.lineno}"
        notes.append(
            f"input is large ({total / 1048576:.1f} MB): {skipped_bytes / 1048576:.1f} MB in the middle "
            f"({where}) were not scanned (only the first {MAX_SCAN_BYTES // 1048576} MB and the last "
            f"{TAIL_BYTES // 1048576} MB are)"
        )
        reader.feed(reader.splitter.push(tail_decoder.decode(tail, final=True)))
    reader.feed(reader.splitter.finish())
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
