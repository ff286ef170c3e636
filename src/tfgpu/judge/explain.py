"""Log lines -> known problems: match TensorFlow / CUDA / NVIDIA log text against compat/explain.toml.

Pure in the middle (:func:`explain_lines`, :func:`refine_cause`); :func:`explain_file` is the only
part that reads, and it streams with fixed bounds so a 50 MB log or a binary file is safe.

Nothing fatal passes silently: an error-level line no catalog entry knows (a TensorFlow ``E``/``F`` line,
a ``Check failed``, a Python exception line, a CUDA/cuDNN/cuBLAS error code, an ``NVRM`` message) gets a
generic ``unrecognised.<kind>`` finding with a key to search for. Causes use the other lines of the same
log (:func:`_apply_log_context`), and the summary (:func:`top_finding`) is never a "good sign" while an
error is on record.
"""

from __future__ import annotations

import codecs
import functools
import html
import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from tfgpu.core.errors import DataError, InputError
from tfgpu.core.record import field, record

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
#: At most this many distinct unrecognised lines become findings (the rest are counted in a note).
MAX_UNRECOGNISED = 20
#: Rank of the generic unrecognised.* findings: after every catalog problem, before info and harmless ones.
UNRECOGNISED_RANK = 200
_CHUNK = 1 << 16
_SKIP_CHUNK = 1 << 20


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
    #: For a pattern that is a top-level alternation (``a|b|c``): one literal per branch; a line must contain
    #: one of them (``needle`` is None then, since no literal is common to every match).
    needles: tuple[str, ...] = ()


@record
class Catalog:
    entries: tuple[Entry, ...]
    #: Entries by a whole word every matching line contains (lower-cased), so a line is only tried
    #: against the entries whose word it has; ``always`` holds the entries without such a word.
    index: Mapping[str, tuple[Entry, ...]] = field(default_factory=dict, compare=False, repr=False)
    always: tuple[Entry, ...] = field(default=(), compare=False, repr=False)
    words: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    #: Entries indexed under several words (one per branch of an alternation): tried once per line.
    multi: frozenset[str] = field(default=frozenset(), compare=False, repr=False)


@record
class LogFinding:
    """A known problem found on one line of a log (its ``findings`` in the explain JSON). Not to be confused
    with :class:`tfgpu.judge.findings.Finding`, a blocker or caveat of one release on one machine."""

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
    #: For an unrecognised.* finding: a short text to search for (the message without numbers/paths).
    key: str = ""

    @property
    def harmless(self) -> bool:
        return self.severity == "harmless"

    @property
    def unrecognised(self) -> bool:
        return self.id.startswith("unrecognised.")

    @property
    def problem(self) -> bool:
        return self.severity in ("fatal", "error", "warning")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
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
        if self.key:
            out["key"] = self.key
        return out


