"""`tfgpu.doctor()`, `tfgpu.explain(text)` and `tfgpu.smoke()`: the CLI's results as Python objects, for Jupyter,
Colab and Kaggle notebooks and for scripts.

Each returns a small result object holding what the command renders -- the typed record (``.result``,
``.report``) and the versioned JSON document (``.document``, the same as ``--json``) -- which shows itself as HTML
in a notebook (``_repr_html_``, every value escaped) and as the command's plain text elsewhere (``str()``,
``repr()``). Errors are raised, never printed: tfgpu.core.errors.UsageError for bad input (the CLI's exit 2),
and so on. Importing this module imports nothing heavy; typer is never imported, rich only when plain text is
asked for.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tfgpu.judge.diagnose import DoctorResult
    from tfgpu.judge.explain import ExplainReport, LogFinding
    from tfgpu.verify.runner import SmokeReport

__all__ = ["DoctorReport", "Explanation", "SmokeResult", "doctor", "explain", "smoke"]


def _overrides(driver: str | None, gpu_cc: str | None, os_name: str | None) -> dict[str, str | None]:
    return {"driver": driver, "gpu_cc": gpu_cc, "os": os_name}


def _facts_path(facts: str | os.PathLike[str] | None) -> str | None:
    return None if facts is None else os.fspath(facts)


class _Shown:
    """Plain text for ``str()`` and ``repr()`` (the command's own output, unstyled), HTML for Jupyter."""

    def _text(self) -> str:
        raise NotImplementedError

    def _repr_html_(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self._text()

    def __repr__(self) -> str:
        return self._text()


@dataclass(frozen=True, repr=False, eq=False)
class DoctorReport(_Shown):
    """What :func:`doctor` found: ``document`` is `tfgpu doctor --json`'s (tfgpu.doctor/1), ``result`` the record it
    was made from (checks, per-release verdicts, the recommendation)."""

    document: dict[str, Any]
    result: DoctorResult = field(repr=False)

    @property
    def exit_code(self) -> int:
        """What `tfgpu doctor` with the same options would exit with: 0 ready (or report made), 1 not ready."""
        return int(self.document["exit_code"])

    @property
    def ok(self) -> bool:
        """True when the command would exit 0 (with tf=: the target runs here)."""
        return self.exit_code == 0

    @property
    def recommendation(self) -> dict[str, Any] | None:
        """The release and backend tfgpu recommends here, with the `tfgpu create` command that builds it."""
        rec = self.document.get("recommendation")
        return dict(rec) if isinstance(rec, dict) else None

    def _text(self) -> str:
        from tfgpu.render.report import render_human

        out = io.StringIO()
        render_human(self.document, out, color=False)
        return out.getvalue()

    def _repr_html_(self) -> str:
        from tfgpu.render.html import doctor_html

        return doctor_html(self.document)


@dataclass(frozen=True, repr=False, eq=False)
class Explanation(_Shown):
    """What :func:`explain` found: ``findings`` most important first; ``document`` is `tfgpu explain --json`'s."""

    report: ExplainReport = field(repr=False)

    @property
    def findings(self) -> tuple[LogFinding, ...]:
        return self.report.findings

    @property
    def document(self) -> dict[str, Any]:
        return self.report.to_json()

    def _text(self) -> str:
        from tfgpu.render.findings import render_findings

        out = io.StringIO()
        name = self.report.name
        render_findings(self.report.findings, notes=self.report.notes, title=f"tfgpu explain: {name}",
                        again=None if name in ("-", "<text>") else name, file=out, style=False)
        return out.getvalue()

    def _repr_html_(self) -> str:
        from tfgpu.render.html import explain_html

        return explain_html(self.document)


@dataclass(frozen=True, repr=False, eq=False)
class SmokeResult(_Shown):
    """What :func:`smoke` found: ``passed`` (every op ran on the GPU, or on the CPU with allow_cpu), ``report`` the
    record, ``document`` `tfgpu smoke --json`'s."""

    report: SmokeReport = field(repr=False)
    allow_cpu: bool = False

    @property
    def passed(self) -> bool:
        return self.report.passed(self.allow_cpu)

    @property
    def document(self) -> dict[str, Any]:
        return self.report.to_json(allow_cpu=self.allow_cpu)

    def _text(self) -> str:
        from tfgpu.render.smoke import render_report

        out = io.StringIO()
        render_report(self.report, allow_cpu=self.allow_cpu, file=out, style=False)
        return out.getvalue()

    def _repr_html_(self) -> str:
        from tfgpu.render.html import smoke_html

        return smoke_html(self.document)


def doctor(tf: str | None = None, *, facts: str | os.PathLike[str] | None = None, backend: str = "auto",
           require_gpu: bool = False, strict: bool = False, driver: str | None = None, gpu_cc: str | None = None,
           os_name: str | None = None, timeout: float | None = None) -> DoctorReport:
    """`tfgpu doctor` for this machine (or the one ``facts`` describes): every check, a verdict per TensorFlow
    series (or for ``tf``: a release "2.21.0", a series "2.21", or "latest"), and the recommendation.

    ``driver``, ``gpu_cc`` and ``os_name`` override what the probes find (as --driver, --gpu-cc, --os). Nothing is
    fetched from the network. Raises tfgpu.core.errors.UsageError for a bad value."""
    from tfgpu.api.doctor import doctor_report

    document, result = doctor_report(tf=tf, facts_file=_facts_path(facts), backend=backend,
                                     require_gpu=require_gpu, strict=strict,
                                     overrides=_overrides(driver, gpu_cc, os_name), timeout=timeout)
    return DoctorReport(document, result)


def explain(text: str | bytes | os.PathLike[str], *, facts: str | os.PathLike[str] | None = None,
            probe: bool = True, driver: str | None = None, gpu_cc: str | None = None,
            os_name: str | None = None) -> Explanation:
    """`tfgpu explain` on a log: ``text`` is the log itself (a str or bytes, e.g. a traceback you copied), or a
    pathlib.Path of a log file. Causes that depend on the machine use this one's facts (``probe=False``: none;
    ``facts``: another machine's)."""
    from tfgpu.facts.gather import machine_facts
    from tfgpu.tools.explain import explain_file, explain_stream

    found, note = machine_facts(_facts_path(facts), probe=probe, overrides=_overrides(driver, gpu_cc, os_name))
    if isinstance(text, os.PathLike):
        report = explain_file(os.fspath(text), facts=found)
    else:
        data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
        report = explain_stream(io.BytesIO(data), name="<text>", facts=found)
    if note and any(not f.harmless for f in report.findings):
        from tfgpu.core.record import replace

        report = replace(report, notes=(*report.notes, note))
    return Explanation(report)


def smoke(python: str | os.PathLike[str] | None = None, *, name: str | None = None,
          prefix: str | os.PathLike[str] | None = None, allow_cpu: bool = False, timeout: float = 600.0,
          benchmark: bool = False, facts: str | os.PathLike[str] | None = None, probe: bool = True) -> SmokeResult:
    """`tfgpu smoke`: run matmul, Conv2D (forward and backward) and an XLA op with TensorFlow, in a child process,
    and say whether they ran on the GPU (and why not). By default with this notebook's own Python (the kernel's
    interpreter): does the TensorFlow you import here use the GPU? ``python`` (X.Y or a path), ``name`` or
    ``prefix`` pick another environment. The kernel's own process never imports TensorFlow for it."""
    from tfgpu.core.timeouts import check_timeout
    from tfgpu.facts.gather import machine_facts
    from tfgpu.verify.runner import resolve_python, run_smoke

    timeout = check_timeout(timeout) or 600.0
    exe = resolve_python(prefix=None if prefix is None else os.fspath(prefix), name=name,
                         python=None if python is None else os.fspath(python))
    found, _ = machine_facts(_facts_path(facts), probe=probe)
    return SmokeResult(run_smoke(exe, timeout=timeout, benchmark=benchmark, facts=found), allow_cpu=allow_cpu)
