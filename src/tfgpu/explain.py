"""Log lines -> known problems: match TensorFlow / CUDA / NVIDIA log text against compat/explain.toml.

Pure in the middle (:func:`explain_lines`, :func:`refine_cause`); :func:`explain_file` is the only
part that reads, and it streams with fixed bounds so a 50 MB log or a binary file is safe.
"""

from __future__ import annotations

import codecs
import functools
import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from tfgpu._record import field, record
from tfgpu.errors import DataError, InputError

SCHEMA = "tfgpu.explain/1"
CATALOG_SCHEMA = "tfgpu.compat.explain/1"
SEVERITIES = ("fatal", "error", "warning", "info", "harmless")

#: Lines longer than this are cut before matching (a binary file may have no newline at all).
MAX_LINE_CHARS = 8192
#: Bytes matched from the start of the input; after that only the last TAIL_BYTES are matched.
MAX_SCAN_BYTES = 16 * 1024 * 1024
TAIL_BYTES = 2 * 1024 * 1024
#: Bytes read at most (an endless pipe must end); past this the rest is not read.
MAX_READ_BYTES = 512 * 1024 * 1024
#: A finding's ``text`` keeps this many characters of its line.
TEXT_CHARS = 300
_CHUNK = 1 << 16


@record
class Entry:
    """One catalog row, with its pattern compiled."""

    id: str
    severity: str
    rank: int
    pattern: re.Pattern[str]
    meaning: str
    cause: str
    fix: str
    sample: str
    source: str
    source_url: str
    source_title: str
    #: A literal every match contains (lower-cased when the pattern ignores case): a cheap prefilter.
    needle: str | None
    ignore_case: bool


@record
class Catalog:
    entries: tuple[Entry, ...]


@record
class Finding:
    """A known problem found on one line of a log."""

    id: str
    severity: str
    rank: int
    line: int  # 1-based line number of the first occurrence
    text: str  # that line, cut to TEXT_CHARS
    meaning: str
    cause: str
    fix: str
    source: str  # where the knowledge comes from (URL, or the catalog's source key)
    count: int = 1  # how many lines matched with the same id and groups
    groups: tuple[tuple[str, str], ...] = ()

    @property
    def harmless(self) -> bool:
        return self.severity == "harmless"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "rank": self.rank,
            "line": self.line,
            "text": self.text,
            "count": self.count,
            "meaning": self.meaning,
            "cause": self.cause,
            "fix": self.fix,
            "source": self.source,
        }


@record
class ExplainReport:
    """What :func:`explain_file` found, plus how much of the input it read."""

    findings: tuple[Finding, ...]
    lines: int
    bytes_read: int
    notes: tuple[str, ...] = ()
    name: str = "-"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "input": {"name": self.name, "lines": self.lines, "bytes": self.bytes_read},
            "findings": [f.to_json() for f in self.findings],
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------------------- catalog


def _parser() -> Any:
    if sys.version_info >= (3, 11):
        import re._parser as parser
    else:  # pragma: no cover - Python < 3.11
        import sre_parse as parser
    return parser


def _needle(pattern: str, flags: int) -> str | None:
    """The longest literal run at the top level of a regex, if it is long enough to filter on."""
    parser = _parser()
    try:
        parsed = parser.parse(pattern, flags)
    except Exception:  # pragma: no cover - re.compile already accepted it
        return None
    literal = parser.LITERAL
    best, run = "", []
    for op, arg in parsed:
        if op == literal:
            run.append(chr(arg))
            continue
        if len(run) > len(best):
            best = "".join(run)
        run = []
    if len(run) > len(best):
        best = "".join(run)
    return best if len(best) >= 4 else None


