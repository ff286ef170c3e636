"""What to run on each engine a cluster already has: an sbatch script, a Kubernetes manifest, an Ansible
playbook. Pure: values in, text out. tfgpu never runs sbatch, kubectl or ansible itself.

Every value the user gives is checked against the characters its engine allows there (exit 2 otherwise)
and then quoted for the place it lands in: shlex for shell words, JSON strings (valid YAML scalars) for
YAML. No user value is ever spliced into a script body.
"""

from __future__ import annotations

import json
import re
import shlex

from tfgpu.core.errors import UsageError
from tfgpu.tools.fleet.merge import MARKER

#: Where the doctor's reports are collected, relative to the job's working directory.
DEFAULT_REPORTS = "tfgpu-fleet"
#: Until tfgpu is on PyPI, nodes install it from its repository (README, "Fleets").
DEFAULT_PIP_SPEC = "git+https://github.com/tfgpu/tfgpu"
DEFAULT_IMAGE = "python:3.12"
APP_LABEL = "tfgpu-preflight"

_PATTERNS = {
    # sbatch's own grammars: a hostlist expression (node[01-04,07],gpu5), a partition list, a GRES spec
    "nodelist": re.compile(r"[A-Za-z0-9_.\-\[\],]{1,4096}"),
    "partition": re.compile(r"[A-Za-z0-9_.\-,]{1,256}"),
    "gres": re.compile(r"[A-Za-z0-9_:.,\-]{1,256}"),
    "time": re.compile(r"[0-9:\-]{1,20}"),
    # Kubernetes: a DNS-1123 label; an image reference (registry/name:tag@sha256:...)
    "namespace": re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"),
    "image": re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-/:@]{0,511}"),
    # Ansible host pattern (groups, globs, unions, exclusions); no Jinja braces
    "hosts": re.compile(r"[A-Za-z0-9_.\-:*!&,\[\]]{1,1024}"),
    "pip_spec": re.compile(r"[A-Za-z0-9_.\-+/:@=<>!~\[\],#]{1,1024}"),
    # a directory; never a leading "-" (read as an option by `mkdir -p` and by `tfgpu fleet merge`)
    "reports": re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_.\-/]{0,1023}"),
}


def check(kind: str, value: str, flag: str) -> str:
    """``value`` if it is a valid ``kind``; otherwise a UsageError (exit 2) that names the flag."""
    if not _PATTERNS[kind].fullmatch(value):
        shown = json.dumps(value)[:80]
        msg = f"{flag} {shown} has characters that {kind} values cannot hold"
        raise UsageError(msg, hint=f"allowed: {_PATTERNS[kind].pattern}")
    return value


def _check_tf(tf: str | None) -> str | None:
    if tf is None:
        return None
    if not re.fullmatch(r"latest|[0-9]{1,3}(\.[0-9]{1,3}){0,2}", tf):
        msg = f"--tf {json.dumps(tf)[:40]} is not a release (2.15.1), a series (2.15) or 'latest'"
        raise UsageError(msg)
    return tf


#: Public names for tfgpu.tools.ci, which writes CI files with the same checks and the same YAML quoting.
check_tf = _check_tf


def _merge_words(reports: str, tf: str | None, html: str | None) -> list[str]:
    words = ["fleet", "merge", reports]
    if tf:
        words += ["--tf", tf]
    if html:
        words += ["--html", html]
    return words


