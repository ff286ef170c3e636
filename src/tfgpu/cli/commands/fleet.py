"""`tfgpu fleet`: merge the doctor reports of many machines; print the per-node runs for Slurm, Kubernetes
and Ansible (tfgpu prints what to run; it never runs sbatch, kubectl or ansible itself)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from tfgpu.cli.options import typer_option

fleet_app = typer.Typer(
    name="fleet", no_args_is_help=True, add_completion=False,
    help="Preflight a whole cluster: merge per-node doctor reports; print the Slurm/Kubernetes/Ansible runs.",
)

TF_HELP = "TensorFlow: a release (2.15.1), a series (2.15) or `latest`."
_REPORTS = typer.Argument(..., metavar="REPORT...", help="Report files, directories of *.json, or - for standard input.")


@fleet_app.command("merge")
def merge(
    reports: list[str] = _REPORTS,
    tf: Optional[str] = typer_option("tf", help=TF_HELP + " Exit 1 unless usable on every node."),
    json_out: bool = typer.Option(False, "--json", help="Print the versioned JSON document (tfgpu.fleet/1)."),
    html_file: Optional[str] = typer.Option(None, "--html", metavar="FILE",
                                            help="Also write one self-contained HTML page."),
) -> int:
    """Merge `tfgpu doctor --json` reports: a node x TensorFlow-series matrix, identical machines grouped,
    outliers and what differs, and the newest release usable everywhere.

    Exit 0 report produced; 1 with --tf when X is not usable on every node; 2 on bad input (the other
    reports are still merged)."""

    from tfgpu.kb.knowledge import load_kb
    from tfgpu.render import output
    from tfgpu.tools.fleet import merge as fleet_merge
    from tfgpu.tools.fleet import render
    from tfgpu.tools.fleet.judging import default_workers

    html_path = _html_target(html_file) if html_file else None
    fleet = fleet_merge.merge(reports, kb=load_kb(), tf=tf, stdin=sys.stdin, workers=default_workers())
    doc = fleet_merge.fleet_document(fleet)
    if html_path is not None:
        _write_text(html_path, render.render_html(doc))
    if json_out:
        output.write_json(doc, ensure_ascii=False)
    else:
        render.render_human(doc, sys.stdout)
    if doc["problems"] and json_out:
        from tfgpu.core.errors import error_line

        for p in doc["problems"]:
            error_line(f"skipped {p['source']}: {p['reason']}")
    return fleet_merge.exit_code(doc)


def _html_target(path: str) -> Path:
    """Refuse, before any work, an --html path that cannot be a new or replaced regular file."""
    from tfgpu.core.errors import UsageError

    p = Path(path)
    if p.exists() and not p.is_file():
        msg = f"--html {path} exists and is not a regular file"
        raise UsageError(msg, hint="give a file name, e.g. --html fleet.html")
    if not p.parent.is_dir():
        msg = f"--html {path}: the directory {p.parent} does not exist"
        raise UsageError(msg)
    return p


def _write_text(p: Path, text: str) -> None:
    """Write a new file under an unpredictable name beside the target and rename it over (never through
    a link planted there); the lockfile writer's mechanism."""
    from tfgpu.backends.lockfiles import write_atomic

    # a lone surrogate from a report (JSON allows "\udcff") cannot be written as UTF-8: shown escaped
    write_atomic(p, text.encode("utf-8", "backslashreplace").decode("utf-8"))


@fleet_app.command("slurm")
def slurm(
    nodes: Optional[int] = typer.Option(None, "--nodes", metavar="N", help="Run on N nodes."),
    nodelist: Optional[str] = typer.Option(None, "--nodelist", metavar="HOSTLIST",
                                           help="Run on these nodes (a Slurm hostlist, e.g. gpu[01-16])."),
    partition: Optional[str] = typer.Option(None, "--partition", metavar="NAME", help="The Slurm partition."),
    tf: Optional[str] = typer_option("tf", help=TF_HELP + " The merge judges it on every node."),
    gres: Optional[str] = typer.Option(None, "--gres", metavar="SPEC",
                                       help="Request GPUs (e.g. gpu:8) where cgroups hide unrequested ones."),
    time: str = typer.Option("00:10:00", "--time", metavar="HH:MM:SS", help="The job's time limit."),
) -> int:
    """Print an sbatch script: `tfgpu doctor --json --redact` once per node (srun --ntasks-per-node=1),
    one report per node in a directory, then `tfgpu fleet merge` over it."""
    from tfgpu.render import output
    from tfgpu.tools.fleet.engines import slurm_script

    output.write_document(slurm_script(nodes=nodes, nodelist=nodelist, partition=partition, tf=tf, gres=gres, time=time))
    return 0


@fleet_app.command("k8s")
def k8s(
    namespace: str = typer.Option("default", "--namespace", metavar="NAME", help="The Kubernetes namespace."),
    image: Optional[str] = typer_option(
        "image", help="The container image to use: one with tfgpu (default: python:3.12, tfgpu installed at start)."),
    tf: Optional[str] = typer_option("tf", help=TF_HELP + " The merge judges it on every node."),
) -> int:
    """Print a Kubernetes manifest: a DaemonSet on every GPU node that prints its doctor report, and the
    kubectl commands that collect the reports into `tfgpu fleet merge`."""
    from tfgpu.render import output
    from tfgpu.tools.fleet.engines import k8s_manifest

    output.write_document(k8s_manifest(namespace=namespace, image=image, tf=tf))
    return 0


@fleet_app.command("ansible")
def ansible(
    hosts: str = typer.Option("gpu", "--hosts", metavar="PATTERN", help="The inventory host pattern."),
    tf: Optional[str] = typer_option("tf", help=TF_HELP + " The play fails unless usable on every host."),
) -> int:
    """Print an Ansible playbook: the doctor on every host over SSH, the reports merged on the controller."""
    from tfgpu.render import output
    from tfgpu.tools.fleet.engines import ansible_playbook

    output.write_document(ansible_playbook(hosts=hosts, tf=tf))
    return 0


def register(app: typer.Typer) -> None:
    app.add_typer(fleet_app, name="fleet")
