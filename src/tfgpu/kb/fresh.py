"""What the knowledge base does not know yet: a TensorFlow release newer than every release it holds is refused
with the knowledge base's date and how to update it, never judged as if it were an older release."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import Version

from tfgpu.core.errors import UsageError

#: How a user gets a newer knowledge base (it ships with tfgpu).
UPDATE_KB = ("update tfgpu for a newer knowledge base: pull and reinstall your checkout, or python3 -m pip install "
             "--upgrade tfgpu; `tfgpu compat` lists the releases it knows")


def newer_release_error(raw: str, wanted: Version, known: Iterable[Version], dated: str) -> UsageError | None:
    """The error for ``raw`` (a release, a series "2.22", a pre-release "2.22.0rc0") when it is newer than every
    release in ``known``; None when the knowledge base knows releases up to or past it."""
    newest = max(known, default=None)
    if newest is None:
        return None
    if len(raw.split(".")) == 2:  # a series: newer when its major.minor is
        if wanted.release[:2] <= newest.release[:2]:
            return None
    elif wanted <= newest or wanted.base_version == str(newest):
        return None
    msg = (f"TensorFlow {raw} is newer than tfgpu's knowledge base (dated {dated}; the newest release it knows is "
           f"{newest}): tfgpu cannot judge it")
    return UsageError(msg, hint=UPDATE_KB)
