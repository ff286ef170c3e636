"""The GPU check of issue 27, section 5 (scripts/gpu_check.sh + scripts/gpu_check.py; CONTRIBUTING.md, "A real GPU").

The comparison is pure code, tested here on recorded real nvidia-smi and /proc outputs (tests/data/probe/, provenance
in SOURCES.md there) laid out as the script lays out what it collects (a fake collected tree with its manifest). The
doctor's side is the facts document (tfgpu's own format); where it is built from a recorded output, tfgpu's own parser
builds it, so the test also shows tfgpu's parser and the script's independent reader agree on that output.

Every run recorded on a real GPU (tests/data/gpu/<machine>/, `gpu_check.py import`) is checked here too: no FAIL,
and tfgpu's parsers read its nvidia-smi outputs as the doctor did. The shell script: shellcheck here, a dry run on
this GPU-less machine and a hung nvidia-smi under `slow` (`nox -s gpu` runs the dry run too)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests import REPO
from tests.conftest import DATA, load_file_module
from tfgpu.facts.probe import parsers as P

G: Any = load_file_module(REPO / "scripts" / "gpu_check.py", "tfgpu_script_gpu_check")
SCRIPT = REPO / "scripts" / "gpu_check.sh"
SMI = DATA / "probe" / "nvidia-smi"
PROCS = DATA / "probe" / "proc"
RECORDED = DATA / "gpu"

RTX2080S_CSV = SMI / "csv-query-gpu-allfields-1gpu-rtx2080super-595.71.05.csv"
H100_Q = SMI / "q-8gpu-h100-535.161.08.txt"
H100_TABLE = SMI / "table-8gpu-h100-550.90.07.txt"


# --------------------------------------------------------------------------- readers on recorded outputs


def test_the_csv_reader_takes_the_header_with_its_units() -> None:
    rows = G.read_query_csv(RTX2080S_CSV.read_text())
    assert len(rows) == 1
    row = rows[0]
    assert (row["name"], row["driver_version"], row["compute_cap"]) == ("NVIDIA GeForce RTX 2080 SUPER", "595.71.05", "7.5")
    assert row["memory.total"] == "8192 MiB"  # the key without " [MiB]", the value as printed
    assert row["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
    two = G.read_query_csv((SMI / "csv-2gpu-titanv-rtx5880ada-570.86.15.csv").read_text())
    assert [(r["index"], r["compute_cap"]) for r in two] == [("0", "7.0"), ("1", "8.9")]


@pytest.mark.parametrize("name", ["fail-compute-cap-not-valid-field.txt", "fail-couldnt-communicate.txt",
                                  "fail-driver-library-mismatch-nvml-570.124.txt"])
def test_an_error_message_is_no_csv(name: str) -> None:
    assert G.read_query_csv((SMI / name).read_text()) == []


def test_the_q_reader_on_eight_h100s() -> None:
    q = G.read_q_text(H100_Q.read_text())
    assert (q["driver"], q["cuda"], q["attached"]) == ("535.161.08", "12.2", 8)
    assert len(q["gpus"]) == 8
    assert {g["name"] for g in q["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    assert {g["memory_mib"] for g in q["gpus"]} == {81559}  # FB Memory Usage / Total, not BAR1's 131072
    assert len({g["uuid"] for g in q["gpus"]}) == 8
    assert q["gpus"][0]["bus_id"] == "00000000:19:00.0"


def test_the_q_reader_on_a_titan_v() -> None:
    q = G.read_q_text((SMI / "q-1gpu-titanv-560.35.03.txt").read_text())
    assert (q["driver"], q["cuda"], q["attached"]) == ("560.35.03", "12.6", 1)
    assert q["gpus"] == [{"bus_id": "00000000:01:00.0", "name": "NVIDIA TITAN V",
                          "uuid": "GPU-f4c353ff-b56c-c1de-bcb9-7dad861b589a", "memory_mib": 12288}]


@pytest.mark.parametrize(("name", "driver", "cuda"), [
    ("table-8gpu-h100-550.90.07.txt", "550.90.07", "12.4"),
    ("table-2gpu-b200-610.43.02-kmd-umd-TRUNCATED.txt", "610.43.02", "13.3"),  # R610: KMD / CUDA UMD Version
    ("table-1gpu-396.24-no-cuda-version-TRUNCATED.txt", "396.24", None),
    ("table-1gpu-wsl2-545.46-driver-546.80-cuda-ERR-TRUNCATED.txt", "546.80", None),  # "CUDA Version: ERR!"
])
def test_the_table_reader(name: str, driver: str, cuda: str | None) -> None:
    assert G.read_table((SMI / name).read_text()) == {"driver": driver, "cuda": cuda}


@pytest.mark.parametrize(("name", "version"), [
    ("driver-version-384.98-ubuntu.txt", "384.98"),
    ("driver-version-580.173.02-truenas.txt", "580.173.02"),
    ("driver-version-open-525.60.11-arch.txt", "525.60.11"),
    ("driver-version-open-565.57.01-ubuntu24.04.txt", "565.57.01"),
    ("driver-version-open-aarch64-jetson-l4t-35.3.1.txt", "35.3.1"),
    ("driver-version-absent-helper-vm.stderr.txt", None),
])
def test_the_proc_reader(name: str, version: str | None) -> None:
    assert G.read_proc((PROCS / name).read_text()) == version


# --------------------------------------------------------------------------- a fake collected tree


def collected(tmp: Path, doctor: dict[str, Any] | None, files: dict[str, Path | str],
              rcs: dict[str, str] | None = None) -> Path:
    """A directory as scripts/gpu_check.sh leaves it: each output under the script's name, and manifest.tsv."""
    steps = {G.SMI_TABLE: "smi-table", G.SMI_CSV: "smi-query", G.SMI_Q: "smi-q", G.PROC: "proc-version"}
    rcs = rcs or {}
    (tmp / "stderr").mkdir(parents=True, exist_ok=True)
    manifest = []
    for name, src in files.items():
        (tmp / name).write_text(src.read_text() if isinstance(src, Path) else src)
        step = steps[name]
        manifest.append(f"{step}\t{rcs.get(step, '0')}\t0\t{name}\tnvidia-smi")
    for step, rc in rcs.items():
        if step not in {steps[n] for n in files}:
            manifest.append(f"{step}\t{rc}\t0\t-\tnvidia-smi")
    (tmp / G.MANIFEST).write_text("\n".join(manifest) + "\n")
    if doctor is not None:
        (tmp / G.DOCTOR).write_text(json.dumps(doctor))
    return tmp


