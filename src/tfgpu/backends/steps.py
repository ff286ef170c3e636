"""A step, as a record: a program to run (argv) or a file to write, and why it is there. What every runner
produces (tfgpu.backends.pip and .conda, the container runners); tfgpu.plan.model.Plan orders them and
tfgpu.build.execute runs them."""

from __future__ import annotations

from typing import Any

from tfgpu.core.record import record


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
