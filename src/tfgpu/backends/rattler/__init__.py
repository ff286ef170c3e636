"""Embedded conda engine: solve and install conda packages with py-rattler, no conda executable needed.

py-rattler (the Python bindings of rattler, the Rust conda implementation behind pixi) is imported
lazily inside the functions that need it, so importing this module stays cheap.

Run as ``python -m tfgpu.backends.rattler create|install-lock ...`` (engine/__main__.py) so plans stay printable
argv lists; the same work is available as functions here (``solve``, ``install``, ``create_env``,
``install_lockfile``).

Safety: an install never touches an existing prefix. Packages are linked into a temporary sibling
directory (``.NAME.tfgpu-partial-PID-XXXX``) with the final prefix patched into prefix-dependent files
(rattler's ``alternative_target_prefix``), and the directory is renamed into place only when every
package is linked. A failure or Ctrl-C removes the temporary directory; one left behind by a killed
process (SIGKILL cannot be caught) is removed by the next install next to it once its PID is gone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfgpu.backends.rattler.archives import verify_archives
from tfgpu.backends.rattler.requirement import (
    available as available,  # re-exported: engine.available() is the API
)
from tfgpu.backends.rattler.requirement import require
from tfgpu.backends.rattler.virtual import VirtualPkg, current_platform, detect_virtual_packages
from tfgpu.core.errors import Interrupted, StepFailed, TfgpuError, UsageError, clip_words
from tfgpu.core.record import record
from tfgpu.core.sysio import pid_alive

if TYPE_CHECKING:
    from rattler import RepoDataRecord

#: Channel names conda resolves specially. ``defaults`` is Anaconda's repository, not an anaconda.org
#: channel: conda's built-in default_channels on Linux/macOS are pkgs/main and pkgs/r
#: (https://docs.conda.io/projects/conda/en/latest/user-guide/configuration/settings.html#default-channels).
#: Packages from repo.anaconda.com are covered by Anaconda's Terms of Service (see compat/recipes.toml).
CHANNEL_ALIASES: dict[str, tuple[str, ...]] = {
    "defaults": ("https://repo.anaconda.com/pkgs/main", "https://repo.anaconda.com/pkgs/r"),
}


PARTIAL_MARK = ".tfgpu-partial-"




def expand_channels(channels: Sequence[str]) -> list[str]:
    """Channel names and URLs as rattler takes them (``defaults`` -> Anaconda's pkgs/main + pkgs/r)."""
    out: list[str] = []
    for ch in channels:
        for c in CHANNEL_ALIASES.get(ch, (ch,)):
            if c not in out:
                out.append(c)
    return out


def default_cache_dir() -> Path:
    """rattler's own cache (shared with pixi): $RATTLER_CACHE_DIR, else <user cache>/rattler/cache."""
    if os.environ.get("RATTLER_CACHE_DIR"):
        return Path(os.environ["RATTLER_CACHE_DIR"])
    from tfgpu.core.sysio import user_dir

    return user_dir("cache", "rattler") / "cache"


def _run(coro: Any, timeout: float | None = None, what: str = "rattler") -> Any:
    """Run a rattler coroutine in a worker thread; Ctrl-C cancels it and waits for it to stop, and so does
    ``timeout`` (seconds; None: no limit), which then raises StepFailed naming ``what``.

    Running it on the main thread would leave rattler's linker running in the background after a
    KeyboardInterrupt while we delete its target directory.
    """
    import asyncio  # here: `tfgpu plan` asks engine.available() and must not pay for asyncio (~20 ms)

    result: dict[str, Any] = {}
    loop = asyncio.new_event_loop()
    task_box: list[asyncio.Task[Any]] = []

    def work() -> None:
        asyncio.set_event_loop(loop)
        task = loop.create_task(coro)
        task_box.append(task)
        try:
            result["value"] = loop.run_until_complete(task)
        except BaseException as exc:  # handed to the main thread
            result["error"] = exc
        finally:
            loop.close()

    def cancel() -> None:
        if task_box and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task_box[0].cancel)
            except RuntimeError:  # the loop closed in between
                pass
        worker.join(60)

    worker = threading.Thread(target=work, name="tfgpu-rattler", daemon=True)
    deadline = None if timeout is None else time.monotonic() + timeout
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.05)
            if deadline is not None and worker.is_alive() and time.monotonic() >= deadline:
                cancel()
                msg = f"{what} timed out after {timeout:g} s"
                raise StepFailed(msg, hint="pass a larger --timeout, or check the network to the channels")
    except KeyboardInterrupt:
        cancel()
        raise
    if "error" in result:
        raise result["error"]
    return result.get("value")


