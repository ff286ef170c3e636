"""Prove tfgpu's pip recipes by real installs: `nox -s recipes` (slow, networked; not in .ci/run).

For the newest patch of every GPU minor series (and 2.2.0, the seed's release) it builds the environment
through tfgpu's own create code path (tfgpu.build.pipeline.build_plan -> tfgpu.build.execute.run_plan, pip
backend, the Python the plan picks among those installed), runs the smoke test (the CPU part counts on a
machine without a GPU, as `tfgpu create --allow-cpu` does), then scripts/recipe_probe.py inside the
environment: import TensorFlow, the resolved versions, and a ctypes load of every CUDA library the
build names (tf.sysconfig.get_build_info()) and of every nvidia-* wheel library. Environments live in a
scratch directory and are deleted after each release. Results go to compat/verified.toml (with
--write) and a table is printed at the end.

    python scripts/verify_recipes.py [--only 2.2 2.15.1 ...] [--scratch DIR] [--write] [--keep]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).resolve().with_name("recipe_probe.py")
HEADLINE = "2.2.0"  # the seed's release (MX150): `import tensorflow` failed with numpy 1.24
SOURCE_KEY = "tfgpu-recipes"
#: Libraries of the CUDA toolkit and cuDNN (an import that misses one of these needs system CUDA).
CUDA_LIB_PREFIXES = ("libcudart", "libcublas", "libcudnn", "libcufft", "libcurand", "libcusolver", "libcusparse",
                     "libcupti", "libnvrtc", "libnvinfer", "libnccl")
SOURCES = {SOURCE_KEY: {
    "title": "Installed from PyPI by `nox -s recipes` (scripts/verify_recipes.py): tfgpu's create code path, pip "
             "backend, Linux x86_64 without an NVIDIA driver; packages from the PyPI simple index",
    "url": "https://pypi.org/simple/",
    "retrieved": "",
}}


def pyenv_path() -> str:
    """PATH with every pyenv-installed CPython's bin directory first (pythonX.Y for the planner)."""
    root = Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser() / "versions"
    dirs = [str(p / "bin") for p in sorted(root.glob("3.*"), reverse=True) if (p / "bin").is_dir()]
    return os.pathsep.join([*dirs, os.environ.get("PATH", "")])


def targets(kb: Any, only: list[str]) -> list[str]:
    """The newest GPU release of every Linux series, plus the headline release; or those named."""
    if only:
        return [str(kb.resolve_tf(t, "linux")) for t in only]
    out = [str(kb.gpu_versions_in(s, "linux")[0]) for s in kb.series("linux") if kb.gpu_versions_in(s, "linux")]
    if HEADLINE not in out:
        out.append(HEADLINE)
    return sorted(out, key=lambda t: tuple(int(x) for x in t.split(".")), reverse=True)


def _skip_reason(kb: Any, tf: str, exc: Exception) -> str:
    from tfgpu.kb.versions import version

    wheels = kb.pythons_for(version(tf), "linux")
    return (f"no Python installed here has a Linux wheel (wheels: {', '.join(wheels) or 'none'}; "
            f"installed: 3.6-3.13 and 2.7, which uv cannot make a venv for): {exc}")


def summarise_libs(probe: dict[str, Any], provides_cuda: bool, build_cuda: str) -> tuple[bool, str]:
    """(every library the recipe brings loaded, a one-line account)."""
    wheel = probe.get("nvidia_wheel_libs") or []
    # a library linked against the driver itself (cuDNN 9's runtime-compiled engines) loads only with one
    needs_driver = [w["lib"] for w in wheel if w.get("error") and "libcuda.so.1" in w["error"]]
    wheel_bad = [w["lib"] for w in wheel if w.get("error") and w["lib"] not in needs_driver]
    info = probe.get("build_info_libs") or []
    loaded = [f"{e['loaded']}" for e in info if e.get("loaded")]
    missing = [e["candidates"][0] for e in info if not e.get("loaded")]
    parts = []
    if wheel:
        parts.append(f"{len(wheel) - len(wheel_bad) - len(needs_driver)}/{len(wheel)} nvidia-wheel libraries loaded"
                     + (f" (failed: {', '.join(wheel_bad[:4])})" if wheel_bad else ""))
    if needs_driver:
        parts.append(f"{len(needs_driver)} need the driver's libcuda.so.1 to load ({', '.join(needs_driver[:3])})")
    if loaded:
        parts.append("build-info libraries loaded: " + ", ".join(loaded))
    if missing:
        parts.append("not found: " + ", ".join(missing))
    if probe.get("libcuda"):
        parts.append("libcuda.so.1 absent (no driver here, as expected)")
    if not provides_cuda:
        parts.insert(0, f"recipe uses the system CUDA {build_cuda or '?'} (not installed here; not checked)")
        return True, "; ".join(parts)
    return not wheel_bad and not missing and bool(wheel or loaded), "; ".join(parts)


