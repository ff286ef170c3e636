"""tfgpu installed from a source tree into a venv of its own (this checkout, or a git revision for a before/after
in the same run), and issue 32's scenario: two installs sharing one cache directory, run in turn, against one
install run twice (bench/README.md, "Two installs")."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

from bench_measure import (
    TIME_HEADER,
    Contestant,
    Report,
    contestant_rows,
    empty_dir,
    log,
    md_table,
    ratio,
    run_group,
    tool,
)

ROOT = Path(__file__).resolve().parent.parent
#: What an install is built from: the package, its data and the metadata hatchling reads.
SOURCE_PARTS = ("src", "compat", "pyproject.toml", "README.md")
#: Issue 32: two installs alternating cost what one install costs (the ratio of the medians).
BUDGET_ALTERNATION = 1.1


def copy_source(dest: Path, rev: str | None = None, *, edit: str | None = None) -> Path:
    """The source tree of this checkout (``rev`` None: as it is now, uncommitted changes included) or of git
    revision ``rev``, in ``dest``; ``edit`` is appended to a module the knowledge-base cache key covers (another
    install of tfgpu, as a second version would be)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    if rev is None:
        for part in SOURCE_PARTS:
            if (ROOT / part).is_dir():
                shutil.copytree(ROOT / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(ROOT / part, dest / part)
    else:
        blob = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, *SOURCE_PARTS],
                              check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.9.17: refuse links and paths out of dest
                tar.extractall(dest, filter="data")
            else:  # our own repository's archive
                tar.extractall(dest)
    if edit:
        with (dest / "src" / "tfgpu" / "kb" / "records.py").open("a") as fh:
            fh.write(edit)
    return dest


def install(source: Path, venv: Path) -> list[str] | str:
    """tfgpu from ``source`` installed (not editable) into a new venv at ``venv``: the console script's argv, or
    why it could not be installed. The venv takes tfgpu's dependencies from the bench's environment (a .pth
    line), so every install runs the same typer, rich, packaging and pynvml, and nothing is downloaded."""
    uv = tool("uv")
    if uv is None:
        return "needs uv"
    shutil.rmtree(venv, ignore_errors=True)
    python = venv / "bin" / "python"
    for cmd in ([uv, "venv", "-q", "--python", sys.executable, str(venv)],
                [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]):
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            return f"`{' '.join(cmd[:2])}` failed: {res.stderr.strip()[-200:]}"
    Path(res.stdout.strip(), "_bench_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    res = subprocess.run([uv, "pip", "install", "-q", "--offline", "--no-deps", "--no-build-isolation", "--python",
                          str(python), str(source)], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return f"installing {source} failed: {res.stderr.strip()[-200:]}"
    return [str(venv / "bin" / "tfgpu")]


def baseline(cache: Path, rev: str) -> list[str] | str:
    """tfgpu as of git revision ``rev``, installed in the bench cache (the "before" of a before/after)."""
    log(f"  installing tfgpu {rev} (not timed)")
    try:
        source = copy_source(cache / "src-baseline", rev)
    except (subprocess.CalledProcessError, OSError) as exc:
        return f"git archive {rev} failed: {exc}"
    return install(source, cache / "venv-baseline")


def installs_section(rep: Report, *, runs: int, env: dict[str, str], cache: Path, rev: str | None) -> None:
    """Two installs (this checkout's, copied twice with one cached module differing) sharing one cache directory,
    run in turn (A, B), against one install run twice (A, A) with a cache directory of its own; each with the
    doctor's default arguments on this machine. With ``rev``: the same two contestants for that git revision, in
    the same rounds (before and after)."""
    log("two installs sharing a cache")
    work = cache / "installs"
    contestants: list[Contestant] = []
    pairs = []
    for label, source_rev in (("this checkout", None), *(((f"`{rev}`", rev),) if rev else ())):
        key = "now" if source_rev is None else "before"
        made = []
        for name, edit in (("a", None), ("b", "\n# a second install of tfgpu (bench/bench_installs.py)\n")):
            log(f"  installing tfgpu ({label}, {name}) (not timed)")
            try:
                source = copy_source(work / f"src-{key}-{name}", source_rev, edit=edit)
            except (subprocess.CalledProcessError, OSError) as exc:
                made.append(f"copying the source failed: {exc}")
                continue
            made.append(install(source, work / f"venv-{key}-{name}"))
        one_dir, shared_dir = work / f"cache-{key}-one", work / f"cache-{key}-shared"
        for d in (one_dir, shared_dir):
            empty_dir(d)()
            d.chmod(0o700)
        first, second = made
        skip = next((m for m in made if isinstance(m, str)), None)
        argv_a = [*first, "doctor", "--json"] if isinstance(first, list) else ["tfgpu"]
        argv_b = [*second, "doctor", "--json"] if isinstance(second, list) else ["tfgpu"]
        one = Contestant(f"one-{key}", f"{label}: one install, run twice", [argv_a, argv_a],
                         {**env, "TFGPU_CACHE_DIR": str(one_dir)}, ok_codes=(0, 1), skipped=skip)
        both = Contestant(f"two-{key}", f"{label}: two installs in turn", [argv_a, argv_b],
                          {**env, "TFGPU_CACHE_DIR": str(shared_dir)}, ok_codes=(0, 1), skipped=skip)
        contestants += [one, both]
        pairs.append((label, one, both))
    run_group(contestants, runs, log=log)
    rep.add("### Two installs sharing a cache directory (issue 32)\n\n"
            "Each row runs `tfgpu doctor --json` twice: one install twice (its own cache directory), or two installs "
            "(copies of the same source, one cached module differing) in turn with one cache directory, as a pipx "
            "install and a project venv share `~/.cache/tfgpu`. Times are for the two runs together.\n\n"
            + md_table(TIME_HEADER, contestant_rows(contestants, contestants[0])))
    for label, one, both in pairs:
        r = ratio(both, one)
        rep.budget(f"two installs in turn / one install ({label})", "skipped" if r is None else f"{r:.2f}×",
                   f"≤ {BUDGET_ALTERNATION}×", None if r is None else r <= BUDGET_ALTERNATION)


def isolated(env: dict[str, str], cache: Path, name: str) -> dict[str, str]:
    """``env`` with a knowledge-base cache directory of the contestant's own: another tfgpu on this machine (an
    older one removed every cache but its own) cannot evict it in the middle of a measurement."""
    path = cache / f"kb-cache-{name}"
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return {**env, "TFGPU_CACHE_DIR": str(path)}