def _flat(text: str) -> str:
    return " ".join(text.replace("└─", " ").replace("├─", " ").replace("│", " ").split())


def _as_match_specs(specs: Sequence[str]) -> list[Any]:
    from rattler import MatchSpec

    out = []
    for s in specs:
        try:
            out.append(MatchSpec(s, strict=False))
        except Exception as exc:
            msg = f"bad package spec {s!r}: {_flat(str(exc))}"
            raise UsageError(msg, hint="use conda syntax, e.g. python=3.8 or 'tensorflow 2.16.1 cuda*'") from exc
    return out


_CUDA_REQ = re.compile(r"(\S+) (\S+) would require\s+(__cuda\s*[^,]*), for which no candidates were found")


def _explain_solve_failure(message: str, records_by_name: Mapping[str, Sequence[Any]]) -> TfgpuError:
    """A solver error as one line; a missing ``__cuda`` names the build and how to plan without a driver."""
    m = _CUDA_REQ.search(_flat(message))
    if m:
        name, version, cuda_spec = m.group(1), m.group(2), m.group(3).strip()
        build = ""
        for rec in records_by_name.get(name, ()):
            if str(rec.version) == version and any(d.replace(" ", "").startswith(cuda_spec.replace(" ", ""))
                                                   for d in rec.depends):
                build = f"-{rec.build}"
                break
        low = re.search(r"(\d+(?:\.\d+)?)", cuda_spec)
        want = low.group(1) if low else "12"
        if "." not in want:
            want += ".0"
        major = want.split(".")[0]
        msg = f"nothing provides {cuda_spec} needed by {name}-{version}{build}"
        hint = (f"this package needs an NVIDIA driver supporting CUDA >= {major}; on a machine without one "
                f"set CONDA_OVERRIDE_CUDA={want} to plan for it")
        return StepFailed(msg, hint=hint)
    return StepFailed(f"cannot solve: {_flat(message)}")


