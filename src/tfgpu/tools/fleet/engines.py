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
    "runtime_class": re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"),
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
                 reports: str = DEFAULT_REPORTS, gpus_per_node: int | None = None, features: bool = False) -> str:
    """An sbatch script: one `tfgpu doctor --json --redact` per node (srun, one task per node), one
    report per node in a directory, then `tfgpu fleet merge` over it. The job asks for the node's GPUs
    (``gpus_per_node`` or a ``gres`` spec): where cgroups constrain devices (ConstrainDevices=yes) a job
    sees only the GPUs it was given. With ``features``, the merge also writes the `scontrol update
    NodeName=... AvailableFeatures=...` lines that tag each node with the series usable there."""
    if (nodes is None) == (nodelist is None):
        msg = "give either --nodes N or --nodelist LIST"
        raise UsageError(msg, hint="e.g. tfgpu fleet slurm --nodes 16 --partition gpu")
    if nodes is not None and not 1 <= nodes <= 100_000:
        msg = f"--nodes {nodes} is not between 1 and 100000"
        raise UsageError(msg)
    tf = _check_tf(tf)
    check("time", time, "--time")
    check("reports", reports, "--reports")
    if gpus_per_node is not None and not 1 <= gpus_per_node <= 1024:
        msg = f"--gpus-per-node {gpus_per_node} is not between 1 and 1024"
        raise UsageError(msg)
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
    if gpus_per_node is not None:
        lines.append(f"#SBATCH --gpus-per-node={gpus_per_node}")
    if not gres and gpus_per_node is None:
        lines.append("# no GPUs requested (--gpus-per-node N or --gres gpu:N): with ConstrainDevices=yes the "
                     "doctor sees none")
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
    ]
    if features:
        lines += [
            "# Node features for the series usable on each node (tf2.21, ...), the node's other features kept:",
            "# review, then apply as an operator: sh \"$REPORTS/features.sh\"",
            "sinfo -h -N -o '%N %f' > \"$REPORTS/sinfo.txt\"",
            '"$TFGPU" fleet nodes "$REPORTS" --slurm-features --sinfo "$REPORTS/sinfo.txt"'
            + (f" --tf {shlex.quote(tf)}" if tf else "") + ' > "$REPORTS/features.sh"',
            'cat "$REPORTS/features.sh"',
        ]
    return "\n".join([*lines, ""])


def _y(value: object) -> str:
    """A YAML scalar: JSON's string/number syntax is valid YAML, and quotes every special character."""
    return json.dumps(value)


yaml_scalar = _y

#: The RuntimeClass the NVIDIA GPU Operator creates and runs its own validator pods with
#: (NVIDIA/gpu-operator controllers/object_controls.go: DefaultRuntimeClass = "nvidia").
DEFAULT_RUNTIME_CLASS = "nvidia"
#: Where a pod's service account token says which node the pod runs on (Kubernetes >= 1.30:
#: ServiceAccountTokenPodNodeInfo; kubernetes/kubernetes test/e2e/auth/per_node_update.go).
NODE_NAME_CLAIM = "authentication.kubernetes.io/node-name"


def _pod_script(label: bool) -> str:
    """The container's script: a constant (every value reaches it as an environment variable)."""
    script = (
        "set -e; "
        'command -v tfgpu >/dev/null 2>&1 || python3 -m pip install --quiet --no-cache-dir "$TFGPU_PIP_SPEC" '
        ">/dev/null 2>&1; "
        "tfgpu doctor --json --redact > /tmp/tfgpu-report.json || true; "
        "python3 -c 'import json, os, sys; "
        f'print("{MARKER} node=" + os.environ["NODE_NAME"], json.dumps(json.load(open(sys.argv[1]))))\' '
        "/tmp/tfgpu-report.json; "
    )
    if label:
        script += ('tfgpu fleet label --report /tmp/tfgpu-report.json --node "$NODE_NAME" '
                   '${TFGPU_TF:+--tf "$TFGPU_TF"} || true; ')
    return script + "touch /tmp/tfgpu-report.done; exec sleep infinity"