def doctor_from(gpus: list[dict[str, Any]], driver: dict[str, Any]) -> dict[str, Any]:
    """The part of `tfgpu doctor --json` the check reads (schema tfgpu.doctor/1: facts.driver, facts.gpus)."""
    return {"schema": "tfgpu.doctor/1", "facts": {"driver": driver, "gpus": gpus}}


def rtx2080s_doctor() -> dict[str, Any]:
    """What the doctor holds for the RTX 2080 SUPER machine, read from its recorded CSV by tfgpu's own parser."""
    gpus = P.parse_smi_csv(RTX2080S_CSV.read_text())
    return doctor_from(gpus, {"version": gpus[0]["driver_version"], "cuda": None, "kernel_module": None,
                              "mismatch": False})


def h100_doctor() -> dict[str, Any]:
    q = G.read_q_text(H100_Q.read_text())
    gpus = [{"index": i, "name": g["name"], "uuid": g["uuid"], "memory_mib": g["memory_mib"], "compute_capability": "9.0",
             "pci_bus_id": g["bus_id"]} for i, g in enumerate(q["gpus"])]
    return doctor_from(gpus, {"version": "535.161.08", "cuda": "12.2", "kernel_module": "535.161.08", "mismatch": False})


def by_fact(lines: list[Any]) -> dict[str, Any]:
    return {ln.fact: ln for ln in lines}


def test_tfgpus_parser_and_the_independent_reader_agree_on_a_real_csv(tmp_path: Path) -> None:
    lines = by_fact(G.compare_dir(collected(tmp_path, rtx2080s_doctor(), {G.SMI_CSV: RTX2080S_CSV})))
    for fact in ("GPU count", "driver", "GPU names", "compute capabilities", "memory (MiB)", "UUID count", "UUIDs",
                 "PCI bus ids"):
        assert lines[fact].status == G.PASS, lines[fact]
    assert lines["kernel module"].status == G.SKIP  # no /proc file collected
    assert lines["CUDA version (driver)"].status == G.SKIP  # no -q, no table


