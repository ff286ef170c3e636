"""CLI commands, one module each. Importing them must stay cheap: heavy imports go inside functions."""

from __future__ import annotations

import importlib

import typer

#: Modules under tfgpu.cli.commands, in the order `tfgpu --help` lists them. Each has `register(app)`.
COMMANDS = ("doctor", "fix", "compat", "plan", "create", "envs", "use", "lock", "smoke", "explain", "fleet", "lint", "ci",
            "kb")


def register_all(app: typer.Typer) -> None:
    for name in COMMANDS:
        module = importlib.import_module(f"tfgpu.cli.commands.{name}")
        module.register(app)