def slurm_script(*, nodes: int | None = None, nodelist: str | None = None, partition: str | None = None,
                 tf: str | None = None, gres: str | None = None, time: str = "00:10:00",
                 reports: str = DEFAULT_REPORTS) -> str:
    """An sbatch script: one `tfgpu doctor --json --redact` per node (srun, one task per node), one
    report per node in a directory, then `tfgpu fleet merge` over it."""
    if (nodes is None) == (nodelist is None):
        msg = "give either --nodes N or --nodelist LIST"
        raise UsageError(msg, hint="e.g. tfgpu fleet slurm --nodes 16 --partition gpu")
    if nodes is not None and not 1 <= nodes <= 100_000:
        msg = f"--nodes {nodes} is not between 1 and 100000"
        raise UsageError(msg)
    tf = _check_tf(tf)
    check("time", time, "--time")
    check("reports", reports, "--reports")
    lines = [
        "#!/bin/bash",
        "# tfgpu fleet preflight: `tfgpu doctor` once on every node, then one merged report.",
        "#   submit:  sbatch tfgpu-preflight.sbatch",
        "#   needs:   tfgpu on PATH on every node (or TFGPU=/shared/path/bin/tfgpu sbatch ...);",
        "#            the working directory on a filesystem every node shares.",
        "#SBATCH --job-name=tfgpu-preflight",
    ]
    if nodes is not None:
        lines.append(f"#SBATCH --nodes={nodes}")
    else:
        lines.append(f"#SBATCH --nodelist={check('nodelist', nodelist or '', '--nodelist')}")
    if partition:
        lines.append(f"#SBATCH --partition={check('partition', partition, '--partition')}")
    lines += [
        "#SBATCH --ntasks-per-node=1",
        # The whole node: no other job's processes on its GPUs while the doctor reads them.
        "#SBATCH --exclusive",
    ]
    if gres:
        # Where cgroups constrain devices, a job sees only the GPUs it was given.
        lines.append(f"#SBATCH --gres={check('gres', gres, '--gres')}")
    lines += [
        f"#SBATCH --time={time}",
        "#SBATCH --output=tfgpu-preflight-%j.out",
        "set -u",
        'TFGPU="${TFGPU:-tfgpu}"',
        f"REPORTS={shlex.quote(reports)}/\"${{SLURM_JOB_ID}}\"",
        'mkdir -p "$REPORTS"',
        "# One task per node; each writes <node>.json. A node whose doctor fails leaves no report, and the",
        "# merge below names it missing by its absence from the node count.",
        "srun --ntasks-per-node=1 --kill-on-bad-exit=0 \\",
        "  bash -c '\"$0\" doctor --json --redact > \"$1/${SLURMD_NODENAME}.json\"' \"$TFGPU\" \"$REPORTS\"",
        '"$TFGPU" fleet merge "$REPORTS"' + (f" --tf {shlex.quote(tf)}" if tf else "")
        + ' --html "$REPORTS/fleet.html"',
        "",
    ]
    return "\n".join(lines)


def _y(value: object) -> str:
    """A YAML scalar: JSON's string/number syntax is valid YAML, and quotes every special character."""
    return json.dumps(value)


yaml_scalar = _y


