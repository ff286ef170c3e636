"""Compose files as `tfgpu lint` reads them: YAML loaded with bounds (size, aliases, depth), and each service's
GPU access (device requests, runtime, NVIDIA_VISIBLE_DEVICES)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfgpu.core.yamlload import MAX_ALIASES as MAX_ALIASES
from tfgpu.core.yamlload import MAX_YAML_DEPTH as MAX_YAML_DEPTH
from tfgpu.core.yamlload import load_yaml_bounded as load_yaml_bounded

COMPOSE_DOCS = "https://docs.docker.com/compose/how-tos/gpu-support/"


def _env_items(env: Any) -> list[tuple[str, str]]:
    if isinstance(env, Mapping):  # `NAME:` with no value passes the host's value through, as above
        return [(str(k), str(v)) for k, v in env.items() if v is not None]
    if isinstance(env, list):
        out = []
        for item in env:
            k, sep, v = str(item).partition("=")
            if sep:  # `- NAME` alone passes the host's value through: unknown here, never "empty"
                out.append((k, v))
        return out
    return []