def solve(
    specs: Sequence[str],
    channels: Sequence[str],
    platform: str | None = None,
    virtual_packages: Sequence[VirtualPkg] | None = None,
    *,
    cache_dir: Path | None = None,
    offline: bool = False,
    timeout: float | None = None,
) -> list[RepoDataRecord]:
    """Solve ``specs`` against ``channels`` for ``platform`` (+ noarch); returns the records to install.

    ``virtual_packages=None`` means this machine's (``detect_virtual_packages``). ``timeout`` bounds the solve,
    fetching the channels' repodata included (StepFailed past it; None: no limit).
    """
    require()
    from rattler import BuildString, Gateway, GenericVirtualPackage, PackageName, Subdir, Version
    from rattler import solve as r_solve
    from rattler.repo_data.gateway import SourceConfig

    if not channels:
        msg = "no channel to solve from"
        raise UsageError(msg, hint="pass --channel conda-forge (or the recipe's channel)")
    platform = platform or current_platform()
    if virtual_packages is None:
        virtual_packages, _ = detect_virtual_packages(platform)
    match_specs = _as_match_specs(specs)
    cache = cache_dir or default_cache_dir()
    gateway = Gateway(
        cache_dir=cache / "repodata",
        default_config=SourceConfig(cache_action="force-cache-only" if offline else "cache-or-fetch"),
    )
    vps = [GenericVirtualPackage(PackageName(v.name), Version(v.version), BuildString(v.build))
           for v in virtual_packages]
    chans = expand_channels(channels)
    subdirs = [Subdir(platform), Subdir("noarch")] if platform != "noarch" else [Subdir("noarch")]
    try:
        records: list[RepoDataRecord] = _run(r_solve(
            chans, match_specs, gateway=gateway, platforms=subdirs, virtual_packages=vps,
        ), timeout=timeout, what=f"solving for {platform}")
    except KeyboardInterrupt:
        msg = "interrupted while solving"
        raise Interrupted(msg) from None
    except TfgpuError:  # the timeout: said as it is
        raise
    except Exception as exc:
        kind = type(exc).__name__
        if kind == "SolverError":
            by_name: dict[str, list[Any]] = {}
            try:
                names = {s.name.normalized for s in match_specs if s.name is not None}
                rows = _run(gateway.query(chans, subdirs, list(names), recursive=True))
                for group in rows:
                    for rec in group:
                        by_name.setdefault(rec.name.normalized, []).append(rec)
            except Exception:
                by_name = {}
            raise _explain_solve_failure(str(exc), by_name) from None
        msg = f"cannot read the channels {', '.join(chans)}: {kind}: {clip_words(_flat(str(exc)), 300)}"
        hint = ("the package cache has no copy of this repodata: run once with the network"
                if offline else "check the channel name/URL and the network")
        raise StepFailed(msg, hint=hint) from None
    return sorted(records, key=lambda r: r.name.normalized)


def partial_dirs(prefix: Path) -> list[Path]:
    """Temporary sibling directories of ``prefix`` that installs into it made (possibly stale): exactly the
    shape the engine gives them (``.NAME.tfgpu-partial-PID-XXXXXXXX``, 8 hex digits), real directories of this
    user. A folder that only starts like one (``.NAME.tfgpu-partial-PID``, someone's backup) is not ours."""
    import re
    import stat

    parent = prefix.parent
    if not parent.is_dir():
        return []
    shape = re.compile(re.escape(f".{prefix.name}{PARTIAL_MARK}") + r"\d+-[0-9a-f]{8}")
    out = []
    for p in parent.iterdir():
        try:
            st = p.lstat()
        except OSError:
            continue
        if (shape.fullmatch(p.name) and stat.S_ISDIR(st.st_mode)
                and (not hasattr(os, "getuid") or st.st_uid == os.getuid())):
            out.append(p)
    return sorted(out)


def cleanup_partial(prefix: Path, *, only_dead: bool = True) -> list[Path]:
    """Remove temporary siblings left by an install into ``prefix`` that was killed; returns them."""
    removed = []
    head = f".{prefix.name}{PARTIAL_MARK}"
    for p in partial_dirs(prefix):
        pid_text = p.name[len(head):].split("-", 1)[0]
        if only_dead and pid_text.isdigit() and pid_alive(int(pid_text)):
            continue
        _remove_tree(p)
        removed.append(p)
    return removed


def _remove_tree(path: Path) -> None:
    """Remove a directory even if a cancelled linker thread still writes into it for a moment."""
    for _ in range(20):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            time.sleep(0.02)
            if not path.exists():
                return
        time.sleep(0.05)
    shutil.rmtree(path)


def _link(records: Sequence[Any], target: Path, final: Path, *, platform: str, cache_dir: Path,
          requested: Sequence[str]) -> None:
    """Link packages into ``target`` with ``final`` written into prefix-dependent files (the seam
    fault-injection tests wrap)."""
    from rattler import MatchSpec, Subdir
    from rattler import install as r_install

    _run(r_install(
        list(records), target, cache_dir=cache_dir / "pkgs", platform=Subdir(platform),
        show_progress=False, execute_link_scripts=False, alternative_target_prefix=final,
        # py-rattler 0.28 hands requested_specs to the Rust side unconverted: pass the inner objects
        requested_specs=[getattr(m, "_match_spec", m) for m in (MatchSpec(s, strict=False) for s in requested)],
    ))