def verify_one(tf: str, *, scratch: Path, facts: dict[str, Any], keep: bool, log: Any) -> dict[str, str]:
    """Build, smoke-test and probe one release; a row for compat/verified.toml (a dict of one-line strings)."""
    row = _verify_one(tf, scratch=scratch, facts=facts, keep=keep, log=log)
    return {k: " ".join(v.split()) for k, v in row.items()}


def _verify_one(tf: str, *, scratch: Path, facts: dict[str, Any], keep: bool, log: Any) -> dict[str, str]:
    from tfgpu.build.execute import activation_env, run_plan
    from tfgpu.build.pipeline import build_plan
    from tfgpu.core import process as run
    from tfgpu.core.errors import TfgpuError
    from tfgpu.kb.knowledge import load_kb
    from tfgpu.kb.versions import version
    from tfgpu.plan.request import BuildRequest
    from tfgpu.verify.runner import child_env, run_smoke

    kb = load_kb()
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    row = {"tf": tf, "recipe": "", "python": "", "date": today, "result": "failed", "reason": "",
           "numpy": "", "protobuf": "", "keras": "", "h5py": "", "typing_extensions": "", "cuda_libs": "",
           "pins": "", "source": SOURCE_KEY}
    prefix = scratch / f"tf{tf}"
    try:
        plan = build_plan(BuildRequest(tf=tf, backend="pip", prefix=str(prefix)), facts)
    except TfgpuError as exc:
        recipes = kb.recipes_for(version(tf), "linux", backend="pip")
        if recipes:
            row.update(recipe=recipes[0].id, result="skipped", reason=_skip_reason(kb, tf, exc))
        else:  # the official recipes of 2.11-2.13 bring CUDA with conda
            others = [r for r in kb.recipes_for(version(tf), "linux") if r.gpu]
            row.update(recipe=others[0].id if others else "none", result="skipped",
                       reason=f"no pip recipe on Linux: its recipes ({', '.join(r.id for r in others)}) install "
                              "CUDA with conda, and there are no conda channels where tfgpu verifies")
        return row
    row.update(recipe=plan.recipe_id, python=plan.python,
               pins=" ".join(plan.pip_requirements[1:]))  # a requirement has commas, never spaces
    log(f"== TensorFlow {tf}: recipe {plan.recipe_id}, Python {plan.python}: {' '.join(plan.pip_requirements)}")
    recipe = next(r for r in kb.recipes if r.id == plan.recipe_id)
    build = kb.build_for(version(tf), "linux")
    try:
        try:
            t0 = time.monotonic()
            run_plan(plan, force=True, timeout=1800, echo=None)
            log(f"   built in {time.monotonic() - t0:.0f} s")
        except TfgpuError as exc:
            tail = " | ".join(getattr(exc, "log_tail", [])[-3:])
            row["reason"] = f"install failed: {exc.message}" + (f" ({tail})" if tail else "")
            return row
        env = activation_env(plan)
        probe_res = run.capture([plan.env_python, str(PROBE)], timeout=900, env=child_env(env))
        try:
            probe = json.loads(probe_res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            row["reason"] = f"probe failed (exit {probe_res.returncode}): {probe_res.stderr.strip()[-300:]}"
            return row
        (scratch / f"probe-{tf}.json").write_text(json.dumps(probe, indent=1) + "\n", encoding="utf-8")
        versions = probe.get("versions") or {}
        row.update(numpy=versions.get("numpy", ""), protobuf=versions.get("protobuf", ""),
                   keras=versions.get("keras", ""), h5py=versions.get("h5py", ""),
                   typing_extensions=versions.get("typing-extensions", ""))
        missing_cuda = [m for m in probe.get("missing_libraries") or [] if m.startswith(CUDA_LIB_PREFIXES)]
        if probe.get("import_error") and missing_cuda and not recipe.provides_cuda:
            # TF <= 1.13's GPU wheels link CUDA itself: no import without the system CUDA the recipe requires
            row.update(result="skipped", cuda_libs=f"needs the system CUDA {build.cuda if build else '?'}: "
                                                  f"{', '.join(missing_cuda)} not found",
                       reason=f"installed, but `import tensorflow` needs the system CUDA "
                              f"{build.cuda if build else '?'} ({', '.join(missing_cuda)}), which this machine "
                              "does not have (only CUDA 13.0), and no CUDA of that age comes from PyPI")
            return row
        if probe.get("import_error"):
            row["reason"] = f"import tensorflow failed: {probe['import_error']}"[:400]
            return row
        libs_ok, libs = summarise_libs(probe, recipe.provides_cuda, str(build.cuda) if build else "")
        row["cuda_libs"] = libs
        report = run_smoke(plan.env_python, timeout=900, env=env, facts=facts)
        doc = report.to_json(allow_cpu=True)
        smoke_ok = bool(report.passed(True))
        problems = []
        if not smoke_ok:
            problems.append(f"smoke test: {doc.get('summary')}")
        if probe.get("keras_error"):
            problems.append(f"Keras on a symbolic input failed: {probe['keras_error']}")
        if probe.get("h5_error"):
            problems.append(f"Keras model save/load in HDF5 failed: {probe['h5_error']}")
        if not libs_ok:
            problems.append(f"CUDA libraries: {libs}")
        row["result"] = "failed" if problems else "ok"
        row["reason"] = "; ".join(problems)[:600]
        return row
    finally:
        if not keep and prefix.exists():
            shutil.rmtree(prefix, ignore_errors=True)


def prepare(scratch: Path) -> dict[str, Any]:
    """Make ``scratch``, keep tfgpu's registry and logs there, put pyenv's Pythons on PATH; this
    machine's facts (as `tfgpu create` probes them)."""
    scratch.mkdir(parents=True, exist_ok=True)
    os.environ["TFGPU_HOME"] = str(scratch / "home")
    os.environ["PATH"] = pyenv_path()
    if str(ROOT / "src") not in sys.path:
        sys.path.insert(0, str(ROOT / "src"))
    from tfgpu.cli.commands.plan import _facts

    facts: dict[str, Any] = _facts(None)
    return facts


def render_table(rows: list[dict[str, str]]) -> str:
    cols = ("tf", "recipe", "python", "result", "numpy", "protobuf", "keras", "h5py", "typing_extensions")
    widths = {c: max(len(c), *(len(r.get(c, "")) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    for r in rows:
        lines.append("  ".join(r.get(c, "").ljust(widths[c]) for c in cols))
        if r.get("reason"):
            lines.append(f"    {r['result']}: {r['reason']}")
    return "\n".join(lines)


def write(rows: list[dict[str, str]], path: Path) -> None:
    """Merge ``rows`` into compat/verified.toml (a row per release + recipe; newer runs replace older)."""
    from tfgpu.kb.parse import load_toml, verified_from_row
    from tfgpu.kb.queries import dump_verified

    old: dict[tuple[str, str], dict[str, str]] = {}
    sources = {k: dict(v) for k, v in SOURCES.items()}
    if path.exists():
        load_toml.cache_clear()
        data = load_toml("verified")
        old = {(r["tf"], r["recipe"]): r for r in data.get("installs", [])}
    for r in rows:
        old[(r["tf"], r["recipe"])] = r
    sources[SOURCE_KEY]["retrieved"] = max(r["date"] for r in old.values())
    text = dump_verified([verified_from_row(r) for r in old.values()], sources)
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=[], help="releases or series (default: every series + 2.2.0)")
    ap.add_argument("--scratch", help="where environments are built (default: a temporary directory)")
    ap.add_argument("--write", action="store_true", help="merge the results into compat/verified.toml")
    ap.add_argument("--keep", action="store_true", help="keep the environments")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args(argv)

    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="tfgpu-recipes-")).resolve()
    facts = prepare(scratch)
    from tfgpu.kb.knowledge import load_kb

    def log(msg: str) -> None:
        print(msg, flush=True)

    rows = []
    for tf in targets(load_kb(), args.only):
        t0 = time.monotonic()
        row = verify_one(tf, scratch=scratch, facts=facts, keep=args.keep, log=log)
        rows.append(row)
        log(f"   {tf}: {row['result']} ({time.monotonic() - t0:.0f} s) {row['reason'][:300]}")
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
        if args.write:
            write([row], ROOT / "compat" / "verified.toml")
    print()
    print(render_table(rows))
    return 0 if all(r["result"] != "failed" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