def k8s_manifest(*, namespace: str = "default", image: str | None = None, tf: str | None = None,
                 pip_spec: str = DEFAULT_PIP_SPEC, label: bool = False,
                 runtime_class: str | None = DEFAULT_RUNTIME_CLASS) -> str:
    """A DaemonSet on every GPU node (label nvidia.com/gpu.present=true, GPU taints tolerated). It sees
    every GPU of its node without consuming any: no nvidia.com/gpu request (a busy node still runs it);
    NVIDIA_VISIBLE_DEVICES=all and the NVIDIA runtime class, as the GPU Operator's own validator
    (NVIDIA/gpu-operator assets/state-operator-validation/0500_daemonset.yaml). It runs the doctor, prints
    the report as one marker line, and waits; the commands in the header collect the lines into `tfgpu
    fleet merge -`. With ``label`` each pod also sets its node's tfgpu.io/ labels, allowed by RBAC to
    patch nodes and by a ValidatingAdmissionPolicy to patch only its own node's tfgpu.io/ labels."""
    check("namespace", namespace, "--namespace")
    tf = _check_tf(tf)
    image = check("image", image or DEFAULT_IMAGE, "--image")
    check("pip_spec", pip_spec, "--pip-spec")
    if runtime_class:
        check("runtime_class", runtime_class, "--runtime-class")
    selector = f"app.kubernetes.io/name={APP_LABEL}"
    merge = " ".join(shlex.quote(w) for w in ["tfgpu", *_merge_words("-", tf, "fleet.html")])
    header = [
        "# tfgpu fleet preflight: `tfgpu doctor` on every GPU node, as a DaemonSet.",
        "#   kubectl apply -f tfgpu-preflight.yaml",
        f"#   kubectl rollout status daemonset/{APP_LABEL} -n {namespace} --timeout=15m",
        f"#   kubectl logs -n {namespace} -l {selector} --tail=-1 --prefix | {merge}",
        "#   kubectl delete -f tfgpu-preflight.yaml",
        "# A pod is Ready once its report is printed (the readiness probe), so rollout status waits for all.",
        "# It requests no GPU: it sees all of its node's GPUs (NVIDIA_VISIBLE_DEVICES=all) while they stay free.",
    ]
    if label:
        header += [
            "# Each pod labels its node: tfgpu.io/verdict and tfgpu.io/tf-ready (the newest usable series);",
            "# select nodes with  nodeSelector: {tfgpu.io/tf-ready: \"2.21\"}. The policy below (Kubernetes >= 1.30)",
            "# lets the pods change only their own node's tfgpu.io/ labels.",
        ]
    labels = f"{{app.kubernetes.io/name: {_y(APP_LABEL)}}}"
    docs = [_daemonset(namespace, image, tf, pip_spec, label, runtime_class, labels)]
    if label:
        docs += _label_rbac(namespace, labels)
    return "\n".join(header) + "\n" + "---\n".join(docs)


def _daemonset(namespace: str, image: str, tf: str | None, pip_spec: str, label: bool, runtime_class: str | None,
               labels: str) -> str:
    runtime = f"      runtimeClassName: {_y(runtime_class)}\n" if runtime_class else ""
    account = (f"      serviceAccountName: {_y(APP_LABEL)}\n      automountServiceAccountToken: true\n" if label
               else "      automountServiceAccountToken: false\n")
    tf_env = f"""            - name: TFGPU_TF
              value: {_y(tf)}
""" if label and tf else ""
    return f"""apiVersion: apps/v1
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
{runtime}{account}      nodeSelector:
        nvidia.com/gpu.present: "true"
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
      containers:
        - name: tfgpu
          image: {_y(image)}
          command: ["sh", "-c", {_y(_pod_script(label))}]
          env:
            - name: NODE_NAME
              valueFrom:
                fieldRef:
                  fieldPath: spec.nodeName
            - name: TFGPU_PIP_SPEC
              value: {_y(pip_spec)}
            - name: NVIDIA_VISIBLE_DEVICES
              value: "all"
            - name: NVIDIA_DRIVER_CAPABILITIES
              value: "compute,utility"
{tf_env}          readinessProbe:
            exec:
              command: ["test", "-f", "/tmp/tfgpu-report.done"]
            periodSeconds: 5
"""