def _package_paths(archive: Path) -> list[str] | None:
    """The paths a package archive installs (info/paths.json, else the old info/files), or None when
    the archive cannot be read (rattler then reports it as the broken download it is)."""
    from rattler import PathsJson

    try:
        return [str(e.relative_path) for e in PathsJson.from_package_archive(archive).paths]
    except Exception:  # no paths.json (an old package) or an unreadable archive
        pass
    if not archive.name.endswith(".tar.bz2"):
        return None
    import tarfile

    try:
        with tarfile.open(archive, "r:bz2") as tar:
            member = tar.extractfile("info/files")
            if member is None:
                return None
            return member.read(16 << 20).decode("utf-8", "replace").splitlines()
    except (OSError, KeyError, EOFError, tarfile.TarError):
        return None


def unsafe_package_paths(archive: Path) -> list[str]:
    """Paths in a package's metadata that would land outside the prefix: absolute ones and any with a
    ``..`` component. rattler links ``prefix/PATH`` from ``cache/PATH`` as written, so
    ``../../x`` writes beside the prefix and an absolute path aborts the whole process."""
    paths = _package_paths(archive) or []
    return [p for p in paths if not p or p.startswith(("/", "\\")) or "\0" in p
            or ".." in p.replace("\\", "/").split("/")]


def check_package_paths(records: Sequence[Any]) -> None:
    """Refuse (StepFailed, before anything is linked) a package whose metadata installs outside the
    prefix. Reads every archive that is a local file (every package of a lock, and local channels)."""
    from urllib.parse import unquote, urlparse
    from urllib.request import url2pathname

    for rec in records:
        parsed = urlparse(str(rec.url))
        if parsed.scheme != "file":
            continue
        archive = Path(url2pathname(unquote(parsed.path)))
        bad = unsafe_package_paths(archive)
        if bad:
            shown = ", ".join(json.dumps(b)[:120] for b in bad[:3]) + (" ..." if len(bad) > 3 else "")
            msg = (f"{rec.file_name} installs {len(bad)} file(s) outside the environment ({shown}): refusing "
                   "a package that writes beyond its prefix")
            raise StepFailed(msg, hint="the package is malformed or hostile; remove it from the channel or lock")


def check_cached(records: Sequence[Any], cache_dir: Path) -> list[str]:
    """Names (name-version-build) of records that are not in the package cache."""
    from rattler import PackageCache

    pkgs = cache_dir / "pkgs"
    if not pkgs.is_dir():
        return [f"{r.name.normalized}-{r.version}-{r.build}" for r in records]
    index = _run(PackageCache(pkgs).index())
    return [f"{r.name.normalized}-{r.version}-{r.build}" for r in records if not index.contains_record(r)]