@record
class ExplainReport:
    """What :func:`explain_file` found, plus how much of the input it read."""

    findings: tuple[LogFinding, ...]
    lines: int
    bytes_read: int
    notes: tuple[str, ...] = ()
    name: str = "-"

    def to_json(self) -> dict[str, Any]:
        top = top_finding(self.findings)
        return {
            "schema": SCHEMA,
            "input": {"name": self.name, "lines": self.lines, "bytes": self.bytes_read},
            "summary": top.id if top is not None else None,
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


def _literal_runs(pattern: str, flags: int = 0) -> list[str]:
    """The literal runs at the top level of a regex: every match contains each of them."""
    parser = _parser()
    try:
        parsed = parser.parse(pattern, flags)
    except Exception:  # pragma: no cover - re.compile already accepted it
        return []
    return _runs_of(parsed, parser.LITERAL)


def _runs_of(ops: Iterable[tuple[Any, Any]], literal: Any) -> list[str]:
    """The runs of consecutive literal characters in a parsed (sub)pattern."""
    runs, run = [], []
    for op, arg in ops:
        if op == literal:
            run.append(chr(arg))
            continue
        if run:
            runs.append("".join(run))
        run = []
    if run:
        runs.append("".join(run))
    return runs


def _branch_runs(pattern: str, flags: int = 0) -> list[list[str]] | None:
    """For a pattern that is one top-level alternation, the literal runs of each branch; else None."""
    parser = _parser()
    try:
        parsed = list(parser.parse(pattern, flags))
    except Exception:  # pragma: no cover - re.compile already accepted it
        return None
    if len(parsed) != 1 or parsed[0][0] != parser.BRANCH:
        return None
    return [_runs_of(branch, parser.LITERAL) for branch in parsed[0][1][1]]


def _needle(pattern: str, flags: int) -> str | None:
    """The longest literal run at the top level of a regex, if it is long enough to filter on."""
    best = max(_literal_runs(pattern, flags), key=len, default="")
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
        needles: tuple[str, ...] = ()
        branches = _branch_runs(row["pattern"]) if needle is None else None
        if branches:
            best = [max(runs, key=len, default="") for runs in branches]
            if all(len(b) >= 4 for b in best):
                needles = tuple(b.lower() if icase else b for b in best)
        out.append(Entry(
            id=str(row["id"]), severity=str(row["severity"]), rank=int(row["rank"]), pattern=rx,
            meaning=str(row["meaning"]), cause=str(row["cause"]), fix=str(row["fix"]),
            sample=str(row.get("sample", "")), source=str(row["source"]),
            source_url=str(src.get("url", "")) if isinstance(src, dict) else "",
            source_title=str(src.get("title", "")) if isinstance(src, dict) else "",
            needle=(needle.lower() if icase and needle else needle), ignore_case=icase, needles=needles,
        ))
    entries = tuple(sorted(out, key=lambda e: (e.rank, e.id)))
    # how common each word is in real log lines (the entries' own samples): index by the rarest word
    common: dict[str, int] = {}
    for e in entries:
        for w in set(_WORD.findall(e.sample.lower())):
            common[w] = common.get(w, 0) + 1
    index: dict[str, list[Entry]] = {}
    always: list[Entry] = []
    multi: set[str] = set()
    for e in entries:
        word = _index_word(_literal_runs(e.pattern.pattern), common)
        if word is not None:
            index.setdefault(word, []).append(e)
            continue
        branches = _branch_runs(e.pattern.pattern)
        words = [_index_word(runs, common) for runs in branches] if branches else [None]
        if any(w is None for w in words):
            always.append(e)
            continue
        for w in dict.fromkeys(w for w in words if w is not None):
            index.setdefault(w, []).append(e)
        multi.add(e.id)
    return Catalog(entries, {w: tuple(es) for w, es in index.items()}, tuple(always), frozenset(index),
                   frozenset(multi))


_WORD = re.compile(r"[a-z0-9_]+")


def _index_word(runs: Sequence[str], common: Mapping[str, int] | None = None) -> str | None:
    """A whole word inside one of the literal ``runs`` (lower-cased): one bounded by non-word characters
    of the run itself, so every line the entry matches has it as a token of ``_WORD``. The rarest such
    word in ``common`` (word -> how many sample lines have it), then the longest: "tensorflow" is in
    most lines."""
    inner = []
    for run in runs:
        low = run.lower()
        inner += [m.group() for m in _WORD.finditer(low) if m.start() > 0 and m.end() < len(low)]
    inner = [w for w in inner if len(w) >= 3]
    if not inner:
        return None
    freq = common or {}
    return min(inner, key=lambda w: (freq.get(w, 0), -len(w), w))


@functools.lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog shipped in compat/explain.toml (cached)."""
    from tfgpu.kb.knowledge import load_explain_data

    return build_catalog(load_explain_data())


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


_CUINIT_WITH_DRIVER = frozenset({"cuda.cuinit_compat_not_supported", "cuda.cuinit_system_driver_mismatch"})


def refine_cause(entry: Entry, groups: Mapping[str, str], facts: Mapping[str, Any] | None) -> str | None:
    """A cause sentence specific to this machine, from the probe facts (None: nothing to add)."""
    if not facts:
        return None
    if entry.id.startswith("container."):  # what the container probes say about this machine (issue 19)
        from tfgpu.judge.containers import explain_cause

        return explain_cause(entry.id, groups, facts)
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
    # every cuInit failure that means "no usable driver/GPU here" (not the driver-mismatch ones, which
    # presuppose a driver): what the doctor knows about this machine's driver
    if (entry.id.startswith("cuda.cuinit") and entry.id not in _CUINIT_WITH_DRIVER) and driver is not None:
        gpus = facts.get("gpus")
        if not driver.get("version"):
            err = f": {driver['error']}" if driver.get("error") else ""
            return f"No NVIDIA driver is loaded on this machine{err}."
        if isinstance(gpus, list) and not gpus:
            return f"Driver {driver['version']} is installed but it reports no GPU."
    return None


# -------------------------------------------------------------------------------------- matching


def _match_line(catalog: Catalog, line: str) -> list[tuple[Entry, dict[str, str]]]:
    lowered = line.lower()
    hit = catalog.words.intersection(_WORD.findall(lowered))
    found = []
    tried: set[str] = set()
    for group in (catalog.always, *(catalog.index[w] for w in hit)):
        for e in group:
            if e.needle is not None and e.needle not in (lowered if e.ignore_case else line):
                continue
            if e.needles:
                hay = lowered if e.ignore_case else line
                if not any(n in hay for n in e.needles):
                    continue
            if e.id in catalog.multi:
                if e.id in tried:
                    continue
                tried.add(e.id)
            m = e.pattern.search(line)
            if m:
                found.append((e, {k: v for k, v in m.groupdict().items() if v is not None}))
    return found


# ------------------------------------------------------------------------- unrecognised error lines

#: A TensorFlow / absl log line at level E or F: ``2021-10-16 14:56:09.420644: E path/x.cc:271] msg``,
#: ``E tensorflow/x.cc:352] msg`` (TF 1.x) and ``E0000 00:00:1738697930.202924    7665 x.cc:522] msg``
#: (TF >= 2.16, absl).
_TF_LEVEL = re.compile(
    r"(?<![^\s:>|\]])(?P<lvl>[EF])(?:\d{4} \d\d:\d\d:\d+\.\d+\s+\d+\s+|\s+)"
    r"(?P<src>[^\s\]]+\.(?:cc|cpp|cu|h|c|py)):\d+\]\s?(?P<msg>.*)"
)
_CHECK_FAILED = re.compile(r"Check failed:?\s*(?P<msg>.*)")
#: The final line of a Python traceback: ``pkg.mod.SomeError: message`` at the start of the line
#: (or after pytest's ``E   `` prefix).
_EXCEPTION = re.compile(
    r"(?:E {2,})?(?P<exc>(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Failure))(?::\s*(?P<msg>.*))?$"
)
_CUDA_CODE = re.compile(
    r"\b(?P<code>CUDA_ERROR_[A-Z_]+|CUDNN_STATUS_(?!SUCCESS\b)[A-Z_]+|CUBLAS_STATUS_(?!SUCCESS\b)[A-Z_]+"
    r"|cudaError[A-Z]\w+|CUresult\(-?\d+\)|UNKNOWN ERROR \(\d+\)|nccl(?:System|Internal|UnhandledCuda)Error"
    r"|NCCL error|NCCL failure)"
)
_NVRM = re.compile(r"NVRM: (?P<msg>.*)")
_NVRM_BAD = re.compile(r"(?i)\bxid\b|fail|error|mismatch|fallen off|not responding|unable|cannot|\binvalid\b")
#: Kinds of unrecognised lines, most telling first (their findings are ordered so: a CUDA error code
#: says more than the TensorFlow line around it).
_KINDS = {
    "cuda_error": "CUDA / cuDNN / cuBLAS / NCCL error code",
    "nvrm": "NVIDIA kernel driver (NVRM) message",
    "check_failed": "failed internal check (the process aborts here)",
    "exception": "Python exception",
    "tf_log": "TensorFlow {level} message",
}
_KIND_ORDER = {kind: i for i, kind in enumerate(_KINDS)}


def _search_key(text: str, limit: int = 80) -> str:
    """A message without the parts that differ between machines (addresses, paths, long numbers)."""
    text = re.sub(r"0x[0-9a-fA-F]+|\S*[/\\]\S*|\b\d{5,}\b", " ", text)
    # PCI addresses and register triples: 0000:01:00.0, (0x22:0x56:894)
    text = re.sub(r"(?<![\w.-])[(\[]?[0-9a-fA-F]{2,}(?:[:.][0-9a-fA-F]+)+:?[)\]]?(?![\w.-])"
                  r"|\(\s*[: ]*\d*\s*\)", " ", text)
    text = re.sub(r"\s+", " ", text).strip(" :;,.")
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0]
    return text


def classify_unrecognised(line: str) -> tuple[str, str, str] | None:
    """(kind, severity, key) when ``line`` is an error-level line, else None (pure; no catalog)."""
    tf = _TF_LEVEL.search(line) if "] " in line else None
    level = ("fatal" if tf.group("lvl") == "F" else "error") if tf else None
    if "NVRM" in line:
        m = _NVRM.search(line)
        if m and _NVRM_BAD.search(m.group("msg")):
            xid = re.search(r"Xid \([^)]*\): (\d+)", m.group("msg"))
            key = f"NVRM: Xid {xid.group(1)}" if xid else "NVRM: " + _search_key(m.group("msg"), 60)
            return "nvrm", level or "error", key
    if "Check failed" in line:
        m = _CHECK_FAILED.search(line)
        if m:
            return "check_failed", "fatal", _search_key("Check failed: " + m.group("msg"), 70)
    if "CUDA" in line or "CU" in line or "cuda" in line or "nccl" in line or "NCCL" in line:
        m = _CUDA_CODE.search(line)
        if m:
            return "cuda_error", level or "error", m.group("code")
    if line[:1].isalpha() and ("Error" in line or "Exception" in line or "Failure" in line):
        m = _EXCEPTION.match(line.rstrip())
        if m:
            msg = m.group("msg") or ""
            name = m.group("exc").rsplit(".", 1)[-1]
            return "exception", level or "error", _search_key(f"{name}: {msg}" if msg else name)
    if tf and level:
        return "tf_log", level, _search_key(tf.group("msg")) or tf.group("src")
    return None


def _unrecognised_finding(lineno: int, text: str, kind: str, severity: str, key: str) -> LogFinding:
    label = _KINDS[kind].format(level=severity)
    return LogFinding(
        id=f"unrecognised.{kind}", severity=severity, rank=UNRECOGNISED_RANK + _KIND_ORDER[kind], line=lineno,
        text=text,
        meaning=f"tfgpu does not know this {label}: \"{key}\".",
        cause=("Not in tfgpu's catalog of known problems, so tfgpu cannot say why it happened. If another "
               "finding names a cause, this line is probably its consequence."),
        fix=(f"Search for \"{key}\" (with the quotes) in TensorFlow's and NVIDIA's issue trackers; "
             "tfgpu doctor shows whether this machine's driver, CUDA and cuDNN fit the TensorFlow in use."),
        source="tfgpu: not in the catalog (compat/explain.toml)", key=key,
    )


# ------------------------------------------------------------------------------ context of the log

#: Facts that one line states and another line's cause needs (first occurrence kept).
_CONTEXT = {
    "driver_hint": ("insufficient driver version", re.compile(r"possibly insufficient driver version: (?P<ver>[\d.]+)")),
    "cudnn_loaded": ("Loaded cuDNN version", re.compile(r"Loaded cuDNN version (?P<ver>\d+)")),
}
#: cuDNN could not start (handle, init, convolution algorithms, and the Check failed on them that aborts
#: TF 1.x): the findings a driver hint explains.
_CUDNN_INIT = re.compile(
    r"(?i)CUDNN_STATUS_(?:NOT_INITIALIZED|INTERNAL_ERROR|EXECUTION_FAILED|ARCH_MISMATCH)|cudnn handle"
    r"|DNN library (?:initialization failed|is not found)|convolution algorithm|GetConvolveAlgorithms"
)
#: Both wordings: ``7301 (compatibility version 7300) but source was compiled with 7004`` (TF <= 1.x)
#: and ``8.0.4 but source was compiled with: 8.1.0`` (TF >= 2).
_CUDNN_MISMATCH = re.compile(
    r"(?i)Loaded runtime CuDNN library:? (?P<loaded>\d[\d.]*)(?: \(compatibility version \d+\))?,? "
    r"but source was compiled with:? (?P<compiled>\d[\d.]*)"
)


def cudnn_version(text: str) -> tuple[int, ...]:
    """``"8.1.0"`` -> (8, 1, 0); cuDNN's integer form ``"7301"``/``"8904"`` -> (7, 3, 1)/(8, 9, 4);
    ``"5110"`` -> (5, 1, 10) (major*1000 + minor*100 + patch)."""
    text = text.strip(".")
    if "." in text:
        return tuple(int(p) for p in text.split(".") if p.isdigit())
    n = int(text)
    if n < 1000:  # a bare major ("8")
        return (n,)
    return (n // 1000, (n % 1000) // 100, n % 100)


def _dotted(v: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in v)


def _cudnn_sentence(m: re.Match[str], loaded_line: tuple[int, str] | None) -> str:
    loaded, compiled = cudnn_version(m.group("loaded")), cudnn_version(m.group("compiled"))
    if loaded[:1] != compiled[:1]:
        rel = "a different major version, which never works"
    elif loaded < compiled:
        rel = "the loaded one is older"
    else:
        rel = "the loaded one is newer, but TensorFlow releases of that age accept only the same major.minor"
    out = (f"In this log cuDNN {_dotted(loaded)} is loaded at run time while TensorFlow was compiled with "
           f"cuDNN {_dotted(compiled)} ({rel}).")
    if loaded_line is not None:
        lineno, ver = loaded_line
        out += f" Line {lineno} reports cuDNN {_dotted(cudnn_version(ver))} loaded."
    return out


_SONAME = re.compile(r"\b(?:lib)?(?P<stem>[A-Za-z][A-Za-z_+-]*?)(?:\.so\.|64_)(?P<ver>\d+(?:\.\d+)*)")


def _library_versions(text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m in _SONAME.finditer(text):
        out.setdefault(m.group("stem").lower(), set()).add(m.group("ver"))
    return out


def _same_version(a: str, b: str) -> bool:
    pa, pb = a.split("."), b.split(".")
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]


def consistent_with_line(text: str, line: str) -> str:
    """``text`` without the sentences that name another version of a library the log line names
    (a libcusolver.so.10 line is not told about libcusolver.so.11)."""
    have = _library_versions(line)
    if not have or (".so." not in text and "64_" not in text):
        return text
    sentences = re.split(r"(?<=[.;])\s+(?=[A-Z(])", text)
    kept = []
    for sentence in sentences:
        other = _library_versions(sentence)
        clash = any(stem in have and not any(_same_version(v, h) for v in vers for h in have[stem])
                    for stem, vers in other.items())
        if not clash:
            kept.append(sentence)
    return " ".join(kept) if kept else text


# ------------------------------------------------------------------------------------- collecting


def order_key(f: LogFinding) -> tuple[int, int, int, str]:
    """Known problems by rank (root causes before consequences), then unrecognised error lines,
    then information, then harmless lines."""
    if f.unrecognised:
        group = 1
    elif f.problem:
        group = 0
    else:
        group = 2 if f.severity == "info" else 3
    return (group, f.rank, f.line, f.id)


def top_finding(findings: Iterable[LogFinding]) -> LogFinding | None:
    """The finding a summary names: the first known problem, else an unrecognised error line, else
    information, else a harmless line. A "good sign" (info) never wins over an error."""
    return min(findings, key=order_key, default=None)


#: Typographic quotes that copy-paste (word processors, blogs, some IMEs) puts into posted logs.
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"',
                         "\u00a0": " ", "\u2009": " ", "\u202f": " "})
#: ANSI colour / cursor escape sequences of coloured consoles (CSI ... final byte).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-fA-F]+|[a-zA-Z]+);")


def normalize_line(line: str) -> str:
    """A posted log line as the program printed it: HTML entities of scraped pages (``&#39;``, ``&gt;``) decoded,
    typographic quotes and non-breaking spaces made plain, ANSI colour codes removed. Lines without ``&``,
    ESC or non-ASCII characters are returned unchanged (the caller only asks for the others)."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if "&" in line and _ENTITY.search(line):
        line = html.unescape(line)
    if not line.isascii():
        line = line.translate(_QUOTES)
    return line


@record(frozen=False)
class _Collector:
    catalog: Catalog
    facts: Mapping[str, Any] | None
    found: dict[tuple[str, tuple[tuple[str, str], ...]], LogFinding] = field(default_factory=dict)
    #: repeats of a finding after its first line (applied once in result(): replace() is not cheap)
    repeats: dict[tuple[str, tuple[tuple[str, str], ...]], int] = field(default_factory=dict)
    #: context kind -> (line number, groups, the generic finding its line would get when nothing uses it)
    context: dict[str, tuple[int, dict[str, str], LogFinding | None]] = field(default_factory=dict)
    unrecognised_dropped: int = 0

    def feed(self, lineno: int, line: str) -> None:
        if "\r" in line:
            for part in line.split("\r"):
                if part:
                    self._feed(lineno, part)
            return
        self._feed(lineno, line)

    def _feed(self, lineno: int, line: str) -> None:
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS]
        if not line.isascii() or "&" in line or "\x1b" in line:
            line = normalize_line(line)
        known = False
        for e, groups in _match_line(self.catalog, line):
            known = True
            key = (e.id, tuple(sorted(groups.items())))
            if key in self.found:
                self.repeats[key] = self.repeats.get(key, 0) + 1
                continue
            cause = _format(e.cause, groups)
            specific = refine_cause(e, groups, self.facts)
            if specific:
                cause = f"{specific} {cause}"
            self.found[key] = LogFinding(
                id=e.id, severity=e.severity, rank=e.rank, line=lineno, text=_cut(line),
                meaning=consistent_with_line(_format(e.meaning, groups), line),
                cause=consistent_with_line(cause, line),
                fix=consistent_with_line(_format(e.fix, groups), line),
                source=e.source_url or e.source_title or e.source, groups=key[1],
            )
        context_kind = None
        for kind, (needle, rx) in _CONTEXT.items():
            if kind not in self.context and needle in line:
                m = rx.search(line)
                if m:
                    context_kind = kind
                    self.context[kind] = (lineno, m.groupdict(), None)
        if known:
            return
        what = classify_unrecognised(line)
        if what is None:
            return
        generic = _unrecognised_finding(lineno, _cut(line), *what)
        if context_kind is not None:  # reported only if no other finding uses what the line says
            ln, groups, _ = self.context[context_kind]
            self.context[context_kind] = (ln, groups, generic)
            return
        self._add_generic(generic)

    def _add_generic(self, f: LogFinding) -> None:
        key = (f.id, (("key", f.key),))
        if key in self.found:
            self.repeats[key] = self.repeats.get(key, 0) + 1
        elif sum(1 for k in self.found if k[0].startswith("unrecognised.")) >= MAX_UNRECOGNISED:
            self.unrecognised_dropped += 1
        else:
            self.found[key] = f

    def result(self) -> list[LogFinding]:
        counted = [_replace_count(f, f.count + self.repeats[k]) if k in self.repeats else f
                   for k, f in self.found.items()]
        findings, used = _apply_log_context(counted, self.context, self.facts)
        for kind, (_, _, generic) in self.context.items():
            if kind not in used and generic is not None:
                findings.append(generic)
        return sorted(findings, key=order_key)

    def notes(self) -> list[str]:
        if not self.unrecognised_dropped:
            return []
        return [f"{self.unrecognised_dropped} more unrecognised error line(s) are not listed "
                f"(at most {MAX_UNRECOGNISED} distinct ones are)"]


def _cut(line: str) -> str:
    text = line.strip()
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def _apply_log_context(
    findings: list[LogFinding],
    context: Mapping[str, tuple[int, Mapping[str, str], LogFinding | None]],
    facts: Mapping[str, Any] | None,
) -> tuple[list[LogFinding], set[str]]:
    """Causes that use the other lines of the same log; returns the findings and the context used."""
    from tfgpu.core.record import replace

    used: set[str] = set()
    out = []
    hint = context.get("driver_hint")
    loaded = context.get("cudnn_loaded")
    for f in findings:
        if hint is not None and f.line != hint[0] and f.problem and _CUDNN_INIT.search(f.text):
            lineno, groups, _ = hint
            ver = groups.get("ver", "?")
            f = replace(
                f,
                cause=(f"Line {lineno} of this log says \"possibly insufficient driver version: {ver}\": "
                       f"TensorFlow's own diagnosis is that the NVIDIA driver {ver} is too old for the "
                       "CUDA/cuDNN this TensorFlow uses, not that GPU memory ran out."),
                fix=("Upgrade the NVIDIA driver to one that supports this TensorFlow's CUDA (tfgpu doctor "
                     "shows what the installed driver supports), or use a TensorFlow built for an older "
                     "CUDA: tfgpu compat --driver " + ver),
            )
            used.add("driver_hint")
        m = _CUDNN_MISMATCH.search(f.text)
        if m is not None:
            loaded_line = None
            if loaded is not None and loaded[0] != f.line:
                loaded_line = (loaded[0], loaded[1].get("ver", ""))
                used.add("cudnn_loaded")
            f = replace(f, cause=f"{_cudnn_sentence(m, loaded_line)} {f.cause}")
        out.append(f)
    return out, used


def _replace_count(f: LogFinding, count: int) -> LogFinding:
    from tfgpu.core.record import replace

    return replace(f, count=count)


def explain_lines(
    lines: Iterable[str],
    *,
    facts: Mapping[str, Any] | None = None,
    catalog: Catalog | None = None,
) -> list[LogFinding]:
    """Known problems in ``lines``, most important first (:func:`order_key`), one per id and groups;
    error-level lines no entry knows as unrecognised.* findings."""
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


def summarize_harmless(findings: Iterable[LogFinding]) -> str | None:
    """One line for the harmless findings (people worry about them; they need nothing)."""
    harmless = [f for f in findings if f.harmless]
    if not harmless:
        return None
    total = sum(f.count for f in harmless)
    ids = ", ".join(dict.fromkeys(f.id.removeprefix("harmless.") for f in harmless))
    return f"{total} harmless line(s) ({ids}): nothing to fix"