def k8s_manifest(*, namespace: str = "default", image: str | None = None, tf: str | None = None,
                 pip_spec: str = DEFAULT_PIP_SPEC) -> str:
    """A DaemonSet on every GPU node (label nvidia.com/gpu.present=true, GPU taints tolerated, one
    nvidia.com/gpu requested): it runs the doctor, prints the report as one marker line, and waits; the
    commands in the header collect the lines into `tfgpu fleet merge -`."""
    check("namespace", namespace, "--namespace")
    tf = _check_tf(tf)
    image = check("image", image or DEFAULT_IMAGE, "--image")
    check("pip_spec", pip_spec, "--pip-spec")
    # A constant script: the values above reach it only as environment variables.
    script = (
        "set -e; "
        'command -v tfgpu >/dev/null 2>&1 || python3 -m pip install --quiet --no-cache-dir "$TFGPU_PIP_SPEC" '
        ">/dev/null 2>&1; "
        "tfgpu doctor --json --redact > /tmp/tfgpu-report.json || true; "
        "python3 -c 'import json, os, sys; "
        f'print("{MARKER} node=" + os.environ["NODE_NAME"], json.dumps(json.load(open(sys.argv[1]))))\' '
        "/tmp/tfgpu-report.json; "
        "touch /tmp/tfgpu-report.done; exec sleep infinity"
    )
    selector = f"app.kubernetes.io/name={APP_LABEL}"
    merge = " ".join(shlex.quote(w) for w in ["tfgpu", *_merge_words("-", tf, "fleet.html")])
    header = [
        "# tfgpu fleet preflight: `tfgpu doctor` on every GPU node, as a DaemonSet.",
        "#   kubectl apply -f tfgpu-preflight.yaml",
        f"#   kubectl rollout status daemonset/{APP_LABEL} -n {namespace} --timeout=15m",
        f"#   kubectl logs -n {namespace} -l {selector} --tail=-1 --prefix | {merge}",
        "#   kubectl delete -f tfgpu-preflight.yaml",
        "# A pod is Ready once its report is printed (the readiness probe), so rollout status waits for all.",
    ]
    labels = f"{{app.kubernetes.io/name: {_y(APP_LABEL)}}}"
    body = f"""apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {_y(APP_LABEL)}
  namespace: {_y(namespace)}
  labels: {labels}
spec:
  selector:
    matchLabels: {labels}
  template:
    metadata:
      labels: {labels}
    spec:
      nodeSelector:
        nvidia.com/gpu.present: "true"
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
      containers:
        - name: tfgpu
          image: {_y(image)}
          command: ["sh", "-c", {_y(script)}]
          env:
            - name: NODE_NAME
              valueFrom:
                fieldRef:
                  fieldPath: spec.nodeName
            - name: TFGPU_PIP_SPEC
              value: {_y(pip_spec)}
            - name: NVIDIA_DRIVER_CAPABILITIES
              value: "compute,utility"
          resources:
            limits:
              nvidia.com/gpu: 1
          readinessProbe:
            exec:
              command: ["test", "-f", "/tmp/tfgpu-report.done"]
            periodSeconds: 5
"""
    return "\n".join(header) + "\n" + body


def ansible_playbook(*, hosts: str = "gpu", tf: str | None = None, reports: str = DEFAULT_REPORTS) -> str:
    """A playbook: the doctor on every host over SSH, each report saved on the controller as
    <reports>/<host>.json, then `tfgpu fleet merge` on the controller (fails the play with --tf when X
    is not usable on every host)."""
    check("hosts", hosts, "--hosts")
    check("reports", reports, "--reports")
    tf = _check_tf(tf)
    merge_argv = ["tfgpu", *_merge_words(reports, tf, f"{reports}/fleet.html")]
    header = [
        "# tfgpu fleet preflight over SSH: `tfgpu doctor` on every host, one merged report on the controller.",
        "#   ansible-playbook -i inventory tfgpu-preflight.yml",
        f"#   (ad hoc, without the merge: ansible {shlex.quote(hosts)} -m ansible.builtin.command "
        "-a 'tfgpu doctor --json --redact')",
        "# Needs tfgpu on PATH on every host, and on the controller.",
    ]
    body = f"""- name: tfgpu preflight
  hosts: {_y(hosts)}
  gather_facts: false
  tasks:
    - name: make the report directory on the controller
      ansible.builtin.file:
        path: "{reports}"
        state: directory
        mode: "0755"
      run_once: true
      delegate_to: localhost

    - name: run the tfgpu doctor
      ansible.builtin.command:
        argv: ["tfgpu", "doctor", "--json", "--redact"]
      register: tfgpu_doctor
      changed_when: false

    - name: keep the report on the controller
      ansible.builtin.copy:
        content: "{{{{ tfgpu_doctor.stdout }}}}"
        dest: "{reports}/{{{{ inventory_hostname }}}}.json"
        mode: "0644"
      delegate_to: localhost

    - name: merge the reports
      ansible.builtin.command:
        argv: {json.dumps(merge_argv)}
      register: tfgpu_merge
      changed_when: false
      failed_when: tfgpu_merge.rc not in [0, 1]
      run_once: true
      delegate_to: localhost

    - name: show the fleet
      ansible.builtin.debug:
        var: tfgpu_merge.stdout_lines
      run_once: true

    - name: fail when the target is not usable on every host
      ansible.builtin.fail:
        msg: "TensorFlow {tf or ''} is not usable on every host: see the fleet above"
      when: tfgpu_merge.rc == 1
      run_once: true
"""
    return "\n".join(header) + "\n" + body
