"""Issue 30: the generated jobs run on the real engines this machine can run. Ansible (ansible-core from PyPI)
plays the playbook against localhost; Slurm from Debian's packages (slurm-wlm, munge) runs the sbatch
script end to end on one slurmctld + slurmd on localhost that the test starts and stops. Each skips, with
the reason, where its engine is not installed (`nox -s slow` installs ansible-core; .ci/run installs
slurm-wlm as root)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tfgpu.tools.fleet import engines

pytestmark = [pytest.mark.slow, pytest.mark.real_subprocess]

BIN = Path(sys.executable).parent
#: A GPU machine as the doctor's overrides describe it (docs/guide.md, "Overrides"): judged as such on this GPU-less
#: machine, so that some series are usable and the jobs have something to tag.
GPU_OVERRIDES = {"TFGPU_DRIVER_VERSION": "550.54.15", "TFGPU_GPU_NAME": "NVIDIA A100-SXM4-80GB", "TFGPU_GPU_CC": "8.0"}


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", LC_ALL="C.UTF-8", **extra)
    env.pop("TFGPU_HOME", None)
    return env


def _own_results(reports: Path) -> dict[str, Any]:
    """What `tfgpu fleet nodes --json` says of the collected reports (the same code the jobs ran)."""
    out = subprocess.run([str(BIN / "tfgpu"), "fleet", "nodes", str(reports), "--json"], capture_output=True,
                         text=True, env=_env(), check=True, timeout=120)
    nodes: dict[str, Any] = json.loads(out.stdout)["nodes"]
    return nodes


# --------------------------------------------------------------------------- Ansible


def test_the_playbook_runs_on_localhost_and_sets_each_hosts_facts(tmp_path: Path) -> None:
    playbook_bin = BIN / "ansible-playbook"
    if not playbook_bin.exists():
        pytest.skip("ansible-core is not installed in this environment (nox -s slow installs it)")
    reports = tmp_path / "reports"
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(f"[gpu]\nlocalhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    facts_file = tmp_path / "facts.json"
    play = engines.ansible_playbook(hosts="gpu", reports=str(reports))
    # a later play uses the facts, as an administrator's would
    play += f"""
- name: use the facts
  hosts: gpu
  gather_facts: false
  tasks:
    - name: keep them
      ansible.builtin.copy:
        content: "{{{{ {{'verdict': tfgpu_verdict, 'ready': tfgpu_tf_ready}} | to_json }}}}"
        dest: "{facts_file}"
        mode: "0644"
"""
    (tmp_path / "preflight.yml").write_text(play)
    done = subprocess.run([str(playbook_bin), "-i", str(inventory), str(tmp_path / "preflight.yml")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600,
                          env=_env(ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "ah"),
                                   **GPU_OVERRIDES))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert (reports / "localhost.json").is_file()
    assert (reports / "fleet.html").read_text().startswith("<!DOCTYPE html>")
    got = json.loads(facts_file.read_text())
    want = _own_results(reports)["localhost"]
    assert got == {"verdict": want["verdict"], "ready": want["tf_ready"] or ""}
    assert got["ready"], "the A100 overrides make some series usable"


# --------------------------------------------------------------------------- Slurm


def _slurm_missing() -> str | None:
    if os.geteuid() != 0:
        return "a private slurmctld/slurmd needs root (SlurmUser=root)"
    for program in ("slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "munged"):
        if shutil.which(program, path=f"/usr/sbin:/usr/bin:{os.environ.get('PATH', '')}") is None:
            return f"{program} is not installed (apt-get install slurm-wlm munge; .ci/run does it as root)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def slurm(tmp_path: Path) -> Iterator[dict[str, str]]:
    """One slurmctld and one slurmd on localhost (2 stand-in GPUs as GRES), with their own munged;
    all three stopped after the test."""
    reason = _slurm_missing()
    if reason:
        pytest.skip(reason)
    sbin = "/usr/sbin"
    host = socket.gethostname().split(".")[0]
    root = tmp_path / "slurm"
    for d in ("state", "spool", "munge", "log"):
        (root / d).mkdir(parents=True)
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    socket_path = root / "munge" / "munge.socket"
    conf = root / "slurm.conf"
    conf.write_text(f"""ClusterName=tfgputest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