def test_eight_h100s_against_their_q_output(tmp_path: Path) -> None:
    lines = G.compare_dir(collected(tmp_path, h100_doctor(), {G.SMI_Q: H100_Q}))
    facts = by_fact(lines)
    for fact in ("GPU count", "driver", "CUDA version (driver)", "GPU names", "memory (MiB)", "UUID count", "UUIDs",
                 "PCI bus ids"):
        assert facts[fact].status == G.PASS, facts[fact]
    assert facts["compute capabilities"].status == G.SKIP  # -q of 535 prints none
    assert G.verdict_of(lines).startswith("PASS")


@pytest.mark.parametrize(("change", "fact"), [
    (lambda d: d["facts"]["driver"].update(version="535.161.07"), "driver"),
    (lambda d: d["facts"]["driver"].update(cuda="12.4"), "CUDA version (driver)"),
    (lambda d: d["facts"]["gpus"][3].update(memory_mib=81920), "memory (MiB)"),
    (lambda d: d["facts"]["gpus"][7].update(name="NVIDIA H100"), "GPU names"),
    (lambda d: d["facts"]["gpus"][0].update(uuid=None), "UUID count"),
    (lambda d: d["facts"]["gpus"].pop(), "GPU count"),
    (lambda d: d["facts"]["gpus"][1].update(pci_bus_id="0000:3c:00.0"), "PCI bus ids"),
])
def test_every_disagreement_is_a_fail_with_both_values(tmp_path: Path, change: Any, fact: str) -> None:
    doctor = h100_doctor()
    change(doctor)
    lines = by_fact(G.compare_dir(collected(tmp_path, doctor, {G.SMI_Q: H100_Q})))
    assert lines[fact].status == G.FAIL
    assert "doctor" in lines[fact].detail
    assert "-q" in lines[fact].detail or "nvidia-smi" in lines[fact].detail