def _format(template: str, groups: Mapping[str, str]) -> str:
    """Substitute ``{name}`` from the regex groups; unknown names stay as written."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        return groups.get(key, m.group(0)) if groups.get(key) is not None else m.group(0)

    return re.sub(r"\{(\w+)\}", sub, template)


def build_catalog(data: Mapping[str, Any], *, origin: str = "compat/explain.toml") -> Catalog:
    """Turn the parsed TOML into a :class:`Catalog`; refuses a malformed row naming it."""
    if data.get("schema") != CATALOG_SCHEMA:
        msg = f"{origin}: schema is {data.get('schema')!r}, expected {CATALOG_SCHEMA!r}"
        raise DataError(msg)
    sources = data.get("sources", {})
    out: list[Entry] = []
    seen: set[str] = set()
    for i, row in enumerate(data.get("entries", [])):
        where = f"{origin}: entry {i + 1} ({row.get('id', '?') if isinstance(row, dict) else '?'})"
        if not isinstance(row, dict):
            msg = f"{where}: not a table"
            raise DataError(msg)
        missing = [k for k in ("id", "severity", "rank", "pattern", "meaning", "cause", "fix", "source")
                   if k not in row]
        if missing:
            msg = f"{where}: missing {', '.join(missing)}"
            raise DataError(msg)
        if row["severity"] not in SEVERITIES:
            msg = f"{where}: severity {row['severity']!r} is not one of {', '.join(SEVERITIES)}"
            raise DataError(msg)
        if row["id"] in seen:
            msg = f"{where}: duplicate id"
            raise DataError(msg)
        seen.add(row["id"])
        try:
            rx = re.compile(row["pattern"])
        except re.error as exc:
            msg = f"{where}: bad pattern: {exc}"
            raise DataError(msg) from exc
        src = sources.get(row["source"], {})
        icase = bool(rx.flags & re.IGNORECASE)
        needle = _needle(row["pattern"], 0)
        out.append(Entry(
            id=str(row["id"]), severity=str(row["severity"]), rank=int(row["rank"]), pattern=rx,
            meaning=str(row["meaning"]), cause=str(row["cause"]), fix=str(row["fix"]),
            sample=str(row.get("sample", "")), source=str(row["source"]),
            source_url=str(src.get("url", "")) if isinstance(src, dict) else "",
            source_title=str(src.get("title", "")) if isinstance(src, dict) else "",
            needle=(needle.lower() if icase and needle else needle), ignore_case=icase,
        ))
    return Catalog(tuple(sorted(out, key=lambda e: (e.rank, e.id))))


@functools.lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog shipped in compat/explain.toml (cached)."""
    from tfgpu.compat import load_toml

    return build_catalog(load_toml("explain"))


# ------------------------------------------------------------------------------- facts refinement


def _cuda_of_soname(lib: str) -> str | None:
    """The CUDA release a library name pins, where the name says it (None when it does not).

    Up to CUDA 10.0 every library's soname carried the CUDA version (libcublas.so.10.0); from 10.1
    only cudart does (libcudart.so.10.1, then libcudart.so.11.0 for every 11.x, .so.12, .so.13).
    Windows DLLs: cudart64_100.dll = 10.0, cudart64_110.dll = 11.x, cudart64_12.dll = 12.x.
    """
    m = re.match(r"(?:lib)?(\w+?)\.so\.(\d+)(?:\.(\d+))?", lib)
    if m:
        name, major, minor = m.group(1), int(m.group(2)), m.group(3)
        if name == "cudart":
            if major >= 11:
                return f"{major}.x"
            return f"{major}.{minor or 0}"
        if minor is not None and (major, int(minor)) <= (10, 0) and major >= 7:
            return f"{major}.{minor}"
        return None
    m = re.match(r"(\w+?)64_(\d+)\.dll$", lib, re.IGNORECASE)
    if m:
        name, digits = m.group(1).lower(), m.group(2)
        if name == "cudart" or (name.startswith("cu") and len(digits) >= 2 and int(digits[:-1] or 0) <= 10):
            if len(digits) == 1 or (len(digits) == 2 and int(digits) >= 11):
                return f"{int(digits)}.x"
            major, minor = int(digits[:-1]), int(digits[-1])
            if major >= 11:
                return f"{major}.x"
            return f"{major}.{minor}"
    return None


