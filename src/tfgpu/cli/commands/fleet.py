"""`tfgpu fleet`: merge the doctor reports of many machines; print the per-node runs for Slurm, Kubernetes
and Ansible (tfgpu prints what to run; it never runs sbatch, kubectl or ansible itself)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from tfgpu.cli.options import typer_option

fleet_app = typer.Typer(
    name="fleet", no_args_is_help=True, add_completion=False,
    help="Preflight a whole cluster: merge per-node doctor reports; print the Slurm/Kubernetes/Ansible runs.",
)

TF_HELP = "TensorFlow: a release (2.15.1), a series (2.15) or `latest`."
_REPORTS = typer.Argument(..., metavar="REPORT...", help="Report files, directories of *.json, or - for standard input.")


def _merged(reports: list[str], tf: str | None) -> dict[str, Any]:
    """The fleet document of these reports (judged in worker processes where that pays)."""
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.tools.fleet import merge as fleet_merge
    from tfgpu.tools.fleet.judging import default_workers

    fleet = fleet_merge.merge(reports, kb=load_kb(), tf=tf, stdin=sys.stdin, workers=default_workers())
    return fleet_merge.fleet_document(fleet)


def _skipped(doc: dict[str, Any]) -> None:
    from tfgpu.core.errors import error_line

    for p in doc["problems"]:
        error_line(f"skipped {p['source']}: {p['reason']}")


@fleet_app.command("merge")
def merge(
    reports: list[str] = _REPORTS,
    tf: Optional[str] = typer_option("tf", help=TF_HELP + " Exit 1 unless usable on every node."),
    json_out: bool = typer.Option(False, "--json", help="Print the versioned JSON document (tfgpu.fleet/1)."),
    html_file: Optional[str] = typer.Option(None, "--html", metavar="FILE",
                                            help="Also write one self-contained HTML page."),
    since: Optional[str] = typer.Option(None, "--since", metavar="FILE",
                                        help="An earlier `fleet merge --json`: the page gets a section on what "
                                             "changed since (as `tfgpu fleet diff`)."),
) -> int:
    """Merge `tfgpu doctor --json` reports: a node x TensorFlow-series matrix, identical machines grouped,
    outliers and what differs, and the newest release usable everywhere.

    Exit 0 report produced; 1 with --tf when X is not usable on every node; 2 on bad input (the other
    reports are still merged)."""
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.render import output
    from tfgpu.tools.fleet import merge as fleet_merge
    from tfgpu.tools.fleet import render
    from tfgpu.tools.fleet.diff import fleet_diff, load_fleet_document

    html_path = _html_target(html_file) if html_file else None
    old = load_fleet_document(since) if since else None
    doc = _merged(reports, tf)
    if html_path is not None:
        drift = fleet_diff(old, doc, load_kb()) if old is not None else None
        _write_text(html_path, render.render_html(doc, drift=drift))
    if json_out:
        output.write_json(doc, ensure_ascii=False)
    else:
        render.render_human(doc, sys.stdout)
    if doc["problems"] and json_out:
        _skipped(doc)
    return fleet_merge.exit_code(doc)


@fleet_app.command("diff")
def diff(
    old: str = typer.Argument(..., metavar="OLD.json", help="An earlier `tfgpu fleet merge --json`."),
    new: str = typer.Argument(..., metavar="NEW.json", help="A later one."),
    json_out: bool = typer.Option(False, "--json", help="Print the versioned JSON document (tfgpu.fleet-diff/1)."),
) -> int:
    """Which nodes changed driver, CUDA, verdict or ready releases between two merges (and which came or went).

    Exit 0 nothing changed; 1 some node changed, came or went; 2 on bad input."""
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.render import output
    from tfgpu.tools.fleet.diff import fleet_diff, load_fleet_document, render_text

    drift = fleet_diff(load_fleet_document(old), load_fleet_document(new), load_kb())
    if json_out:
        output.write_json(drift, ensure_ascii=False)
    else:
        for text in render_text(drift):
            output.console().print(output.line(text))
    return 1 if drift["changed"] or drift["added"] or drift["removed"] else 0


@fleet_app.command("nodes")
def nodes(
    reports: list[str] = _REPORTS,
    tf: Optional[str] = typer_option("tf", help=TF_HELP + " The verdict of each node is X's."),
    json_out: bool = typer.Option(False, "--json",
                                  help="Print the versioned JSON document (tfgpu.fleet-nodes/1): each node's result."),
    ansible_facts: bool = typer.Option(False, "--ansible-facts",
                                       help="Print {host: facts} as JSON: tfgpu_verdict, tfgpu_tf_ready, "
                                            "tfgpu_usable."),
    slurm_features: bool = typer.Option(False, "--slurm-features",
                                        help="Print `scontrol update NodeName=... AvailableFeatures=...` lines."),
    sinfo: Optional[str] = typer.Option(None, "--sinfo", metavar="FILE",
                                        help="With --slurm-features: `sinfo -h -N -o '%N %f'` output, the "
                                             "features each node has now (kept)."),
) -> int:
    """Each node's verdict and the newest TensorFlow series usable on it, in the scheduler's terms.

    Exit 0; 2 on bad input (the other reports are still used)."""
    from tfgpu.core.errors import UsageError
    from tfgpu.render import output
    from tfgpu.tools.fleet import nodes as fleet_nodes

    if json_out + ansible_facts + slurm_features > 1:
        msg = "give one of --json, --ansible-facts, --slurm-features"
        raise UsageError(msg)
    current = fleet_nodes.parse_sinfo(_read_small(sinfo, "--sinfo")) if sinfo else {}
    doc = _merged(reports, tf)
    results = fleet_nodes.node_results(doc)
    if json_out:
        output.write_json({"schema": "tfgpu.fleet-nodes/1", "tf": tf, "nodes": {r.node: r.to_json() for r in results}},
                          ensure_ascii=False)
    elif ansible_facts:
        output.write_json(fleet_nodes.ansible_facts(results), ensure_ascii=False)
    elif slurm_features:
        output.write_document("".join(f"{line}\n" for line in fleet_nodes.slurm_feature_lines(results, current)))
    else:
        for r in results:
            output.console().print(output.line(f"{r.node}: {r.verdict}, newest usable {r.tf_ready or 'none'} "
                                               f"({r.group})"))
    _skipped(doc)
    return 2 if doc["problems"] else 0


def _read_small(path: str, flag: str) -> str:
    """A small text file given on the command line (bounded; UsageError when it cannot be read)."""
    from tfgpu.core.errors import UsageError

    try:
        with Path(path).open("rb") as fh:
            return fh.read(16 * 1024 * 1024).decode("utf-8", "replace")
    except OSError as exc:
        msg = f"{flag} {path}: {exc.strerror or exc}"
        raise UsageError(msg) from None


@fleet_app.command("label")
def label(
    report: str = typer.Option(..., "--report", metavar="FILE", help="This node's `tfgpu doctor --json` report."),
    node: Optional[str] = typer.Option(None, "--node", metavar="NAME",
                                       help="The node to label (default: $NODE_NAME, which the DaemonSet sets)."),
    tf: Optional[str] = typer_option("tf", help=TF_HELP + " tfgpu.io/verdict is X's."),
    print_only: bool = typer.Option(False, "--print-only", help="Print the label patch; do not send it."),
) -> int:
    """Set this node's labels tfgpu.io/verdict and tfgpu.io/tf-ready (run by the pods of `tfgpu fleet k8s
    --label`, with their service account). The report is judged here, as `fleet merge` judges it."""
    import os

    from tfgpu.core.errors import UsageError
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.render import output
    from tfgpu.tools.fleet import kube

    name = node or os.environ.get("NODE_NAME")
    if not name:
        msg = "which node? give --node NAME (the DaemonSet sets NODE_NAME)"
        raise UsageError(msg)
    labels = kube.node_labels_from_report(report, kb=load_kb(), tf=tf)
    if print_only:
        output.write_document(kube.label_patch(labels).decode() + "\n")
        return 0
    token, ca = kube.service_account_token()
    got = kube.patch_node_labels(name, labels, api=kube.in_cluster_api(), token=token, ca_file=ca)
    shown = ", ".join(f"{k}={v}" for k, v in sorted(got.items()))
    output.console().print(output.line(f"labelled node {name}: {shown}"))
    return 0


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
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", metavar="N",
                                                help="Ask for the node's N GPUs (--gpus-per-node=N), so that "
                                                     "the doctor sees them where cgroups constrain devices."),
    features: bool = typer.Option(False, "--features",
                                  help="Also write features.sh: `scontrol update NodeName=... "
                                       "AvailableFeatures=...` lines tagging each node with the usable series."),
    time: str = typer.Option("00:10:00", "--time", metavar="HH:MM:SS", help="The job's time limit."),
) -> int:
    """Print an sbatch script: `tfgpu doctor --json --redact` once per node (srun --ntasks-per-node=1),
    one report per node in a directory, then `tfgpu fleet merge` over it."""
    from tfgpu.render import output
    from tfgpu.tools.fleet.engines import slurm_script

    output.write_document(slurm_script(nodes=nodes, nodelist=nodelist, partition=partition, tf=tf, gres=gres,
                                       time=time, gpus_per_node=gpus_per_node, features=features))
    return 0


