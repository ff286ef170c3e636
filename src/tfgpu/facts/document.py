"""Facts documents from files, single-fact overrides, and schema validation (no jsonschema at runtime).

A facts file is how tfgpu analyses a machine it is not on (a user's bug report) and how CI on a
GPU-less runner plans for a GPU target. Overrides (flags, then TFGPU_* environment variables) apply on
top of probing or a file, and the document records which are active (``facts["overrides"]``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, TypedDict, cast

from tfgpu.core.errors import InputError, UsageError

SCHEMA = "tfgpu.facts/1"


class Facts(TypedDict, total=False):
    """The sections of a facts document (tfgpu.facts/1, src/tfgpu/core/schemas/facts.schema.json) that the
    verdict, the chooser and the planner read. Every section may be absent: a facts file from a bug
    report holds what its machine could tell. Sections stay plain JSON objects (their fields are the
    schema's); this names which sections exist and what kind of value each one is."""

    schema: str
    platform: dict[str, Any]
    cpu: dict[str, Any]
    python: dict[str, Any] | None
    driver: dict[str, Any] | None
    gpus: list[dict[str, Any]] | None
    cuda_toolkits: list[dict[str, Any]]
    cudnn: list[dict[str, Any]]
    conda: dict[str, Any] | None
    env: dict[str, Any]
    tensorflow: dict[str, Any] | None
    pip_nvidia: list[dict[str, Any]]
    lspci_nvidia: list[dict[str, Any]] | None
    containers: dict[str, Any]
    notes: list[str]
    overrides: dict[str, Any]
    provenance: dict[str, Any]
    timings: dict[str, Any]
    errors: list[Any]
    environment: dict[str, Any]


def as_facts(doc: Mapping[str, Any]) -> Facts:
    """A facts document as the typed sections the verdict, the chooser and the planner read. No copy and
    no check here: a document is checked where it enters (the probes build it; ``load_facts_file``
    validates a file against the schema)."""
    return cast("Facts", doc)
#: A facts document is a few kB (a doctor report with 64 GPUs well under 1 MB); refuse anything this big.
MAX_FACTS_BYTES = 16 * 1024 * 1024

#: Override keys (as given by flags) and their environment variables.
OVERRIDE_ENV = {
    "driver": "TFGPU_DRIVER_VERSION",
    "cuda_driver": "TFGPU_CUDA_DRIVER",
    "gpu_cc": "TFGPU_GPU_CC",
    "gpu_name": "TFGPU_GPU_NAME",
    "gpu_memory_mib": "TFGPU_GPU_MEMORY_MIB",
    "os": "TFGPU_OS",
    "glibc": "TFGPU_GLIBC",
    "pythons": "TFGPU_PYTHONS",
    "no_avx": "TFGPU_NO_AVX",
    "cuda_toolkit": "TFGPU_CUDA_TOOLKIT",
    "cudnn": "TFGPU_CUDNN",
}
#: conda's own variable for the __cuda virtual package: "12.4" = driver supports CUDA 12.4, "" = no CUDA.
CONDA_OVERRIDE_CUDA = "CONDA_OVERRIDE_CUDA"

# ASCII digits only (\d would take '٨.٦' and '²'), and bounded (a 5,000-digit number is not a version)
_VERSION = re.compile(r"^[0-9]{1,9}(\.[0-9]{1,9}){0,5}$")
_MAJOR_MINOR = re.compile(r"^[0-9]{1,9}\.[0-9]{1,9}$")


def _refuse_constant(name: str) -> Any:
    """NaN and Infinity are Python's extension of JSON, not JSON: a report that carried one on would be invalid
    JSON for every other reader (issue 28, I28-L1)."""
    msg = f"{name} is not JSON (RFC 8259 has no NaN or Infinity)"
    raise ValueError(msg)


@lru_cache(maxsize=1)
def facts_schema() -> dict[str, Any]:
    """The shipped JSON Schema (src/tfgpu/core/schemas/facts.schema.json)."""
    text = (Path(__file__).parent.parent / "core" / "schemas" / "facts.schema.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,), "null": (type(None),),
    "number": (int, float), "integer": (int,),
}


def _type_ok(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[name])


def _validate(value: Any, schema: Mapping[str, Any], where: str) -> str | None:
    """The subset of JSON Schema the facts schema uses: type, const, enum, pattern, minimum, required,
    properties, additionalProperties, items, minItems, maxItems. Returns the first problem or None."""
    if "const" in schema and value != schema["const"]:
        return f"{where}: expected {json.dumps(schema['const'])}, got {json.dumps(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: {json.dumps(value)} is not one of {json.dumps(schema['enum'])}"
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_type_ok(value, t) for t in types):
            return f"{where}: expected {' or '.join(types)}, got {type(value).__name__} {json.dumps(value)[:60]}"
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        return f"{where}: {value!r} does not look like {schema['pattern']}"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and "minimum" in schema \
            and value < schema["minimum"]:
        return f"{where}: {value} is below {schema['minimum']}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                return f"{where}: missing {key!r}"
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, sub in value.items():
            if key in props:
                problem = _validate(sub, props[key], f"{where}.{key}")
            elif isinstance(extra, dict):
                problem = _validate(sub, extra, f"{where}.{key}")
            elif extra is False:
                problem = f"{where}: unexpected field {key!r}"
            else:
                problem = None
            if problem:
                return problem
    if isinstance(value, list) and not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
        return f"{where}: {len(value)} items, not {schema.get('minItems', 0)} to {schema.get('maxItems', 'any')}"
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            if problem := _validate(item, schema["items"], f"{where}[{i}]"):
                return problem
    return None