def _cudnn_of_soname(lib: str) -> str | None:
    m = re.match(r"(?:lib)?cudnn[\w]*?(?:\.so\.(\d+)|64_(\d+)\.dll)", lib, re.IGNORECASE)
    if m:
        return m.group(1) or m.group(2)
    return None


def _version_matches(wanted: str, have: str) -> bool:
    if wanted.endswith(".x"):
        return have.split(".")[0] == wanted[:-2]
    return have.split(".")[:2] == wanted.split(".")[:2]


def _describe(items: Sequence[Mapping[str, Any]], label: str) -> str:
    parts = []
    for it in items:
        v = it.get("version")
        if not v:
            continue
        p = it.get("path")
        parts.append(f"{label} {v} ({p})" if p else f"{label} {v}")
    return ", ".join(dict.fromkeys(parts))


def refine_cause(entry: Entry, groups: Mapping[str, str], facts: Mapping[str, Any] | None) -> str | None:
    """A cause sentence specific to this machine, from the probe facts (None: nothing to add)."""
    if not facts:
        return None
    lib = groups.get("lib") or ""
    toolkits = [t for t in facts.get("cuda_toolkits") or [] if isinstance(t, Mapping)]
    cudnns = [c for c in facts.get("cudnn") or [] if isinstance(c, Mapping)]
    driver = facts.get("driver") if isinstance(facts.get("driver"), Mapping) else None
    if entry.id.startswith(("dlopen.", "windows.cuda_dll")) or entry.id == "dlopen.import_time":
        cudnn_major = _cudnn_of_soname(lib) if "cudnn" in lib.lower() else None
        if cudnn_major:
            have = _describe(cudnns, "cuDNN")
            ok = [c for c in cudnns if str(c.get("version", "")).split(".")[0] == cudnn_major]
            if ok:
                where = ok[0].get("path") or "this machine"
                return (f"TensorFlow wants cuDNN {cudnn_major} ({lib}); cuDNN {ok[0].get('version')} is "
                        f"installed at {where} but the loader does not find it: put its lib directory on "
                        "LD_LIBRARY_PATH (PATH on Windows).")
            return (f"TensorFlow wants cuDNN {cudnn_major} ({lib}); "
                    + (f"installed here: {have}." if have else "no cuDNN was found on this machine."))
        if lib.startswith(("libcuda.", "nvcuda")):
            if driver and driver.get("version"):
                return (f"An NVIDIA driver {driver['version']} is installed, but {lib} is not on the "
                        "loader path of this process (container without --gpus, or a broken install).")
            err = f" ({driver['error']})" if driver and driver.get("error") else ""
            return f"No NVIDIA driver was found on this machine{err}, so there is no {lib}."
        wanted = _cuda_of_soname(lib)
        if wanted:
            have = _describe(toolkits, "CUDA")
            shown = wanted.replace(".x", "")
            ok = [t for t in toolkits if t.get("version") and _version_matches(wanted, str(t["version"]))]
            if ok:
                where = ok[0].get("path") or "this machine"
                return (f"TensorFlow wants CUDA {shown}'s libraries ({lib}); CUDA {ok[0].get('version')} "
                        f"is installed at {where} but the loader does not find it there: add its lib64 "
                        "directory to LD_LIBRARY_PATH (its bin directory to PATH on Windows).")
            return (f"TensorFlow wants CUDA {shown}'s libraries ({lib}); "
                    + (f"installed here: {have}." if have else "no CUDA toolkit was found on this machine."))
        return None
    if entry.id == "cuda.driver_insufficient" and driver:
        if driver.get("version"):
            return (f"The driver here is {driver['version']}"
                    + (f", which supports CUDA up to {driver['cuda']}" if driver.get("cuda") else "")
                    + "; the CUDA runtime TensorFlow loaded is newer than that.")
        return None
    if entry.id == "cudnn.version_mismatch" and cudnns:
        return f"cuDNN installed here: {_describe(cudnns, 'cuDNN')}; TensorFlow needs >= {groups.get('compiled')}."
    if entry.id in ("cuda.cuinit_no_device", "cuda.cuinit_303_no_libcuda") and driver is not None:
        gpus = facts.get("gpus")
        if not driver.get("version"):
            err = f": {driver['error']}" if driver.get("error") else ""
            return f"No NVIDIA driver is loaded on this machine{err}."
        if isinstance(gpus, list) and not gpus:
            return f"Driver {driver['version']} is installed but it reports no GPU."
    return None


