"""Reading fleet reports: files, directories and standard input, streamed, one report in memory at a time.

Every report is someone else's output. Memory is bounded per report by its real size (at most
MAX_REPORT_BYTES, whatever the file or the stream holds); lines are read with a bound, so an endless line
costs no more than one report; a report is parsed only up to its facts (what the merge judges), with
RFC 8259's JSON: NaN and Infinity are refused, as are numbers too long to be facts.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The line prefix `tfgpu fleet k8s` pods print before their one-line report (`kubectl logs` output).
MARKER = "TFGPU-REPORT"
#: One report is a few tens of kB; a file or a line far larger than this is not a report (as --facts).
MAX_REPORT_BYTES = 16 * 1024 * 1024
#: Lines beyond a report's bound are skipped in pieces of this size (never held whole).
_SKIP = 1024 * 1024
_TOO_BIG = "larger than 16 MB: not a tfgpu report"

FACTS_SCHEMA = "tfgpu.facts/1"


@dataclass(frozen=True)
class Problem:
    """A report that could not be merged: where it came from and why."""

    source: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"source": self.source, "reason": self.reason}


@dataclass(frozen=True)
class Report:
    """One report's head: its top-level keys up to and including "facts" (the whole document for a bare
    facts document). What follows the facts (the node's own verdicts) is never parsed: the merge judges."""

    source: str
    head: dict[str, Any]
    node: str | None = None


#: No fact is a number of this many digits (tfgpu.facts.document refuses them in facts files too).
_MAX_DIGITS = 64


def _refuse_constant(name: str) -> Any:
    msg = f"{name} is not JSON"
    raise ValueError(msg)


def _parse_int(text: str) -> int:
    if len(text) > _MAX_DIGITS:
        msg = f"a {len(text)}-digit number is not a fact"
        raise ValueError(msg)
    return int(text)


#: RFC 8259's JSON, bounded: no NaN or Infinity, no integer longer than a fact can be (a float beyond range,
#: 1e999, reads as infinity: the machine key refuses it where it is judged, tfgpu.tools.fleet.machines).
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_parse_int)
_WS = re.compile(r"[ \t\n\r]*")


def _skip_ws(text: str, i: int) -> int:
    m = _WS.match(text, i)
    return m.end() if m else i


def parse_head(text: str) -> tuple[dict[str, Any] | None, bool]:
    """(the top-level keys of a JSON object up to and including "facts", whether the object ended there).
    None when the text does not start as such an object. tfgpu's reports put schema, versions and facts
    first, so the verdicts after them are never parsed."""
    try:
        i = _skip_ws(text, 0)
        if text[i:i + 1] != "{":
            return None, False
        i += 1
        out: dict[str, Any] = {}
        while True:
            i = _skip_ws(text, i)
            if text[i:i + 1] == "}":
                return out, True
            if out:
                if text[i:i + 1] != ",":
                    return None, False
                i = _skip_ws(text, i + 1)
            key, i = _DECODER.raw_decode(text, i)
            i = _skip_ws(text, i)
            if not isinstance(key, str) or text[i:i + 1] != ":":
                return None, False
            value, i = _DECODER.raw_decode(text, _skip_ws(text, i + 1))
            out[key] = value
            if key == "facts":
                return out, False
    except (ValueError, RecursionError):
        return None, False


def parse_report(source: str, text: str, node: str | None = None, *, complete: bool = True) -> Report | Problem:
    """One document's text as a Report, or the Problem that names what is wrong with it; ``complete=False``
    when its end was not seen (then parsed whole: a report cut after its facts is not one)."""
    if len(text) > MAX_REPORT_BYTES:
        return Problem(source, f"a report {_TOO_BIG}")
    head, closed = parse_head(text)
    if head is not None and complete and (closed or head.get("schema") != FACTS_SCHEMA):
        return Report(source, head, node)
    try:  # a bare facts document with a key named "facts", or no object at all: parsed whole
        doc = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        return Problem(source, f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})")
    except RecursionError:
        return Problem(source, "JSON nested too deeply to be a report")
    except ValueError as exc:
        return Problem(source, f"not valid JSON: {' '.join(str(exc).split())[:100]}")
    if not isinstance(doc, dict):
        return Problem(source, "not a JSON object: not a tfgpu report")
    return Report(source, doc, node)


def targets(args: Iterable[str]) -> Iterator[Path | str | Problem]:
    """What the arguments name, in order: each file (directories: their *.json, recursively, sorted), "-"
    for standard input, or a Problem for what names nothing to read."""
    for arg in args:
        if arg == "-":
            yield "-"
            continue
        path = Path(arg)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*.json") if p.is_file())
            if not files:
                yield Problem(arg, "directory holds no *.json reports")
            yield from files
        else:
            yield path