def install(
    records: Sequence[RepoDataRecord],
    prefix: Path,
    *,
    platform: str | None = None,
    cache_dir: Path | None = None,
    offline: bool = False,
    requested: Sequence[str] = (),
) -> Path:
    """Install exactly ``records`` into the new directory ``prefix``; all or nothing.

    Raises UsageError if ``prefix`` exists (it is never touched), StepFailed if a package cannot be
    downloaded/extracted/linked, Interrupted on Ctrl-C; in every failure nothing is left at ``prefix``.
    """
    require()
    prefix = Path(prefix).absolute()
    if prefix.exists() or prefix.is_symlink():
        msg = f"{prefix} already exists; tfgpu never installs into an existing prefix"
        raise UsageError(msg, hint="choose a new --prefix, or remove the old one first")
    platform = platform or current_platform()
    cache = cache_dir or default_cache_dir()
    if offline:
        missing = check_cached(records, cache)
        if missing:
            msg = f"--offline: {len(missing)} package(s) not in the package cache {cache / 'pkgs'}: " + ", ".join(
                missing[:5]) + (" ..." if len(missing) > 5 else "")
            raise StepFailed(msg, hint="run once without --offline (with the network) to fill the cache")
    check_package_paths(records)
    parent_created = not prefix.parent.exists()
    prefix.parent.mkdir(parents=True, exist_ok=True)
    cleanup_partial(prefix)
    tmp = prefix.parent / f".{prefix.name}{PARTIAL_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        _link(records, tmp, prefix, platform=platform, cache_dir=cache, requested=requested)
        if prefix.exists():  # someone created it while we were installing: keep theirs
            msg = f"{prefix} appeared while installing; left untouched"
            raise UsageError(msg)
        tmp.rename(prefix)
    except KeyboardInterrupt:
        _remove_tree(tmp)
        _remove_empty_parent(prefix.parent, parent_created)
        msg = f"interrupted while installing into {prefix}; nothing was left behind"
        raise Interrupted(msg) from None
    except TfgpuError:
        _remove_tree(tmp)
        _remove_empty_parent(prefix.parent, parent_created)
        raise
    except Exception as exc:
        _remove_tree(tmp)
        _remove_empty_parent(prefix.parent, parent_created)
        msg = f"installing into {prefix} failed: {type(exc).__name__}: {clip_words(_flat(str(exc)), 400)}"
        raise StepFailed(msg, hint="nothing was left behind; a corrupt download is refetched on the next try"
                         ) from None
    return prefix


def _remove_empty_parent(parent: Path, created: bool) -> None:
    if created:
        try:
            parent.rmdir()
        except OSError:
            pass


@record
class Created:
    """What ``create_env`` did."""

    prefix: Path
    records: tuple[Any, ...]
    virtual_packages: tuple[VirtualPkg, ...]
    notes: tuple[str, ...]


def create_env(
    specs: Sequence[str],
    prefix: Path,
    channels: Sequence[str],
    *,
    platform: str | None = None,
    virtual_packages: Sequence[VirtualPkg] = (),
    detect: bool = True,
    env: Mapping[str, str] | None = None,
    cache_dir: Path | None = None,
    offline: bool = False,
    driver_cuda_known: tuple[str | None] | None = None,
) -> Created:
    """Solve ``specs`` with this machine's virtual packages (plus overrides) and install into ``prefix``."""
    prefix = Path(prefix).absolute()
    if prefix.exists():
        msg = f"{prefix} already exists; tfgpu never installs into an existing prefix"
        raise UsageError(msg, hint="choose a new --prefix, or remove the old one first")
    platform = platform or current_platform()
    vps, notes = detect_virtual_packages(platform, env=env, explicit=virtual_packages, detect=detect,
                                         driver_cuda_known=driver_cuda_known)
    records = solve(specs, channels, platform, vps, cache_dir=cache_dir, offline=offline)
    install(records, prefix, platform=platform, cache_dir=cache_dir, offline=offline, requested=specs)
    return Created(prefix, tuple(records), tuple(vps), tuple(notes))


def install_lockfile(
    lockfile: Path,
    prefix: Path,
    *,
    platform: str | None = None,
    cache_dir: Path | None = None,
    offline: bool = False,
) -> tuple[Any, ...]:
    """Install exactly the conda packages a lockfile pins for ``platform`` (no solving)."""
    require()
    from tfgpu.backends.lockfiles import read_conda_lock

    lock = read_conda_lock(lockfile)
    platform = platform or current_platform()
    records = lock.conda_records(platform)
    cache = cache_dir or default_cache_dir()
    store = cache / "tfgpu-verified"
    verified = verify_archives(records, store, offline=offline)
    # a private, empty package cache: rattler's shared one (pixi's too) may hold an extracted copy that
    # nobody checked against this lock, and rattler would link it
    private = store / f".install-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        install(verified, prefix, platform=platform, cache_dir=private, offline=False)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return tuple(records)


def describe(records: Sequence[Any]) -> list[str]:
    """``name version build`` per record, for output."""
    return [f"{r.name.normalized} {r.version} {r.build}" for r in records]