# -------------------------------------------------------------------------------------- matching


def _match_line(catalog: Catalog, line: str) -> Iterator[tuple[Entry, dict[str, str]]]:
    lowered: str | None = None
    for e in catalog.entries:
        if e.needle is not None:
            if e.ignore_case:
                if lowered is None:
                    lowered = line.lower()
                if e.needle not in lowered:
                    continue
            elif e.needle not in line:
                continue
        m = e.pattern.search(line)
        if m:
            yield e, {k: v for k, v in m.groupdict().items() if v is not None}


@record(frozen=False)
class _Collector:
    catalog: Catalog
    facts: Mapping[str, Any] | None
    found: dict[tuple[str, tuple[tuple[str, str], ...]], Finding] = field(default_factory=dict)

    def feed(self, lineno: int, line: str) -> None:
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS]
        for e, groups in _match_line(self.catalog, line):
            key = (e.id, tuple(sorted(groups.items())))
            old = self.found.get(key)
            if old is not None:
                self.found[key] = _replace_count(old, old.count + 1)
                continue
            cause = _format(e.cause, groups)
            specific = refine_cause(e, groups, self.facts)
            if specific:
                cause = f"{specific} {cause}"
            text = line.strip()
            self.found[key] = Finding(
                id=e.id, severity=e.severity, rank=e.rank, line=lineno,
                text=text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…",
                meaning=_format(e.meaning, groups), cause=cause, fix=_format(e.fix, groups),
                source=e.source_url or e.source, groups=key[1],
            )

    def result(self) -> list[Finding]:
        return sorted(self.found.values(), key=lambda f: (f.rank, f.line, f.id))


def _replace_count(f: Finding, count: int) -> Finding:
    from tfgpu._record import replace

    return replace(f, count=count)


def explain_lines(
    lines: Iterable[str],
    *,
    facts: Mapping[str, Any] | None = None,
    catalog: Catalog | None = None,
) -> list[Finding]:
    """Known problems in ``lines``, most important first (rank, then line), one per id and groups."""
    col = _Collector(catalog or load_catalog(), facts)
    for n, line in enumerate(lines, 1):
        col.feed(n, line.rstrip("\r\n"))
    return col.result()


# ------------------------------------------------------------------------------------ file input


