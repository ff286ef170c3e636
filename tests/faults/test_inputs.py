"""Fault injection at the files tfgpu reads: facts files, lockfiles and logs that are malformed, of an
unknown version, of the wrong types, huge or binary.

Facts files and lockfiles -> exit 2 with one line naming the file and the problem. Logs -> read safely
whatever they hold: findings or none, bounded time and memory.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA, needs_engine
from tfgpu.backends import lockfiles
from tfgpu.core.errors import InputError
from tfgpu.judge import explain
from tfgpu.tools import explain as exread

Cli = Callable[..., "tuple[int, str, str]"]
LOGS = DATA / "logs"
RECORDED_LOCK = DATA / "lock" / "conda-lock-4912053-install-with-pip-deps.yml"



def _sparse(path: Path, size: int, head: bytes = b"") -> Path:
    """A file of ``size`` bytes that takes no disk: ``head`` then a hole (reads as NUL bytes)."""
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(size)
    return path


def _one_line_error(code: int, err: str, *must: str) -> None:
    assert code == 2, err
    assert err.startswith("tfgpu: error: ")
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    for m in must:
        assert m in err, err


# --------------------------------------------------------------------------- facts files


@pytest.mark.parametrize(("content", "problem"), [
    (b"{not json", "not valid JSON (line 1, column 2"),
    (b"", "not valid JSON"),
    (b'{"schema": "tfgpu.facts/1",}', "not valid JSON"),
    (b"[1, 2, 3]", "does not hold a JSON object"),
    (b"null", "does not hold a JSON object"),
    (b'"facts"', "does not hold a JSON object"),
    (b'{"schema": "tfgpu.facts/2"}', "has schema 'tfgpu.facts/2'"),
    (b'{"schema": "conda.info/1"}', "tfgpu reads 'tfgpu.facts/1'"),
    (b'{"schema": 1}', "has schema 1"),
    (b'{"gpus": "four"}', "facts.gpus: expected array"),
    (b'{"gpus": [{"index": 0, "memory_mib": "lots"}]}', "facts.gpus[0].memory_mib"),
    (b'{"driver": {"version": 550}}', "facts.driver.version"),
    (b'{"platform": []}', "facts.platform: expected object"),
    (b'{"schema": "tfgpu.doctor/1", "facts": "none"}', "does not hold a JSON object"),
    (b"\xff\xfe{\x00}\x00", "not UTF-8 text"),  # UTF-16 (a PowerShell redirect)
    (bytes(range(256)) * 8, "not UTF-8 text"),
    (b"\x00" * 4096, "not valid JSON"),  # NULs are UTF-8, not JSON
    (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
])
def test_bad_facts_files_exit_2_with_one_line(tmp_path: Path, cli: Cli, content: bytes, problem: str) -> None:
    path = tmp_path / "facts.json"
    path.write_bytes(content)
    code, out, err = cli("doctor", "--facts", str(path), "--json")
    _one_line_error(code, err, str(path), problem)
    assert out == ""


def test_huge_sparse_facts_file_is_refused_without_reading_it(tmp_path: Path, cli: Cli) -> None:
    path = _sparse(tmp_path / "facts.json", 200 * 1024 * 1024, b'{"schema": "tfgpu.facts/1", "notes": ["')
    t0 = time.monotonic()
    code, _, err = cli("doctor", "--facts", str(path))
    assert time.monotonic() - t0 < 5.0
    _one_line_error(code, err, str(path), "larger than 16 MB")


def test_endless_facts_file_is_bounded(cli: Cli) -> None:
    t0 = time.monotonic()
    code, _, err = cli("doctor", "--facts", "/dev/zero")
    assert time.monotonic() - t0 < 5.0
    _one_line_error(code, err, "/dev/zero", "larger than 16 MB")


@pytest.mark.parametrize("path", ["/", "/proc/self/nonexistent", "/etc/shadow-not-here"])
def test_facts_path_that_is_a_directory_or_missing(cli: Cli, path: str) -> None:
    code, _, err = cli("doctor", "--facts", path)
    _one_line_error(code, err, path)


def test_non_finite_numbers_in_facts_never_make_invalid_json(tmp_path: Path, cli: Cli) -> None:
    # Python's json reads NaN/Infinity; a report must still be strict JSON (or the file refused)
    path = tmp_path / "facts.json"
    path.write_text('{"schema": "tfgpu.facts/1", "gpus": [{"index": 0, "name": "x", "memory_mib": Infinity, '
                    '"compute_capability": "8.6"}], "timings": {"total": NaN}}')
    code, out, err = cli("doctor", "--facts", str(path), "--json")
    if code == 2:
        _one_line_error(code, err, str(path))
        return
    assert code in (0, 1), err

    def refuse(token: str) -> Any:
        raise AssertionError(f"non-standard JSON constant {token} in the report")

    json.loads(out, parse_constant=refuse)


# --------------------------------------------------------------------------- lockfiles

_ALIAS_BOMB = "version: 1\na: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)
) + "metadata: *i\npackage: []\n"


@needs_engine
@pytest.mark.parametrize(("content", "problem"), [
    (b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 16, "cannot be read as UTF-8"),
    (b"\x00" * 10_000, "not a valid conda-lock file"),
    (b"version: 1\nmetadata: {content_hash: {linux-64: 0}, channels: [], platforms: [linux-64], sources: []}\n"
     b"package:\n  - name: python\n    version: [3, 8]\n", "not a valid conda-lock file"),
    (b"version: '1'\nmetadata: {}\npackage: {}\n", "not a valid conda-lock file"),
    (b"version: 7\nmetadata: {}\npackage: []\n", "unknown version 7|not a valid conda-lock file"),
    (b"[" * 100_000, "not a valid conda-lock file"),
    (_ALIAS_BOMB.encode(), "not a valid conda-lock file"),
    (b"version: 1\n\tmetadata: {}\n", "not a valid conda-lock file"),
])
def test_bad_lockfiles_are_one_line_input_errors_in_bounded_time(tmp_path: Path, content: bytes,
                                                                  problem: str) -> None:
    path = tmp_path / "conda-lock.yml"
    path.write_bytes(content)
    t0 = time.monotonic()
    with pytest.raises(InputError, match=problem) as info:
        lockfiles.read_conda_lock(path)
    assert time.monotonic() - t0 < 5.0
    line = info.value.one_line()
    assert "\n" not in line
    assert str(path) in line
    assert info.value.exit_code == 2


@needs_engine
def test_truncated_real_lockfile_is_an_input_error(tmp_path: Path) -> None:
    text = RECORDED_LOCK.read_bytes()
    for cut in (len(text) // 3, len(text) // 2, len(text) - 7):
        path = tmp_path / f"cut-{cut}.yml"
        path.write_bytes(text[:cut])
        try:
            lock = lockfiles.read_conda_lock(path)
        except InputError as exc:
            problem: str | None = exc.one_line()
        else:
            problem = None
        if problem is not None:
            assert "\n" not in problem
            assert str(path) in problem
        else:  # a cut between fields can still parse: then only whole packages of the full file come back
            full = {p.key: p for p in lockfiles.read_conda_lock(RECORDED_LOCK).packages}
            for pkg in lock.packages:
                assert pkg.key in full
                assert (pkg.url, pkg.sha256 or pkg.md5) == (full[pkg.key].url, full[pkg.key].sha256 or full[pkg.key].md5)


def test_huge_sparse_lockfile_is_refused_without_parsing(tmp_path: Path) -> None:
    path = _sparse(tmp_path / "conda-lock.yml", 200 * 1024 * 1024, b"version: 1\nmetadata:\n")
    t0 = time.monotonic()
    with pytest.raises(InputError, match="larger than any lockfile") as info:
        lockfiles.read_conda_lock(path)
    assert time.monotonic() - t0 < 2.0
    assert "\n" not in info.value.one_line()


def test_lockfile_that_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is not a file"):
        lockfiles.read_conda_lock(tmp_path)


@needs_engine
def test_engine_install_lock_with_a_bad_lockfile_exits_2(tmp_path: Path) -> None:
    from tfgpu.backends.rattler.__main__ import main

    bad = tmp_path / "conda-lock.yml"
    bad.write_bytes(b"version: 1\n  metadata: [\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["install-lock", "--lock", str(bad), "--prefix", str(tmp_path / "env"), "--offline"])
    assert code == 2
    assert err.getvalue().count("\n") == 1
    assert "not a valid conda-lock file" in err.getvalue()
    assert not (tmp_path / "env").exists()


# --------------------------------------------------------------------------- logs


def _ids(report: explain.ExplainReport) -> list[str]:
    return [f.id for f in report.findings]


def test_binary_log_is_read_safely(tmp_path: Path) -> None:
    path = tmp_path / "core"
    path.write_bytes(random.Random(7).randbytes(2 * 1024 * 1024))
    report = exread.explain_file(path)
    assert report.bytes_read == 2 * 1024 * 1024
    assert all("\n" not in f.text and len(f.text) <= explain.TEXT_CHARS for f in report.findings)
    json.dumps(report.to_json())


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "latin-1", "utf-8-crlf"])
def test_log_in_any_encoding_still_finds_the_known_problem(tmp_path: Path, encoding: str) -> None:
    text = (LOGS / "driver_too_old_p100_tf111.log").read_text(encoding="utf-8")
    if encoding == "utf-8-crlf":
        data = text.replace("\n", "\r\n").encode()
    else:
        data = (text + "caf\u00e9\n").encode(encoding)
    path = tmp_path / "tf.log"
    path.write_bytes(data)
    report = exread.explain_file(path)
    assert "cuda.driver_insufficient" in _ids(report)


def test_log_with_nul_bytes_and_an_endless_line(tmp_path: Path) -> None:
    tail = (LOGS / "wsl2_libcuda_missing_tf23.log").read_bytes()
    path = tmp_path / "tf.log"
    with path.open("wb") as fh:
        fh.write(b"x" * (3 * 1024 * 1024))  # one 3 MB line with no newline
        fh.write(b"\n" + b"\x00" * 1024 + b"\n")
        fh.write(tail)
    t0 = time.monotonic()
    report = exread.explain_file(path)
    assert time.monotonic() - t0 < 10.0
    assert "dlopen.libcuda" in _ids(report)
    assert any("cut" in n for n in report.notes)
    assert any("NUL" in n for n in report.notes)


@pytest.mark.parametrize("target", ["dir", "missing"])
def test_log_path_that_is_not_a_file(tmp_path: Path, target: str) -> None:
    path = tmp_path if target == "dir" else tmp_path / "missing.log"
    with pytest.raises(InputError) as info:
        exread.explain_file(path)
    assert "\n" not in info.value.one_line()
    assert info.value.exit_code == 2


@pytest.mark.skipif(importlib.util.find_spec("tfgpu.cli.commands.explain") is None,
                    reason="the `tfgpu explain` command is not registered in this tree yet")
def test_cli_explain_reads_binary_and_huge_logs(tmp_path: Path, cli: Cli) -> None:
    binary = tmp_path / "core"
    binary.write_bytes(random.Random(3).randbytes(256 * 1024))
    code, out, err = cli("explain", "--no-probe", str(binary))
    assert code in (0, 1), err
    assert "Traceback" not in out + err
    code, _, err = cli("explain", "--no-probe", str(tmp_path / "missing.log"))
    _one_line_error(code, err, "missing.log")


def test_200_mb_sparse_log_is_read_in_bounded_time_and_memory(tmp_path: Path) -> None:
    import tracemalloc

    tail = (LOGS / "driver_too_old_p100_tf111.log").read_bytes()
    path = _sparse(tmp_path / "huge.log", 200 * 1024 * 1024)
    with path.open("ab") as fh:
        fh.write(b"\n" + tail)
    tracemalloc.start()
    t0 = time.monotonic()
    try:
        report = exread.explain_file(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - t0 < 120
    assert peak < 64 * 1024 * 1024, f"peak {peak / 1048576:.0f} MB"
    assert "cuda.driver_insufficient" in _ids(report)  # the end of the log is always scanned
    assert report.bytes_read == path.stat().st_size