@fleet_app.command("k8s")
def k8s(
    namespace: str = typer.Option("default", "--namespace", metavar="NAME", help="The Kubernetes namespace."),
    image: Optional[str] = typer_option(
        "image", help="The container image to use: one with tfgpu (default: python:3.12, tfgpu installed at start)."),
    tf: Optional[str] = typer_option("tf", help=TF_HELP + " The merge judges it on every node."),
    label: bool = typer.Option(False, "--label",
                               help="Each pod labels its node tfgpu.io/verdict and tfgpu.io/tf-ready (with RBAC "
                                    "and an admission policy that allow only its own node; Kubernetes >= 1.30)."),
    runtime_class: str = typer.Option("nvidia", "--runtime-class", metavar="NAME",
                                      help="The pods' RuntimeClass (the GPU Operator's is nvidia; '' for none "
                                           "where the NVIDIA runtime is the default)."),
) -> int:
    """Print a Kubernetes manifest: a DaemonSet on every GPU node that prints its doctor report, and the
    kubectl commands that collect the reports into `tfgpu fleet merge`. It requests no GPU and sees them
    all (NVIDIA_VISIBLE_DEVICES=all)."""
    from tfgpu.render import output
    from tfgpu.tools.fleet.engines import k8s_manifest

    output.write_document(k8s_manifest(namespace=namespace, image=image, tf=tf, label=label,
                                       runtime_class=runtime_class or None))
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
