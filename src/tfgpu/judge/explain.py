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

import functools
import html
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tfgpu.core.record import field, record
from tfgpu.judge.explain_catalog import _WORD, Catalog, Entry, _format, load_catalog
from tfgpu.judge.explain_refine import (
    _CONTEXT,
    _CUDNN_INIT,
    _CUDNN_MISMATCH,
    _cudnn_sentence,
    consistent_with_line,
    fill_versions,
    refine_cause,
)
from tfgpu.judge.explain_trigger import Clause, trigger_patterns

SCHEMA = "tfgpu.explain/1"

#: Lines longer than this are cut before matching (a binary file may have no newline at all).
MAX_LINE_CHARS = 8192
#: A finding's ``text`` keeps this many characters of its line.
TEXT_CHARS = 300
#: At most this many distinct unrecognised lines become findings (the rest are counted in a note).
MAX_UNRECOGNISED = 20
#: Rank of the generic unrecognised.* findings: after every catalog problem, before info and harmless ones.
UNRECOGNISED_RANK = 200


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
        from tfgpu.judge.explain_group import group_findings

        top = top_finding(self.findings)
        groups = group_findings(self.findings)
        number = {id(f): n for n, g in enumerate(groups, 1) for f in g.members}
        return {
            "schema": SCHEMA,
            "input": {"name": self.name, "lines": self.lines, "bytes": self.bytes_read},
            "summary": top.id if top is not None else None,
            "findings": [{**f.to_json(), "group": number[id(f)]} for f in self.findings],
            "groups": [g.to_json(n) for n, g in enumerate(groups, 1)],
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------------------- catalog


# ------------------------------------------------------------------------------- facts refinement


# -------------------------------------------------------------------------------------- matching


def _match_line(catalog: Catalog, line: str) -> list[tuple[Entry, dict[str, str], int]]:
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
                found.append((e, {k: v for k, v in m.groupdict().items() if v is not None}, m.start()))
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
#: An error line of another tool, at the start of its line: LLVM's abort (``LLVM ERROR: ...``, e.g. XLA compiling for
#: a GPU its PTX does not know), pip's ``ERROR: ...`` and uv's ``error: ...`` (resolver and install failures).
_TOOL_ERROR = re.compile(r"(?P<tool>LLVM ERROR|ERROR|error):\s+(?P<msg>\S.*)")
_NVRM_BAD = re.compile(r"(?i)\bxid\b|fail|error|mismatch|fallen off|not responding|unable|cannot|\binvalid\b")
#: Kinds of unrecognised lines, most telling first (their findings are ordered so: a CUDA error code
#: says more than the TensorFlow line around it).
_KINDS = {
    "cuda_error": "CUDA / cuDNN / cuBLAS / NCCL error code",
    "nvrm": "NVIDIA kernel driver (NVRM) message",
    "check_failed": "failed internal check (the process aborts here)",
    "exception": "Python exception",
    "tool_error": "{level} line of another tool (LLVM, pip, uv)",
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
    if line[:1] in "ELe" and ("ERROR" in line or "error:" in line):
        m = _TOOL_ERROR.match(line.rstrip())
        if m:
            tool = m.group("tool")
            return "tool_error", "fatal" if tool == "LLVM ERROR" else "error", _search_key(f"{tool}: {m.group('msg')}")
    if tf and level:
        return "tf_log", level, _search_key(tf.group("msg")) or tf.group("src")
    return None


#: What a line must contain for the engine itself to act on it, whatever the catalog knows: a word of
#: classify_unrecognised (its exceptions, CUDA codes, NVRM and Check failed lines), a TensorFlow E/F line, a fact of
#: _CONTEXT, or what normalize_line changes (an entity, an escape sequence, a typographic quote). With the catalog's
#: literals this makes the triggers of :func:`line_triggers`; keep it in step with those functions (a test checks it on
#: every real line of the repository).
_ENGINE_LITERALS = ("NVRM", "Check failed", "CUDA_ERROR_", "CUDNN_STATUS_", "CUBLAS_STATUS_", "CUresult(",
                    "UNKNOWN ERROR (", "Error", "Exception", "Failure", "NCCL error", "NCCL failure", "ERROR:",
                    *(needle for needle, _ in _CONTEXT.values()))
_ENGINE_REGEXES = (r"E(?:\d{4} \d|\s+[^\s\]]+\.(?:cc|cpp|cu|h|c|py):\d)", r"F(?:\d{4} \d|\s+[^\s\]]+\.(?:cc|cpp|cu|h|c|py):\d)",
                   r"&(?:#|[a-zA-Z]+;)", "\x1b", "\nerror:", *(re.escape(c) for c in "\u2018\u2019\u201a\u201c\u201d\u201e\u00a0\u2009\u202f"))


@functools.lru_cache(maxsize=8)
def _triggers_for(clauses: tuple[tuple[Clause, ...], ...]) -> tuple[re.Pattern[str], ...]:
    engine = tuple((((text, False),),) for text in _ENGINE_LITERALS)
    return trigger_patterns((*clauses, *engine), _ENGINE_REGEXES)


def line_triggers(catalog: Catalog) -> tuple[re.Pattern[str], ...] | None:
    """Regexes that together find every line of a log that can give a finding with ``catalog`` (None when an entry
    has no literal to find it by, and every line must be tried). Each starts with one literal character."""
    return None if catalog.untriggered else _triggers_for(catalog.clauses)


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


#: At most this many analysed lines are remembered (then forgotten all at once), each at most CACHED_CHARS long.
ANALYSES_KEPT = 4096
CACHED_CHARS = 600
#: The time stamp a log line starts with: ``2021-10-16 14:56:09.420644: `` (TensorFlow <= 2.15, also with ``T`` and a
#: zone) or the absl header ``I0000 00:00:1738697930.202924    7665 `` (TensorFlow >= 2.16; the level letter stays).
_STAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?:? "
                    r"|(?P<lvl>[IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ ")


def _stamp_key(line: str) -> tuple[str | None, int]:
    """(the key a line's analysis is remembered by, the length of the time stamp it drops); (None, 0) for a line too
    long to remember. Lines that differ only in their time stamps have the same key."""
    if len(line) > CACHED_CHARS:
        return None, 0
    if line[26:28] == ": " and line[4:5] == "-" and line[:4].isdigit():  # the usual one, without a regex
        return "\0" + line[28:], 28
    m = _STAMP.match(line) if line[1:2].isdigit() else None
    if m is None:
        return line, 0
    return (m.group("lvl") or "") + "\0" + line[m.end():], m.end()


@record
class _Analysis:
    """What one line gives, whatever came before it: catalog matches (entry, groups, finding key), the context facts
    it states, its unrecognised kind, and where the first of those begins in the line."""

    matches: tuple[tuple[Entry, dict[str, str], tuple[str, tuple[tuple[str, str], ...]]], ...]
    context: tuple[tuple[str, dict[str, str]], ...]
    what: tuple[str, str, str] | None
    start: int
    #: the finding keys of the matches; quiet: the line states no context fact
    keys: frozenset[tuple[str, tuple[tuple[str, str], ...]]] = frozenset()
    quiet: bool = False


def _analyse(catalog: Catalog, line: str) -> _Analysis:
    start = len(line)
    matches = []
    for e, groups, at in _match_line(catalog, line):
        matches.append((e, groups, (e.id, tuple(sorted(groups.items())))))
        start = min(start, at)
    context = []
    for kind, (needle, rx) in _CONTEXT.items():
        if needle in line:
            m = rx.search(line)
            if m:
                context.append((kind, m.groupdict()))
                start = min(start, m.start())
    # the kind of an unrecognised line and its key come from the message after any time stamp (an absl header's
    # level letter is part of the remembered key)
    what = None if matches else classify_unrecognised(line)
    return _Analysis(tuple(matches), tuple(context), what, start, frozenset(m[2] for m in matches),
                     bool(matches) and not context)


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
    #: what recent lines gave, by the line without its time stamp (a log repeats its messages)
    analyses: dict[str, _Analysis] = field(default_factory=dict)

    def feed(self, lineno: int, line: str) -> None:
        if "\r" in line:
            for part in line.split("\r"):
                if part:
                    self._feed(lineno, part)
            return
        self._feed(lineno, line)

    def feed_segment(self, lineno: int, line: str) -> None:
        """One segment of a line (no carriage return in it)."""
        self._feed(lineno, line)

    def _feed(self, lineno: int, line: str) -> None:
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS]
        if not line.isascii() or "&" in line or "\x1b" in line:
            line = normalize_line(line)
        key, skip = _stamp_key(line)
        seen = self.analyses.get(key) if key is not None else None
        if seen is None:
            seen = _analyse(self.catalog, line)
            if key is not None and seen.start >= skip:  # nothing it found depends on the time stamp
                if len(self.analyses) >= ANALYSES_KEPT:
                    self.analyses.clear()
                self.analyses[key] = seen
        self._apply(lineno, line, seen)

    def _apply(self, lineno: int, line: str, seen: _Analysis) -> None:
        if seen.quiet and seen.keys <= self.found.keys():  # a known line again: only counted
            for key in seen.keys:
                self.repeats[key] = self.repeats.get(key, 0) + 1
            return
        for e, groups, key in seen.matches:
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
                fix=consistent_with_line(fill_versions(_format(e.fix, groups), groups.get("lib", "")), line),
                source=e.source_url or e.source_title or e.source, groups=key[1],
            )
        context_kind = None
        for kind, groups in seen.context:
            if kind not in self.context:
                context_kind = kind
                self.context[kind] = (lineno, groups, None)
        if seen.matches or seen.what is None:
            return
        if context_kind is None:
            gkey = (f"unrecognised.{seen.what[0]}", (("key", seen.what[2]),))
            if gkey in self.found:  # a repeat: no finding to build
                self.repeats[gkey] = self.repeats.get(gkey, 0) + 1
                return
        generic = _unrecognised_finding(lineno, _cut(line), *seen.what)
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

def summarize_harmless(findings: Iterable[LogFinding]) -> str | None:
    """One line for the harmless findings (people worry about them; they need nothing)."""
    harmless = [f for f in findings if f.harmless]
    if not harmless:
        return None
    total = sum(f.count for f in harmless)
    ids = ", ".join(dict.fromkeys(f.id.removeprefix("harmless.") for f in harmless))
    return f"{total} harmless line(s) ({ids}): nothing to fix"
