"""A step of a plan: a program to run (argv) or a file to write, and why it is there. A module of its own so
that the backends (tfgpu.backends.pip, .conda), which make steps, and the planner, which orders them, do not
import each other."""

from __future__ import annotations

from typing import Any

from tfgpu._record import record


@record
class Step:
    """One step: a program to run (argv) or a file to write, and why it is there."""

    argv: tuple[str, ...]
    why: str
    env: tuple[tuple[str, str], ...] = ()
    kind: str = "run"  # "run" | "write-file" | "append-file"
    path: str | None = None
    content: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "why": self.why}
        if self.kind == "run":
            out["argv"] = list(self.argv)
            out["env"] = dict(self.env)
        else:
            out["path"] = self.path
            out["content"] = self.content
        return out
