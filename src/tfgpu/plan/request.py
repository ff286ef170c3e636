"""What to build, as the user asked for it: one record that `tfgpu plan`, `create` and `lock` fill from their
options (tfgpu.cli.options) and pass down, instead of a score of keyword arguments per layer."""

from __future__ import annotations

from tfgpu.core.record import record


@record
class BuildRequest:
    """A request to plan (and maybe build) one environment. ``tf`` is a release, a series or ``latest``
    (tfgpu.kb.versions.Target), or None with ``from_lock``. The config file's choices (channels, the
    preferred backend) are applied by the caller that reads it, with where they came from."""

    tf: str | None = None
    backend: str = "auto"  # tfgpu.backends.names: BACKENDS or CONTAINER_BACKENDS
    name: str | None = None
    prefix: str | None = None
    python: str | None = None  # X.Y
    channels: tuple[str, ...] = ()
    channels_source: str = "--channel"  # or the config file that named them
    prefer: str | None = None  # the config file's [backends] prefer
    prefer_source: str = "config"
    find_links: tuple[str, ...] = ()
    index_url: str | None = None
    offline: bool = False
    cpu: bool = False  # the CPU route: tensorflow(-cpu), no CUDA
    from_lock: str | None = None
    platform: str | None = None  # a conda platform (--from-lock, lock)
    image: str | None = None  # --image REF (container backends)
