"""Environment specs as text: the spec file in TOML or JSON (`tfgpu export`), and what `tfgpu validate` found as
human lines. Every value is escaped for its format: TOML basic strings, JSON, and terminal-safe text."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

FORMATS = ("toml", "json")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
MARK = {"info": ("·", "dim"), "risky": ("!", "yellow"), "blocking": ("✗", "red")}
RESULT = {"matches": ("MATCHES", "bold green"), "compatible": ("COMPATIBLE", "bold green"),
          "risky": ("RISKY", "bold yellow"), "blocked": ("BLOCKED", "bold red")}

HEADER = """\
# A TensorFlow environment spec (tfgpu.envspec/1), written by `tfgpu export`: what this environment is.
# Check another machine or environment against it with `tfgpu validate THIS_FILE` (exit 0: no blocking
# difference, 1: a blocking one, 2: bad input). The ranges under [pins] may be edited: validate reads them.
"""


def toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's for every character but DEL; a lone surrogate (from a facts
    file's JSON) cannot be written in UTF-8 and becomes U+FFFD."""
    return json.dumps(_SURROGATE.sub("\ufffd", text), ensure_ascii=False).replace("\x7f", "\\u007f")


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def _inline(value: Any) -> str:
    """A value as TOML inline text: strings, booleans, integers, arrays and inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(str(k))} = {_inline(v)}" for k, v in value.items()) + " }" if value else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    msg = f"no TOML form for {type(value).__name__}"  # a spec holds no null and no float: a bug
    raise TypeError(msg)


def spec_toml(doc: Mapping[str, Any]) -> str:
    """The spec as TOML: the top-level values first, then one [table] per section, one line per value."""
    lines = [HEADER]
    lines += [f"{_key(k)} = {_inline(v)}" for k, v in doc.items() if not isinstance(v, Mapping)]
    for k, v in doc.items():
        if isinstance(v, Mapping):
            lines.append(f"\n[{_key(k)}]")
            lines += [f"{_key(str(sk))} = {_inline(sv)}" for sk, sv in v.items()]
    return "\n".join(lines) + "\n"


def spec_json(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=True) + "\n"


def spec_text(doc: Mapping[str, Any], fmt: str) -> str:
    return spec_json(doc) if fmt == "json" else spec_toml(doc)


def export_lines(doc: Mapping[str, Any], where: str) -> list[tuple[str, str]]:
    """What `tfgpu export -o FILE` says on stderr: the file, and what it pins."""
    tf = doc.get("tensorflow") or {}
    parts = [f"{tf.get('distribution')} {tf.get('version')}"]
    for key, what in (("cuda", "CUDA"), ("cudnn", "cuDNN")):
        section = doc.get(key) or {}
        if section.get("version") or section.get("build"):
            parts.append(f"{what} {section.get('version') or section.get('build')}")
    if (doc.get("driver") or {}).get("floor"):
        parts.append(f"driver >= {doc['driver']['floor']}")
    if doc.get("python"):
        parts.append(f"Python {doc['python']['version']}")
    out = [(f"wrote {where}: {', '.join(parts)}; {len(doc.get('pins') or {})} pins", "bold")]
    if doc.get("verdict") != "gpu":
        out.append((f"note: here this environment does not use the GPU ({doc.get('summary')}); the spec records it as "
                    "it is", "yellow"))
    return out


def validation_lines(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """`tfgpu validate`'s human text: the result, then each difference (✗ blocking, ! risky, · info) with its fix."""
    word, style = RESULT.get(str(doc.get("result")), (str(doc.get("result")), "bold"))
    counts = doc.get("counts") or {}
    env = doc.get("environment") or {}
    spec_tf = (doc.get("spec") or {}).get("tensorflow") or {}
    out = [(f"{word}: {env.get('prefix')} against {doc.get('spec_file')} ({spec_tf.get('distribution')} "
            f"{spec_tf.get('version')}): {counts.get('blocking', 0)} blocking, {counts.get('risky', 0)} risky, "
            f"{counts.get('info', 0)} informational", style)]
    order = {"blocking": 0, "risky": 1, "info": 2}
    for d in sorted(doc.get("differences") or [], key=lambda d: order.get(str(d.get("severity")), 3)):
        mark, mstyle = MARK.get(str(d.get("severity")), ("?", ""))
        out.append((f"  {mark} {d.get('summary')}  [{d.get('id')}]", mstyle))
        if d.get("fix"):
            out.append((f"      fix: {d['fix']}", "cyan"))
    if not doc.get("differences"):
        out.append(("  ✓ the environment is what the spec says", "green"))
    return out