def schema_problem(value: Any, schema: Mapping[str, Any], where: str) -> str | None:
    """The first problem of ``value`` against a JSON Schema written in the subset :func:`_validate` reads (the
    shipped schemas of documents tfgpu reads back: facts, environment specs), or None."""
    return _validate(value, schema, where)


def validate_facts(doc: Any) -> list[str]:
    """Problems with a facts document against facts.schema.json (empty list = valid)."""
    problem = _validate(doc, facts_schema(), "facts")
    return [problem] if problem else []


#: GPUs judged from a facts file at most (the rest are dropped with a note; the largest machines have
#: 16): every accepted file is judged within a couple of seconds.
MAX_GPUS = 256
_LONG_NUMBER = re.compile(r"[0-9]{65,}")


def load_facts_file(path: str | Path) -> dict[str, Any]:
    """Read a facts document, or a whole `tfgpu doctor --json` report (its "facts" are taken).

    A missing section means "unknown". Raises InputError (exit 2) naming the file and the problem.
    """
    from tfgpu.core.sysio import read_text_file

    p = Path(path)
    # bounded: a huge file, /dev/zero or a pipe must not fill the memory
    text = read_text_file(p, what="facts file", limit=MAX_FACTS_BYTES, noun="a facts document",
                          hint="give the path of a facts document or a `tfgpu doctor --json` report (a few kB)")
    long_number = _LONG_NUMBER.search(text)
    if long_number:  # no fact is a 65-digit number; thousands of digits would not even convert to int
        msg = (f"facts file {p} holds a {long_number.end() - long_number.start()}-digit number "
               f"(at character {long_number.start()}): not a facts document")
        raise InputError(msg)
    try:
        doc = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        msg = f"facts file {p} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        raise InputError(msg) from None
    except RecursionError:
        msg = f"facts file {p} is nested too deeply to be a facts document"
        raise InputError(msg) from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        msg = f"facts file {p} is not a facts document: {' '.join(str(exc).split())[:120]}"
        raise InputError(msg) from None
    facts_part = doc.get("facts") if isinstance(doc, dict) and isinstance(doc.get("facts"), dict) else doc
    gpus = facts_part.get("gpus") if isinstance(facts_part, dict) else None
    if isinstance(facts_part, dict) and isinstance(gpus, list) and len(gpus) > MAX_GPUS:
        # judging is linear in the GPUs; no machine has this many (a DGX has 8-16), so a bounded run wins
        facts_part["gpus"] = gpus[:MAX_GPUS]
        notes = facts_part.get("notes")
        facts_part["notes"] = [*(notes if isinstance(notes, list) else []), f"the facts file lists {len(gpus)} GPUs; only the first {MAX_GPUS} are judged"]
    from tfgpu.core.safety import too_deep

    if too_deep(doc):
        msg = f"facts file {p} is nested too deeply to be a facts document"
        raise InputError(msg)
    if isinstance(doc, dict) and (("schema" not in doc and isinstance(doc.get("facts"), dict))
                                  or str(doc.get("schema", "")).startswith("tfgpu.doctor/")):
        doc = doc.get("facts")
    if not isinstance(doc, dict):
        msg = f"facts file {p} does not hold a JSON object with facts"
        raise InputError(msg)
    doc = dict(doc)
    doc.setdefault("schema", SCHEMA)
    if doc["schema"] != SCHEMA:
        msg = f"facts file {p} has schema {doc['schema']!r}; tfgpu reads {SCHEMA!r}"
        raise InputError(msg)
    problems = validate_facts(doc)
    if problems:
        msg = f"facts file {p}: {problems[0]}"
        raise InputError(msg)
    doc.setdefault("provenance", {})
    doc["provenance"]["file"] = str(p)
    return doc


