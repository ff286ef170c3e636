"""A plan as human text: what `tfgpu plan` prints and `tfgpu create` shows before it asks."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tfgpu.plan.model import Plan


def print_plan(plan: Plan, *, verbose: bool = False) -> None:
    """The plan as human text (tfgpu.render.output: styles on a terminal only, every value terminal-safe). Notes,
    caveats and the backend's reason as far as the reader must act on them (tfgpu.render.output.brief); with
    ``verbose`` in full (`plan --json` has them all)."""
    from tfgpu.core.process import shown
    from tfgpu.render import output

    def said(text: str) -> str:
        return text if verbose else output.brief(text)

    lines: list[tuple[output.Piece, ...]] = [
        ((f"TensorFlow {plan.tf}", "bold"), " with ", (str(plan.tool), "bold"),
         f" ({plan.backend}), recipe {plan.recipe_id}"),
        (f"  why this backend: {said(plan.backend_reason)}",),
        (f"  environment: {plan.prefix}" + (f"  (Python {plan.python})" if plan.python else ""),)]
    for i, step in enumerate(plan.steps, 1):
        lines.append((f"  {i}. {step.why}",))
        if step.kind == "run":
            env = " ".join(f"{k}={v}" for k, v in step.env)
            lines.append(("     ", ("$", "dim"), f" {env + ' ' if env else ''}{shown(step.argv)}"))
        else:
            lines.append(("     ", ("append to" if step.kind == "append-file" else "write", "dim"),
                          f" {step.path or ''}"))
    lines += [(f"  activation sets {k}={v}",) for k, v in plan.env_vars.items()]
    blockers = {f"{b.summary} — fix: {b.fix}" if b.fix else b.summary for b in plan.blockers}
    notes = [n for n in plan.notes if n not in blockers]  # a container plan's notes repeat its ✗ items
    lines += [("  ", ("note", "yellow"), f": {said(n)}") for n in notes]
    if getattr(plan, "verdict", ""):
        colour = {"ready": "green", "caveats": "yellow", "blocked": "red"}.get(plan.verdict, "bold")
        lines.append(("  verdict here: ", (plan.verdict.upper(), colour), " (CPU only)" if plan.cpu else ""))
        lines += [("  ", ("✗", "red"), f" {b.summary}" + (f" (fix: {b.fix})" if b.fix else ""))
                  for b in plan.blockers]
        lines += [("  ", ("!", "yellow"), f" {said(c.summary)}"
                   + (f" (handled: {c.mitigated_by})" if c.mitigated_by else "")) for c in plan.caveats]
    if not verbose and any(said(t) != t for t in (plan.backend_reason, *notes, *(c.summary for c in plan.caveats))):
        lines.append((("  every note in full: --verbose (or --json)", "dim"),))
    output.lines(lines, one_line=True)  # one value per line: a newline in a value is shown escaped, not obeyed
