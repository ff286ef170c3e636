"""Compose files as `tfgpu lint` reads them: YAML loaded with bounds (size, aliases, depth), and each service's
GPU access (device requests, runtime, NVIDIA_VISIBLE_DEVICES)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfgpu.core.errors import InputError

MAX_ALIASES = 64


#: A compose file nests a handful of levels; PyYAML's parser slows down badly on deep flow nesting (a
#: 200 KB file of ``[[[[...`` ran for minutes), so the event scan stops far before that.
MAX_YAML_DEPTH = 64


COMPOSE_DOCS = "https://docs.docker.com/compose/how-tos/gpu-support/"


def load_yaml_bounded(text: str) -> Any:
    """PyYAML's safe loader, refusing alias bombs (more than :data:`MAX_ALIASES` aliases) and deep
    nesting (more than :data:`MAX_YAML_DEPTH` levels) before building."""
    import yaml

    aliases = 0
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    msg = f"nested more than {MAX_YAML_DEPTH} levels deep"
                    raise InputError(msg)
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    msg = f"more than {MAX_ALIASES} YAML aliases"
                    raise InputError(msg)
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        msg = f"not valid YAML: {str(exc).splitlines()[0]}"
        raise InputError(msg) from None


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