def overrides_from_env(env: Mapping[str, str]) -> dict[str, str]:
    """TFGPU_* variables (and CONDA_OVERRIDE_CUDA) that are set -> override keys."""
    out = {key: env[var] for key, var in OVERRIDE_ENV.items() if env.get(var) not in (None, "")}
    if CONDA_OVERRIDE_CUDA in env and "cuda_driver" not in out:
        out["cuda_driver"] = env[CONDA_OVERRIDE_CUDA]  # "" is meaningful: no CUDA driver (conda's rule)
        out["_conda"] = "1"
    return out


def _bad(key: str, value: str, want: str) -> UsageError:
    var = OVERRIDE_ENV.get(key, key)
    return UsageError(f"override {key} ({var}) = {value!r} is not {want}")


def _driver_cuda(driver: str, facts: Mapping[str, Any]) -> str | None:
    """The newest CUDA a driver version runs (compat/cuda.toml's minimum drivers), or None when unknown."""
    from packaging.version import InvalidVersion

    from tfgpu.kb.knowledge import load_kb, newest_cuda_for_driver
    from tfgpu.kb.versions import version

    plat = facts.get("platform") or {}
    raw_os = str(plat.get("os") or "").lower() if isinstance(plat, Mapping) else ""
    wsl = plat.get("wsl") if isinstance(plat, Mapping) else None
    os_key = "windows" if raw_os in ("windows", "wsl2") or (raw_os == "linux" and wsl == 2) else "linux"  # WSL2
    try:  # reports the Windows driver
        cuda = newest_cuda_for_driver(load_kb(), version(driver), os_key)
    except InvalidVersion:
        return None
    return None if cuda is None else f"{cuda.major}.{cuda.minor}"


def _override_driver(
    out: dict[str, Any], key: str, value: str, overrides: Mapping[str, str], from_conda: bool,
) -> None:
    """Apply a `driver` or `cuda_driver` override to ``out`` (in place)."""
    if key == "driver":
        if not _VERSION.match(value):
            raise _bad(key, value, "a driver version like 550.54.15")
        drv = out.setdefault("driver", {})
        drv.update({"version": value, "source": "override", "error": None, "mismatch": False, "libcuda": None})
        if "cuda_driver" not in overrides:  # the CUDA the probed driver reported is not this driver's:
            drv["cuda"] = _driver_cuda(value, out)  # the overridden driver's own, from NVIDIA's table
            drv["cuda_source"] = "derived from the driver version (tfgpu's CUDA table)"
            drv.pop("kernel_module", None)
            drv.pop("user_library", None)
    elif key == "cuda_driver":
        drv = out.setdefault("driver", {})
        if value == "" and from_conda:
            drv.update({"cuda": None, "source": "override", "error": "CONDA_OVERRIDE_CUDA='' (no CUDA driver)"})
        elif _MAJOR_MINOR.match(value) or re.fullmatch(r"[0-9]{1,9}", value):
            drv["cuda"] = value if "." in value else f"{value}.0"
            drv.setdefault("source", "override")
            drv["error"] = None
        else:
            raise _bad(key, value, "a CUDA version like 12.4")