AuthInfo=socket={socket_path}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool"}
SlurmctldPidFile={root / "slurmctld.pid"}
SlurmdPidFile={root / "slurmd.pid"}
SlurmctldLogFile={root / "log" / "slurmctld.log"}
SlurmdLogFile={root / "log" / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
GresTypes=gpu
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} Gres=gpu:2 Features=ib State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    # two stand-in device files: slurmd counts a GPU per File (a Count alone reports none)
    (root / "gres.conf").write_text(f"NodeName={host} Name=gpu File=/dev/null\nNodeName={host} Name=gpu File=/dev/zero\n")
    (root / "cgroup.conf").write_text("CgroupPlugin=autodetect\n")
    env = _env(SLURM_CONF=str(conf), **GPU_OVERRIDES)
    started: list[subprocess.Popen[bytes]] = []
    try:
        started.append(subprocess.Popen([f"{sbin}/munged", "-F", "--force", f"--key-file={key}",
                                         f"--socket={socket_path}", f"--pid-file={root / 'munge' / 'munged.pid'}",
                                         f"--log-file={root / 'log' / 'munged.log'}",
                                         f"--seed-file={root / 'munge' / 'munged.seed'}"], env=env))
        for _ in range(50):
            if socket_path.exists():
                break
            time.sleep(0.1)
        started.append(subprocess.Popen([f"{sbin}/slurmctld", "-D", "-i", "-f", str(conf)], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        started.append(subprocess.Popen([f"{sbin}/slurmd", "-D", "-f", str(conf), "-N", host], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for _ in range(150):
            state = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], capture_output=True, text=True, env=env)
            if state.stdout.strip() in ("idle", "mix"):
                break
            time.sleep(0.2)
        else:
            logs = "".join((root / "log" / f).read_text()[-1500:] for f in ("slurmctld.log", "slurmd.log")
                           if (root / "log" / f).exists())
            pytest.fail(f"slurmd did not come up: {state.stdout!r} {state.stderr!r}\n{logs}")
        yield {"env": json.dumps(env), "host": host, "root": str(root)}
    finally:
        for p in reversed(started):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_the_sbatch_script_runs_end_to_end_and_tags_the_node(slurm: dict[str, str], tmp_path: Path) -> None:
    env: dict[str, str] = json.loads(slurm["env"])
    host = slurm["host"]
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    script = engines.slurm_script(nodes=1, partition="gpu", gpus_per_node=2, features=True, time="00:05:00")
    (job_dir / "preflight.sbatch").write_text(script)
    env["TFGPU"] = str(BIN / "tfgpu")
    submitted = subprocess.run(["sbatch", "--parsable", "--wait", "preflight.sbatch"], cwd=job_dir, env=env,
                               capture_output=True, text=True, timeout=600)
    job = submitted.stdout.strip().split(";")[0]
    output = (job_dir / f"tfgpu-preflight-{job}.out").read_text() if job else ""
    assert submitted.returncode == 0, submitted.stderr + output[-3000:]
    reports = job_dir / "tfgpu-fleet" / job
    report = json.loads((reports / f"{host}.json").read_text())
    assert report["schema"] == "tfgpu.doctor/1"
    gpus_seen = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True, env=env).stdout
    assert "gpu:2" in gpus_seen or "gpu=2" in gpus_seen, gpus_seen
    assert (reports / "fleet.html").is_file()
    want = _own_results(reports)[host]
    features = (reports / "features.sh").read_text()
    ours = ",".join(f"tf{s}" for s in want["usable"])
    assert features.strip() == f"scontrol update NodeName={host} AvailableFeatures=ib,{ours}"
    assert f"scontrol update NodeName={host}" in output  # the job printed them
    applied = subprocess.run(["sh", str(reports / "features.sh")], env=env, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    node = subprocess.run(["scontrol", "show", "node", host], capture_output=True, text=True, env=env).stdout
    assert f"AvailableFeatures=ib,{ours}" in node, node
    constrained = subprocess.run(["sbatch", "--parsable", "--wait", f"--constraint=tf{want['tf_ready']}",
                                  "--wrap", "true"], cwd=job_dir, env=env, capture_output=True, text=True, timeout=300)
    assert constrained.returncode == 0, constrained.stderr