def test_a_fail_makes_the_verdict_and_the_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doctor = h100_doctor()
    doctor["facts"]["driver"]["version"] = "550.54.15"
    folder = collected(tmp_path, doctor, {G.SMI_Q: H100_Q})
    assert G.main(["compare", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  driver: doctor '550.54.15'; -q '535.161.08'" in out
    assert out.strip().splitlines()[-1].startswith("FAIL (1 of")
    assert json.loads((folder / "compare.json").read_text())[1]["status"] == "FAIL"


def test_the_kernel_module_and_the_mismatch_flag_against_a_fake_proc_tree(tmp_path: Path) -> None:
    # a machine whose kernel module (/proc: 565.57.01, a real file) is not the user-space driver nvidia-smi loads
    # (the 8 x H100 table, 550.90.07): the doctor must say so with its mismatch flag
    proc = PROCS / "driver-version-open-565.57.01-ubuntu24.04.txt"
    gpus = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": None, "memory_mib": 81559} for i in range(8)]
    doctor = doctor_from(gpus, {"version": "550.90.07", "cuda": "12.4", "kernel_module": "565.57.01", "mismatch": True})
    lines = by_fact(G.compare_dir(collected(tmp_path / "a", doctor, {G.SMI_TABLE: H100_TABLE, G.PROC: proc})))
    assert lines["kernel module"].status == G.PASS
    assert lines["driver mismatch flag"].status == G.PASS
    assert lines["driver"].status == G.PASS
    doctor["facts"]["driver"]["mismatch"] = False
    lines = by_fact(G.compare_dir(collected(tmp_path / "b", doctor, {G.SMI_TABLE: H100_TABLE, G.PROC: proc})))
    assert lines["driver mismatch flag"].status == G.FAIL


def test_no_gpu_here_is_a_clean_answer(tmp_path: Path) -> None:
    doctor = doctor_from([], {"version": None, "cuda": None, "error": "no NVIDIA GPU found (no NVIDIA display device "
                                                                       "on the PCI bus) and no NVIDIA driver"})
    lines = G.compare_dir(collected(tmp_path, doctor, {}, rcs={"smi-table": "absent", "proc-version": "absent"}))
    assert [(ln.status, ln.fact) for ln in lines] == [(G.INFO, "no GPU here"), (G.PASS, "doctor agrees")]
    assert "nvidia-smi not found" in lines[0].detail
    assert G.verdict_of(lines) == "no GPU here"


def test_a_failing_nvidia_smi_is_named_with_its_own_words(tmp_path: Path) -> None:
    folder = collected(tmp_path, doctor_from([], {"version": None}), {G.SMI_TABLE: ""},
                       rcs={"smi-table": "9", "proc-version": "absent"})
    shutil.copyfile(SMI / "fail-couldnt-communicate.txt", folder / G.SMI_TABLE)  # nvidia-smi prints it on stdout
    lines = G.compare_dir(folder)
    assert lines[0].fact == "no GPU here"
    assert "nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate" in lines[0].detail


def test_a_missing_doctor_document_is_a_fail(tmp_path: Path) -> None:
    lines = G.compare_dir(collected(tmp_path, None, {G.SMI_Q: H100_Q}))
    assert [ln.status for ln in lines] == [G.FAIL]


def test_an_output_of_a_failed_step_is_not_a_reference(tmp_path: Path) -> None:
    # nvidia-smi cut at its time limit (124) after printing half a table: nothing of it is compared
    lines = by_fact(G.compare_dir(collected(tmp_path, h100_doctor(), {G.SMI_TABLE: H100_TABLE, G.SMI_Q: H100_Q},
                                            rcs={"smi-table": "124"})))
    assert "table" not in lines["driver"].detail


# --------------------------------------------------------------------------- timing, summary, what comes back


def test_the_timing_table_takes_medians_and_the_difference_to_python() -> None:
    results = [G.Timing("python3 -c pass", [], [0.010, 0.012, 0.011], []),
               G.Timing("python3 -m tfgpu doctor --json", [], [0.090, 0.200, 0.100], ["timed out after 60 s"])]
    table = G.timing_table(results, (0.5, ""))
    assert "| `python3 -c pass` | 3 | 11.0 | 10.0 | 12.0 | +0.0 |" in table
    assert "| `python3 -m tfgpu doctor --json` | 3 | 100.0 | 90.0 | 200.0 | +89.0 (1 failed: timed out after 60 s) |" in table
    assert "empty knowledge-base cache (one run, before the others): 500.0 ms" in table


def test_the_timing_runs_interleave_and_stop_at_the_deadline() -> None:
    py = [sys.executable, "-c", "pass"]
    results = G.time_commands([("a", py), ("b", [*py[:2], "raise SystemExit(3)"])], 2, dict(os.environ), timeout=30)
    assert len(results[0].seconds) == 2
    assert results[1].failures == ["exit 3: ", "exit 3: "]
    stopped = G.time_commands([("a", py)], 50, dict(os.environ), deadline=time.monotonic())
    assert stopped[0].seconds == []


def test_check_out_counts_files_and_sizes(tmp_path: Path) -> None:
    assert G.check_out(tmp_path) == ["no summary.txt"]
    (tmp_path / "summary.txt").write_text("x")
    for i in range(8):
        (tmp_path / f"f{i}").write_text("x")
    assert G.check_out(tmp_path) == ["9 files (at most 8)"]


def test_the_summary_reads_a_collected_tree(tmp_path: Path) -> None:
    folder = collected(tmp_path, h100_doctor(), {G.SMI_Q: H100_Q})
    (folder / "explain-torch-oom.json").write_text(json.dumps({"summary": "oom.torch_cuda", "findings": [
        {"id": "oom.torch_cuda", "line": 3, "text": "torch.OutOfMemoryError: CUDA out of memory."}]}))
    text = G.summary(folder)
    assert text.startswith("tfgpu GPU check: PASS")
    assert "  - oom.torch_cuda (line 3): torch.OutOfMemoryError: CUDA out of memory." in text
    assert "jax-ok.log: exit ? after ? s" in text


# --------------------------------------------------------------------------- import: the outputs as fixtures


def archive_of(folder: Path, out: Path, extra: dict[str, bytes] | None = None) -> Path:
    with tarfile.open(out, "w:gz") as tar:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                tar.add(p, arcname=f"gpu-check/{p.relative_to(folder)}")
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def test_import_masks_uuids_consistently_and_writes_the_origin(tmp_path: Path) -> None:
    folder = collected(tmp_path / "run", h100_doctor(), {G.SMI_Q: H100_Q})
    archive = archive_of(folder, tmp_path / "gpu-check.tar.gz", {"../evil.txt": b"x", "gpu-check/sub/x": b"x"})
    dest = tmp_path / "gpu"
    out = G.import_archive(archive, dest, "a test, 2026-11-28")
    assert out.name == "8x-nvidia-h100-80gb-hbm3-535.161.08"
    assert sorted(p.name for p in out.iterdir()) == sorted([G.DOCTOR, G.MANIFEST, G.SMI_Q])  # nothing outside
    q = (out / G.SMI_Q).read_text()
    assert "GPU-ee7954ec" not in q
    assert "GPU-00000000-0000-0000-0000-000000000007" in q
    assert "Serial Number                         : 0000000000000" in q
    assert G.verdict_of(G.compare_dir(out)).startswith("PASS")  # the same mask in every file
    sources = (dest / "SOURCES.md").read_text()
    assert "## 8x-nvidia-h100-80gb-hbm3-535.161.08" in sources
    assert "(a test, 2026-11-28)" in sources
    assert "| nvidia-smi-q.txt | smi-q | 0 | `nvidia-smi` |" in sources


# --------------------------------------------------------------------------- runs recorded on a real GPU


def _recorded() -> list[Path]:
    return sorted(p for p in RECORDED.iterdir() if p.is_dir()) if RECORDED.is_dir() else []


@pytest.mark.parametrize("run", _recorded() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no run of scripts/gpu_check.sh on a GPU is recorded yet (CONTRIBUTING.md, 'A real GPU')"))],
    ids=lambda p: p.name if p else "none")
def test_a_recorded_gpu_run_agrees_with_itself_and_with_tfgpus_parsers(run: Path) -> None:
    lines = G.compare_dir(run)
    assert not [ln for ln in lines if ln.status == G.FAIL], "\n".join(ln.text() for ln in lines)
    doctor = json.loads((run / G.DOCTOR).read_text())
    gpus = doctor["facts"]["gpus"]
    tfgpu_csv = run / G.SMI_CSV_TFGPU
    if tfgpu_csv.is_file() and tfgpu_csv.read_text().strip():
        parsed = P.parse_smi_csv(tfgpu_csv.read_text(), P.SMI_FIELDS)
        keys = ("name", "uuid", "compute_capability", "memory_mib")
        assert [{k: g.get(k) for k in keys} for g in parsed] == [{k: g.get(k) for k in keys} for g in gpus]
    if (run / G.SMI_TABLE).is_file():
        table = P.parse_smi_table((run / G.SMI_TABLE).read_text())
        assert (table["driver_version"], table["cuda"]) == (doctor["facts"]["driver"]["version"],
                                                            doctor["facts"]["driver"]["cuda"])
    if (run / G.SMI_QX).is_file():
        xml = P.parse_smi_xml((run / G.SMI_QX).read_text())
        assert xml["driver_version"] == doctor["facts"]["driver"]["version"]
        assert [g["uuid"] for g in xml["gpus"]] == [g.get("uuid") for g in gpus]


# --------------------------------------------------------------------------- the shell script


def test_the_script_writes_every_file_the_comparison_reads_and_the_probes_query() -> None:
    text = SCRIPT.read_text()
    for name in (G.SMI_TABLE, G.SMI_Q, G.SMI_QX, G.SMI_L, G.SMI_VERSION, G.SMI_CSV, G.SMI_CSV_TFGPU, G.PROC, G.DOCTOR,
                 "env.txt", G.MANIFEST):
        assert name in text, name
    for step in ("smi-table", "smi-query", "smi-q", "proc-version"):
        assert f"step {step} " in text or f"record {step} " in text or f"smi {step} " in text, step
    assert f"TFGPU_QUERY={','.join(P.SMI_FIELDS)}\n" in text
    assert f"\nQUERY={G.QUERY}\n" in text
    assert all(f"{op}" in text for op in G.LOGS)


def test_the_script_passes_shellcheck() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("no shellcheck (apt-get install shellcheck)")
    proc = subprocess.run([shellcheck, "--shell=bash", "--severity=style", str(SCRIPT)], capture_output=True,
                          text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stdout


def _run_script(tmp_path: Path, env: dict[str, str], budget: int = 200) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "out"
    full = {**os.environ, "TFGPU_GPU_CHECK_PYTHON": sys.executable, "TFGPU_GPU_CHECK_RUNS": "2",
            "TFGPU_GPU_CHECK_BUDGET": str(budget), **env}
    proc = subprocess.run(["bash", str(SCRIPT), str(out)], capture_output=True, text=True, env=full, check=False,
                          timeout=budget + 60)
    return proc, out


def _untar(out: Path, dest: Path) -> Path:
    with tarfile.open(out / "gpu-check.tar.gz") as tar:
        for member in tar.getmembers():
            assert member.name.startswith("gpu-check")
            assert ".." not in member.name
        tar.extractall(dest)  # our own archive, its names checked above
    return dest / "gpu-check"


@pytest.mark.slow
def test_a_dry_run_on_this_gpu_less_machine_says_so_and_exits_0(tmp_path: Path) -> None:
    env = {"PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                   if not (Path(p) / "nvidia-smi").exists())}
    proc, out = _run_script(tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert G.check_out(out) == []
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("tfgpu GPU check: no GPU here")
    work = _untar(out, tmp_path / "x")
    doctor = json.loads((work / G.DOCTOR).read_text())
    assert doctor["schema"] == "tfgpu.doctor/1"
    for log in G.LOGS:
        assert (work / f"explain-{log}.json").is_file()
    assert "| `python3 -m tfgpu doctor --json` | 2 |" in (work / "timing.md").read_text()


@pytest.mark.slow
def test_a_hung_nvidia_smi_costs_its_time_limit_not_the_run(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 600\n")
    (fake / "nvidia-smi").chmod(0o755)
    start = time.monotonic()
    proc, out = _run_script(tmp_path, {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}",
                                       "TFGPU_GPU_CHECK_SMI_TIMEOUT": "2"}, budget=150)
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert took < 80  # one nvidia-smi call of 2 s, the rest as in the dry run
    steps = G.read_manifest(_untar(out, tmp_path / "x"))
    assert steps["smi-table"]["rc"] == "124"
    assert {steps[s]["rc"] for s in ("smi-q", "smi-query", "smi-version")} == {"skipped-after-hang"}
    assert "nvidia-smi exited 124" in (out / "summary.txt").read_text()


@pytest.mark.slow
def test_recorded_outputs_on_a_fake_machine_disagree_with_this_doctor_and_say_so(tmp_path: Path) -> None:
    """A fake nvidia-smi printing the 8 x H100 outputs and a fake /proc file: the doctor here sees no GPU, so every
    fact is a FAIL, the summary says so and the script exits 1 (the FAIL path end to end)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text(f'#!/bin/sh\ncase "$1" in\n  -q) cat "{H100_Q}";;\n  "") cat "{H100_TABLE}";;\n'
                                     '  *) exit 6;;\nesac\n')
    (fake / "nvidia-smi").chmod(0o755)
    proc_file = tmp_path / "proc" / "driver" / "nvidia" / "version"
    proc_file.parent.mkdir(parents=True)
    shutil.copyfile(PROCS / "driver-version-580.173.02-truenas.txt", proc_file)
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "TFGPU_GPU_CHECK_PROC": str(proc_file)}
    proc, out = _run_script(tmp_path, env)
    assert proc.returncode == 1, proc.stderr
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("tfgpu GPU check: FAIL")
    assert "FAIL  GPU count: doctor 0; nvidia-smi 8" in summary
    assert "FAIL  kernel module: doctor None; /proc/driver/nvidia/version '580.173.02'" in summary
    assert G.check_out(out) == []


def test_a_command_that_hangs_in_its_warm_up_is_not_timed_again() -> None:
    hang = [sys.executable, "-c", "import time; time.sleep(30)"]
    start = time.monotonic()
    results = G.time_commands([("hang", hang)], 5, dict(os.environ), timeout=0.5)
    assert time.monotonic() - start < 10
    assert results[0].seconds == []
    assert results[0].failures == ["warm-up timed out after 0.5 s"]


def test_overrides_in_the_doctors_document_are_said_first(tmp_path: Path) -> None:
    doctor = h100_doctor()
    doctor["overrides"] = ["driver 550.54.15 (TFGPU_DRIVER)"]
    lines = G.compare_dir(collected(tmp_path, doctor, {G.SMI_Q: H100_Q}))
    assert lines[0] == G.Line(G.INFO, "overrides", "not probed: driver 550.54.15 (TFGPU_DRIVER)")