def _decoder_for(head: bytes) -> codecs.IncrementalDecoder:
    """UTF-16 when the input starts with its BOM (PowerShell's `>` writes that), else UTF-8."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return codecs.getincrementaldecoder("utf-16")(errors="replace")
    return codecs.getincrementaldecoder("utf-8-sig")(errors="replace")


def _iter_lines(stream: IO[bytes], stats: dict[str, int]) -> Iterator[str]:
    """Decoded lines of a binary stream, each cut to MAX_LINE_CHARS, reading at most MAX_READ_BYTES."""
    decoder: codecs.IncrementalDecoder | None = None
    pending: list[str] = []  # pieces of the current line
    pending_len = 0
    while True:
        room = MAX_READ_BYTES - stats["bytes"]
        if room <= 0:
            stats["stopped"] = 1
            break
        chunk = stream.read(min(_CHUNK, room))
        if not chunk:
            break
        stats["bytes"] += len(chunk)
        if decoder is None:
            decoder = _decoder_for(chunk)
        text = decoder.decode(chunk)
        parts = text.split("\n")
        for piece in parts[:-1]:
            if pending:
                if pending_len < MAX_LINE_CHARS:
                    pending.append(piece[: MAX_LINE_CHARS - pending_len])
                line = "".join(pending)
                pending, pending_len = [], 0
            else:
                line = piece[:MAX_LINE_CHARS]
            yield line.rstrip("\r")
        last = parts[-1]
        if pending_len < MAX_LINE_CHARS and last:
            cut = last[: MAX_LINE_CHARS - pending_len]
            pending.append(cut)
            pending_len += len(cut)
        elif last:
            stats["long"] = 1
    if decoder is not None:
        tail = decoder.decode(b"", final=True)
        if tail and pending_len < MAX_LINE_CHARS:
            pending.append(tail[: MAX_LINE_CHARS - pending_len])
    if pending:
        yield "".join(pending).rstrip("\r")


def explain_stream(
    stream: IO[bytes],
    *,
    name: str = "-",
    facts: Mapping[str, Any] | None = None,
    catalog: Catalog | None = None,
) -> ExplainReport:
    """Explain a binary stream of any size: the first MAX_SCAN_BYTES are matched, then the last
    TAIL_BYTES (where tracebacks end); memory stays bounded by those two limits."""
    col = _Collector(catalog or load_catalog(), facts)
    stats = {"bytes": 0, "stopped": 0, "long": 0}
    scanned = 0
    tail: deque[tuple[int, str]] = deque()
    tail_size = 0
    skipped_lines = 0
    skipped_from = 0
    n = 0
    binary_lines = 0
    for n, line in enumerate(_iter_lines(stream, stats), 1):
        if "\x00" in line:
            binary_lines += 1
            line = line.replace("\x00", "")
        if len(line) >= MAX_LINE_CHARS:
            stats["long"] = 1
        if scanned < MAX_SCAN_BYTES:
            scanned += len(line) + 1
            col.feed(n, line)
            continue
        tail.append((n, line))
        tail_size += len(line) + 1
        while tail_size > TAIL_BYTES and tail:
            _, old = tail.popleft()
            tail_size -= len(old) + 1
            skipped_lines += 1
            if not skipped_from:
                skipped_from = n - len(tail)
    for lineno, line in tail:
        col.feed(lineno, line)
    notes: list[str] = []
    if skipped_lines:
        notes.append(
            f"input is large ({stats['bytes'] / 1048576:.1f} MB): lines {skipped_from}-"
            f"{skipped_from + skipped_lines - 1} were not scanned (only the first "
            f"{MAX_SCAN_BYTES // 1048576} MB and the last {TAIL_BYTES // 1048576} MB are)"
        )
    if stats["stopped"]:
        notes.append(f"stopped reading after {MAX_READ_BYTES // 1048576} MB")
    if stats["long"]:
        notes.append(f"lines longer than {MAX_LINE_CHARS} characters were cut")
    if binary_lines:
        notes.append(f"{binary_lines} line(s) contain NUL bytes: this looks like a binary file, not a log")
    return ExplainReport(tuple(col.result()), n, stats["bytes"], tuple(notes), name)


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
        try:
            return explain_stream(fh, name=str(path), facts=facts, catalog=catalog)
        except OSError as exc:
            msg = f"{path}: cannot read: {exc.strerror or exc}"
            raise InputError(msg, hint="check the file's permissions") from exc


def summarize_harmless(findings: Iterable[Finding]) -> str | None:
    """One line for the harmless findings (people worry about them; they need nothing)."""
    harmless = [f for f in findings if f.harmless]
    if not harmless:
        return None
    total = sum(f.count for f in harmless)
    ids = ", ".join(dict.fromkeys(f.id.removeprefix("harmless.") for f in harmless))
    return f"{total} harmless line(s) ({ids}): nothing to fix"
