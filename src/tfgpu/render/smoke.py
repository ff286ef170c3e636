"""The smoke report for a person: what TensorFlow is, which GPUs it sees, each op's device and time, the CUDA
libraries it loaded, and what its log says (`tfgpu smoke`, `tfgpu create`'s last step, `tfgpu.smoke()`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from tfgpu.verify.runner import SmokeReport


def _fmt_s(value: object) -> str:
    return f"{value:.4g} s" if isinstance(value, (int, float)) else "-"


def render_report(report: SmokeReport, *, allow_cpu: bool = False, file: TextIO | None = None,
                  style: bool | None = None) -> None:
    """The smoke report for a person (on stdout, or ``file``; ``style`` as tfgpu.render.output.console takes it)."""
    from rich.table import Table

    from tfgpu.render import output
    from tfgpu.render.findings import render_findings

    console = output.fitted_console(file=file, style=style)  # a pipe: no wrapping, no cell cut
    bi = report.build_info
    console.print(output.line(("TensorFlow", "bold"), f" {report.tf_version or '-'}"
                              f"  python {report.python_version or '?'} ({report.python})"))
    if bi:
        built = ", ".join(f"{k}={bi[k]}" for k in ("is_cuda_build", "cuda_version", "cudnn_version",
                                                     "cuda_compute_capabilities") if k in bi)
        console.print(output.line(f"  build: {built or '-'}"))
    if report.tf_ok:
        gpus = ", ".join(str(g.get("name")) + (f" {g['details']}" if g.get("details") else "")
                         for g in report.gpus) or "none"
        console.print(output.line(f"  GPUs TensorFlow sees: {gpus}"))
    if report.ops:
        table = Table(expand=False)
        for col in ("op", "result", "device", "time", "error / reason"):
            table.add_column(col)
        for op in report.ops:
            mark = {"pass": ("✓ pass", "green") if op.on_gpu else ("! cpu", "yellow"),
                    "fail": ("✗ fail", "red"), "skip": ("- skip", "dim")}.get(op.status, (op.status, ""))
            detail = op.error or op.reason or ""
            table.add_row(output.line(op.name), output.line(mark), output.line(op.device or "-"),
                          _fmt_s(op.seconds), output.line(detail.splitlines()[0][:160] if detail else ""))
        output.print_table(console, table)
    libs = report.libraries.get("loaded") or []
    if libs:
        names = ", ".join(str(lib.get("name")) for lib in libs if isinstance(lib, dict))
        console.print(output.line(f"  CUDA libraries loaded: {names}"))
    if report.benchmark:
        for key, val in report.benchmark.items():
            if isinstance(val, dict) and val.get("speedup"):
                console.print(output.line(f"  benchmark {key}: CPU {_fmt_s(val['cpu_seconds'])}, GPU "
                                          f"{_fmt_s(val['gpu_seconds'])}: GPU is {val['speedup']:.1f}x faster"))
            elif isinstance(val, dict):
                console.print(output.line(f"  benchmark {key}: {val.get('error') or val}"))
            else:
                console.print(output.line(f"  benchmark: {val}"))
    serious = [f for f in report.findings if not f.harmless]
    if serious or report.notes:
        render_findings(report.findings, notes=report.notes, title="What TensorFlow's log says:", file=file,
                        style=style)
    if report.error and report.log_tail:
        console.print(output.line(("last lines of the log:", "dim")))
        for text in report.log_tail[-10:]:
            console.print(output.line((f"  {text}", "dim")))
    colour = "green" if report.passed(allow_cpu) else "red"
    console.print(output.line((report.summary(allow_cpu), f"bold {colour}")))
