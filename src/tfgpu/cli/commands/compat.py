"""`tfgpu compat`: query the knowledge base (TensorFlow x OS -> Python, CUDA, cuDNN, driver, GPU code, recipes)."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from tfgpu.cli.options import typer_option


def compat(
    os_name: Optional[str] = typer_option("os", help="Assume this OS: linux, windows or macos (WSL2 is linux); "
                                                     "only its rows."),
    tf: Optional[str] = typer_option(
        "tf", help="TensorFlow: a release (2.2.0), a series (2.2: every release of it) or a major (2)."),
    cuda: Optional[str] = typer.Option(None, "--cuda", metavar="VERSION",
                                       help="Only releases built with this CUDA, e.g. 11.2."),
    driver: Optional[str] = typer_option(
        "driver", help="Assume this NVIDIA driver version: say which releases it can run, and why not the others, "
                       "e.g. 470.82."),
    python: Optional[str] = typer_option("python", help="Python X.Y of the environment: only releases for it, e.g. 3.12."),
    json_out: bool = typer_option("json", help="Print the versioned JSON document (tfgpu.compat/1)."),
) -> int:
    """The compatibility table, newest first: Python, CUDA, cuDNN, minimum driver, GPU code, install recipes.

    Exit 0 with an answer; 1 when nothing matches (or --driver runs none of the rows); 2 on a bad value.
    """

    from tfgpu.kb.knowledge import load_kb
    from tfgpu.render import output
    from tfgpu.tools import compat as compat_query

    query = compat_query.Query(os=os_name, tf=tf, cuda=cuda, driver=driver, python=python)
    doc = compat_query.compat_document(load_kb(), query)
    if json_out:
        output.write_json(doc, ensure_ascii=False)
    else:
        compat_query.render_human(doc, sys.stdout)
    return compat_query.exit_code(doc)


def register(app: typer.Typer) -> None:
    app.command("compat")(compat)
