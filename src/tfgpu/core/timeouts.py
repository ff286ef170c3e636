"""--timeout's one check, in a module of its own with no imports: the doctor's fast path (tfgpu.cli.options)
uses it before its probe child forks."""

from __future__ import annotations

#: The longest wait tfgpu accepts (a week): more is a typo, and inf/1e308 overflow every clock.
MAX_TIMEOUT = 7 * 24 * 3600.0


def check_timeout(value: float | None, what: str = "--timeout") -> float | None:
    """A timeout in seconds: finite, > 0 and at most a week; UsageError (rc 2) otherwise."""
    if value is None:
        return None
    if not (value > 0 and value <= MAX_TIMEOUT):  # also false for NaN
        from tfgpu.core.errors import UsageError

        msg = f"{what} {value:g} is not a number of seconds between 0 and {MAX_TIMEOUT:g}"
        raise UsageError(msg, hint=f"e.g. {what} 600")
    return float(value)