def _label_rbac(namespace: str, labels: str) -> list[str]:
    """ServiceAccount, a ClusterRole to get and patch nodes, its binding, and the admission policy that
    narrows it to the pod's own node and to tfgpu.io/ labels (RBAC cannot name "the node I run on")."""
    user = f"system:serviceaccount:{namespace}:{APP_LABEL}"
    claim = NODE_NAME_CLAIM
    own_node = (f"'{claim}' in request.userInfo.extra && "
                f"object.metadata.name == request.userInfo.extra['{claim}'][0]")
    labels_only = ("object.metadata.labels.all(k, k.startsWith('tfgpu.io/') || (k in oldObject.metadata.labels && "
                   "oldObject.metadata.labels[k] == object.metadata.labels[k])) && "
                   "oldObject.metadata.labels.all(k, k.startsWith('tfgpu.io/') || k in object.metadata.labels)")
    policy = f"{APP_LABEL}-own-node-labels"
    return [f"""apiVersion: v1
kind: ServiceAccount
metadata:
  name: {_y(APP_LABEL)}
  namespace: {_y(namespace)}
  labels: {labels}
""", f"""apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {_y(APP_LABEL + "-label-node")}
  labels: {labels}
rules:
  - apiGroups: [""]
    resources: ["nodes"]
    verbs: ["get", "patch"]
""", f"""apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {_y(APP_LABEL + "-label-node")}
  labels: {labels}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {_y(APP_LABEL + "-label-node")}
subjects:
  - kind: ServiceAccount
    name: {_y(APP_LABEL)}
    namespace: {_y(namespace)}
""", f"""apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {_y(policy)}
  labels: {labels}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["UPDATE"]
        resources: ["nodes"]
  matchConditions:
    - name: tfgpu-service-account
      expression: {_y(f"request.userInfo.username == '{user}'")}
  validations:
    - expression: {_y(own_node)}
      message: "tfgpu-preflight may label only the node its pod runs on"
    - expression: {_y(labels_only)}
      message: "tfgpu-preflight may change only tfgpu.io/ labels"
    - expression: "object.spec == oldObject.spec"
      message: "tfgpu-preflight may not change a node's spec (taints, unschedulable)"
""", f"""apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {_y(policy)}
  labels: {labels}
spec:
  policyName: {_y(policy)}
  validationActions: [Deny]
"""]


def ansible_playbook(*, hosts: str = "gpu", tf: str | None = None, reports: str = DEFAULT_REPORTS) -> str:
    """A playbook: the doctor on every host over SSH, each report saved on the controller as
    <reports>/<host>.json, then `tfgpu fleet merge` on the controller; each host then has the facts
    tfgpu_verdict and tfgpu_tf_ready (the newest usable series, "" when none) for later plays (fails
    the play with --tf when X is not usable on every host)."""
    check("hosts", hosts, "--hosts")
    check("reports", reports, "--reports")
    tf = _check_tf(tf)
    merge_argv = ["tfgpu", *_merge_words(reports, tf, f"{reports}/fleet.html")]
    nodes_argv = ["tfgpu", "fleet", "nodes", reports, "--ansible-facts", *(["--tf", tf] if tf else [])]
    mine = "((tfgpu_nodes.stdout | from_json)[inventory_hostname] | default({}))"
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

    - name: each host's result
      ansible.builtin.command:
        argv: {json.dumps(nodes_argv)}
      register: tfgpu_nodes
      changed_when: false
      run_once: true
      delegate_to: localhost

    - name: set tfgpu_verdict and tfgpu_tf_ready on each host
      ansible.builtin.set_fact:
        tfgpu_verdict: "{{{{ {mine}.tfgpu_verdict | default('unknown') }}}}"
        tfgpu_tf_ready: "{{{{ {mine}.tfgpu_tf_ready | default('') }}}}"
        cacheable: true

    - name: fail when the target is not usable on every host
      ansible.builtin.fail:
        msg: "TensorFlow {tf or ''} is not usable on every host: see the fleet above"
      when: tfgpu_merge.rc == 1
      run_once: true
"""
    return "\n".join(header) + "\n" + body
