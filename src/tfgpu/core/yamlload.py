"""YAML someone else wrote (a compose file, a conda lock): PyYAML's safe loader with bounds on aliases and
depth, every failure of the loader (a malformed document, a number too long for ``int``, a timestamp that is
no date) one InputError. PyYAML is imported only when a document is read."""

from __future__ import annotations

from typing import Any

from tfgpu.core.errors import InputError

#: Aliases a document may use: a handful in a real file, thousands in an alias bomb.
MAX_ALIASES = 64

#: A compose file or a lock nests a handful of levels; PyYAML's parser slows down badly on deep flow nesting (a
#: 200 KB file of ``[[[[...`` ran for minutes), so the event scan stops far before that.
MAX_YAML_DEPTH = 64


def _loader() -> Any:
    import yaml

    # libyaml's parser when PyYAML was built with it (the wheels are): the same document model, ~10x faster
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_bounded(text: str) -> Any:
    """PyYAML's safe loader, refusing alias bombs (more than :data:`MAX_ALIASES` aliases) and deep
    nesting (more than :data:`MAX_YAML_DEPTH` levels) before building. InputError (one line) for anything
    the loader cannot build: invalid YAML, python tags, an integer of more digits than Python converts,
    a ``!!timestamp`` that is no date."""
    import yaml

    loader = _loader()
    aliases = 0
    depth = 0
    try:
        for event in yaml.parse(text, Loader=loader):
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
        return yaml.load(text, Loader=loader)  # the safe loader (C or Python): no python tags
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        # libyaml stops deep nesting itself (its own limit, reached before the scan's count when it is lower)
        too_deep = "flow level" in first or "depth" in first
        msg = f"nested more than {MAX_YAML_DEPTH} levels deep" if too_deep else f"not valid YAML: {first}"
        raise InputError(msg) from None
    except (ValueError, OverflowError, TypeError, RecursionError) as exc:
        # the constructors: int("5" * 5000) past Python's digit limit, date(2001, 13, 45), a huge float exponent
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        msg = f"a YAML value cannot be read: {first[:200]}"
        raise InputError(msg) from None