def _override_gpus(out: dict[str, Any], key: str, value: str) -> None:
    """Apply a `gpu_cc`, `gpu_name` or `gpu_memory_mib` override to ``out`` (in place)."""
    if key == "gpu_cc":
        ccs = [c.strip() for c in value.split(",") if c.strip()]
        if not ccs or not all(_MAJOR_MINOR.match(c) for c in ccs):
            raise _bad(key, value, 'compute capabilities like "8.6" or "8.6,7.5"')
        gpus = out.get("gpus") or []
        new = []
        for i, cc in enumerate(ccs):
            g = dict(gpus[i]) if i < len(gpus) else {"index": i, "name": None, "memory_mib": None, "uuid": None}
            g.update({"compute_capability": cc, "source": "override", "visible": True})
            new.append(g)
        out["gpus"] = new
    elif key == "gpu_name":
        for g in out.setdefault("gpus", []) or [{"index": 0}]:
            g["name"] = value
        if not out["gpus"]:
            out["gpus"] = [{"index": 0, "name": value, "compute_capability": None, "memory_mib": None,
                            "uuid": None, "source": "override", "visible": True}]
    elif key == "gpu_memory_mib":
        if not re.fullmatch(r"[0-9]{1,9}", value):
            raise _bad(key, value, "a whole number of MiB")
        if not out.get("gpus"):
            out["gpus"] = [{"index": 0, "name": None, "compute_capability": None, "uuid": None,
                            "source": "override", "visible": True}]
        for g in out["gpus"]:
            g["memory_mib"] = int(value)


def _override_system(out: dict[str, Any], key: str, value: str) -> None:
    """Apply an `os`, `glibc`, `pythons`, `no_avx`, `cuda_toolkit` or `cudnn` override to ``out`` (in place)."""
    if key == "os":
        if value not in ("linux", "windows", "macos", "wsl2"):
            raise _bad(key, value, "one of linux, windows, macos, wsl2")
        plat = out.setdefault("platform", {})
        plat["os"] = "linux" if value == "wsl2" else value
        plat["wsl"] = 2 if value == "wsl2" else None
    elif key == "glibc":
        if not _MAJOR_MINOR.match(value):
            raise _bad(key, value, "a glibc version like 2.35")
        out.setdefault("platform", {})["glibc"] = value
    elif key == "pythons":
        versions = [v.strip() for v in value.split(",") if v.strip()]
        if not versions or not all(re.fullmatch(r"[0-9]{1,3}\.[0-9]{1,3}(\.[0-9]{1,4})?", v) for v in versions):
            raise _bad(key, value, 'Python versions like "3.8,3.11"')
        out.setdefault("python", {})["interpreters"] = [
            {"version": v, "path": None, "source": "override"} for v in versions]
    elif key == "no_avx":
        if value.lower() in ("1", "true", "yes", "on"):
            out["cpu"] = {**out.get("cpu", {}), "avx": False, "avx2": False, "source": "override"}
        elif value.lower() not in ("0", "false", "no", "off"):
            raise _bad(key, value, "1 or 0")
    elif key == "cuda_toolkit":
        if not _MAJOR_MINOR.match(value):
            raise _bad(key, value, "a CUDA version like 11.8")
        out["cuda_toolkits"] = [{"version": value, "path": None, "source": "override", "libcudart": []}]
    elif key == "cudnn":
        if not _VERSION.match(value):
            raise _bad(key, value, "a cuDNN version like 8.9.7")
        out["cudnn"] = [{"version": value, "path": None, "source": "override"}]


def apply_overrides(facts: Mapping[str, Any], overrides: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Apply single-fact overrides on a copy of ``facts``. Returns (facts, active) where ``active`` lists
    "key=value (source)" and is also stored as facts["overrides"]. Bad values raise UsageError (exit 2)."""
    if any(key != "_conda" for key in overrides):
        import copy

        out = copy.deepcopy(dict(facts))
    else:  # nothing below the top level changes: no deep copy (nor copy's import) on every `tfgpu doctor`
        out = dict(facts)
    active: list[str] = list(out.get("overrides") or [])
    from_conda = overrides.get("_conda") == "1"
    for key, value in overrides.items():
        if key == "_conda":
            continue
        value = value.strip()
        if key in ("driver", "cuda_driver"):
            _override_driver(out, key, value, overrides, from_conda)
        elif key in ("gpu_cc", "gpu_name", "gpu_memory_mib"):
            _override_gpus(out, key, value)
        elif key in ("os", "glibc", "pythons", "no_avx", "cuda_toolkit", "cudnn"):
            _override_system(out, key, value)
        else:
            msg = f"unknown override {key!r}"
            raise UsageError(msg)
        source = "CONDA_OVERRIDE_CUDA" if key == "cuda_driver" and from_conda else key
        active.append(f"{key}={value} ({source})")
        out.setdefault("provenance", {})[f"override.{key}"] = source
    out["overrides"] = active
    return out, active
