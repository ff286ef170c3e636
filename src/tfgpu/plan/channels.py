"""Conda channels a plan uses, and the note Anaconda's channels need (their Terms of Service)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from packaging.version import Version

if TYPE_CHECKING:
    from tfgpu.kb.knowledge import KnowledgeBase


#: Anaconda's Terms of Service cover its own channels (repo.anaconda.com's `defaults` = pkgs/main + pkgs/r,
#: and the `anaconda` channel on anaconda.org); community channels such as conda-forge are free to use.
ANACONDA_TOS_SOURCE = "https://anaconda.com/pricing/terms-of-service-faqs"


def is_anaconda_channel(channel: str, kb: KnowledgeBase) -> bool:
    """A channel covered by Anaconda's Terms of Service (compat/conda.toml anaconda_channels: defaults, anaconda,
    repo.anaconda.com, ...)."""
    c = channel.strip().rstrip("/")
    return c in kb.anaconda_channels or bool(kb.anaconda_url and re.match(kb.anaconda_url, c + "/"))


def anaconda_tos_note(kb: KnowledgeBase, v: Version | None, os_name: str, channels: Sequence[str], *,
                      recipe_id: str = "", recipe_channels: Sequence[str] = ()) -> str:
    """Pure: a note when ``channels`` include Anaconda's, naming the knowledge base's conda-forge alternative."""
    used = [c for c in channels if is_anaconda_channel(c, kb)]
    if not used:
        return ""
    text = (f"{', '.join(used)}: Anaconda's channels are covered by Anaconda's Terms of Service (a paid licence "
            f"for organisations of 200 or more people; {ANACONDA_TOS_SOURCE}); conda-forge has no such terms")
    if "conda-forge" in recipe_channels:
        return text + f"; recipe {recipe_id} itself uses conda-forge: drop the Anaconda channel from --channel / the config"
    if v is None:
        return text + "; tfgpu cannot name a conda-forge alternative without knowing the TensorFlow version"
    alt = [r for r in kb.recipes_for(v, os_name) if r.gpu and "conda-forge" in r.channels and r.id != recipe_id]
    if alt:
        return text + f"; conda-forge alternative for TensorFlow {v}: recipe {alt[0].id} ({alt[0].backend})"
    cf = sorted({r.version for r in kb.conda_packages(None, None, os_name) if r.channel == "conda-forge"
                 and r.version.release[:2] == v.release[:2]})
    if cf:
        return text + (f"; conda-forge has TensorFlow {', '.join(str(x) for x in cf)} in this series "
                       f"(`tfgpu plan --tf {cf[-1]} --backend rattler`)")
    return text + f"; the knowledge base knows no conda-forge alternative for TensorFlow {v}"