def iter_reports(args: Iterable[str], stdin: Any = None) -> Iterator[Report | Problem]:
    """Every report named by the arguments: files, directories (their *.json, recursively, sorted), or
    '-' for standard input (read line by line). A Problem stands in for what cannot be read."""
    for target in targets(args):
        if isinstance(target, Problem):
            yield target
        elif target == "-":
            if stdin is None:
                yield Problem("-", "standard input is not available")
            else:  # the bytes under a text stream: lines are then read with a bound
                yield from split_stream("-", getattr(stdin, "buffer", stdin))
        else:
            yield from read_file(Path(target))


#: Where a file holds more than one document: a marker line, or a "{" that starts a line after the first
#: (`cat *.json`, JSON lines). One scan of the bytes (str.find of "\n{" is slow on indented JSON).
_NEW_DOCUMENT = re.compile(rb"\n\{")


def read_file(path: Path) -> Iterator[Report | Problem]:
    """A file of one report is read whole (bounded by its size and MAX_REPORT_BYTES); a larger one, or
    one of many reports, is read as a stream."""
    try:
        if not path.is_file():
            yield Problem(str(path), "does not exist" if not path.exists() else "is not a regular file")
            return
        with path.open("rb", buffering=0) as fh:
            size = os.fstat(fh.fileno()).st_size
            # sized by the file: read(16 MB) would allocate that much for every report
            data = fh.read(size + 1) if size <= MAX_REPORT_BYTES else b""
            if size > MAX_REPORT_BYTES or len(data) > size:  # large, or growing while read
                fh.seek(0)
                yield from split_stream(str(path), io.BufferedReader(fh))
                return
    except OSError as exc:
        yield Problem(str(path), f"cannot read: {exc.strerror or exc}")
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        yield Problem(str(path), "not UTF-8 text: not a tfgpu report")
        return
    if MARKER.encode() not in data and _NEW_DOCUMENT.search(data.strip()) is None and data.rstrip().endswith(b"}"):
        yield parse_report(str(path), text.strip())
    else:
        yield from split_stream(str(path), _Lines(text))


class _Lines:
    """A text already in memory, read as a stream's lines (readline with a bound, like a file's)."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def readline(self, limit: int = -1) -> str:
        end = self.text.find("\n", self.at)
        end = len(self.text) if end < 0 else end + 1
        if limit >= 0:
            end = min(end, self.at + limit)
        line, self.at = self.text[self.at:end], end
        return line


def _bounded_lines(stream: Any) -> Iterator[tuple[int, str | None]]:
    """(line number, text) for each line; text None for a line longer than a report (its rest is skipped,
    never held), "\x00" for one that is not UTF-8. Bytes are decoded as UTF-8; text is read as it is."""
    lineno = 0
    while True:
        line = stream.readline(MAX_REPORT_BYTES + 1)
        if not line:
            return
        lineno += 1
        newline = b"\n" if isinstance(line, bytes) else "\n"
        if len(line) > MAX_REPORT_BYTES and not line.endswith(newline):
            while line and not line.endswith(newline):
                line = stream.readline(_SKIP)
            yield lineno, None
            continue
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError:
                yield lineno, "\x00"
                continue
        yield lineno, line


def split_stream(source: str, stream: Any) -> Iterator[Report | Problem]:
    """Reports in a stream, read a line at a time: `kubectl logs` marker lines
    (`[pod/...] TFGPU-REPORT node=NAME {...}`, other lines ignored), JSON lines, or pretty-printed
    documents one after another. Only one document is held in memory at a time."""
    buffer: list[str] = []
    size = 0
    try:
        for lineno, line in _bounded_lines(stream):
            where = f"{source}:{lineno}"
            if line is None or line == "\x00":
                yield Problem(where, f"a line {_TOO_BIG}" if line is None else "not UTF-8 text: not a tfgpu report")
                buffer, size = [], 0
                continue
            at = line.find(MARKER + " ")
            if at >= 0:
                rest = line[at + len(MARKER) + 1:].strip()
                node = None
                if rest.startswith("node="):
                    node, _, rest = rest[5:].partition(" ")
                yield parse_report(where, rest, node or None)
                continue
            if not buffer and not line.strip():
                continue
            buffer.append(line)
            size += len(line)
            if size > MAX_REPORT_BYTES:
                yield Problem(where, f"a report {_TOO_BIG}")
                buffer, size = [], 0
                continue
            stripped = line.rstrip()
            # A document ends with a line that is itself one (JSON lines) or a "}" in column 0 (pretty).
            if stripped.endswith("}") and (len(buffer) == 1 or stripped == "}"):
                result = parse_report(where, "".join(buffer).strip())
                if isinstance(result, Problem) and len(buffer) > 1:
                    continue  # a formatter that puts a nested "}" in column 0: read on
                yield result
                buffer, size = [], 0
    except (OSError, ValueError) as exc:  # a closed or unreadable stream
        yield Problem(source, f"cannot read: {exc}")
        return
    if buffer:  # what is left at the end was never closed: the full parse says where it breaks
        yield parse_report(source, "".join(buffer).strip(), complete=False)
