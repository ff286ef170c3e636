"""Container runtimes (docker, podman, apptainer, singularity) and the NVIDIA Container Toolkit, as facts.

Bounded and never raising, like every probe: a program that is absent, a daemon that does not answer, a
file that does not parse are answers ("present": false, "reachable": false, "error": ...). Nothing here
asks for sudo: group membership is read from /etc/group, the daemon's configuration from daemon.json.
The parsers are pure and tested against recorded real outputs (tests/data/containers/SOURCES.md).
"""

from __future__ import annotations

import json
import re

from tfgpu.facts.probe._ctx import Ctx

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the doctor's probe child runs this)
if TYPE_CHECKING:
    from typing import Any

#: Runtimes in the order tfgpu prefers them for the container backend.
RUNTIMES = ("docker", "podman", "apptainer", "singularity")
#: Where the NVIDIA Container Toolkit writes CDI specs (static: `nvidia-ctk cdi generate --output=/etc/cdi/...`;
#: dynamic: the toolkit's systemd unit and the GPU operator write to /var/run/cdi).
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
DAEMON_JSON = "/etc/docker/daemon.json"
#: Toolkit programs: the CLI (nvidia-ctk), the low-level library CLI, and what `docker --gpus` and the
#: `nvidia` runtime call.
TOOLKIT_PROGRAMS = ("nvidia-ctk", "nvidia-container-cli", "nvidia-container-runtime", "nvidia-container-runtime-hook")
_MAX_CONFIG = 256 * 1024
_MAX_SPECS = 32

_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)*(?:[-+~][0-9A-Za-z.]+)*)")


# --------------------------------------------------------------------------- pure parsers


def parse_runtime_version(text: str) -> str | None:
    """`docker --version` ("Docker version 28.2.2, build e6534b4"), `podman --version` ("podman version
    4.3.1"), `apptainer --version` ("apptainer version 1.2.4"), `singularity --version` ("singularity-ce
    version 3.11.0"), `nvidia-ctk --version` ("NVIDIA Container Toolkit CLI version 1.12.0"),
    `nvidia-container-cli --version` ("cli-version: 1.11.0") -> the version, or None."""
    for line in text.splitlines():
        low = line.lower()
        if "version" in low and "build " not in low.split("version", 1)[0]:
            m = _VERSION.search(line.split("version", 1)[1] if "version" in line else line)
            if m:
                return m.group(1).rstrip(",")
    m = _VERSION.search(text)
    return m.group(1).rstrip(",") if m else None


def parse_docker_info(stdout: str, stderr: str = "", returncode: int = 0) -> dict[str, Any]:
    """`docker info --format '{{json .}}'` -> daemon reachability, server version, runtimes, rootless.

    Without a daemon the CLI still prints its JSON (empty server fields, ``ServerVersion`` "") on stdout,
    exits 1 and says why on stderr ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock.
    Is the docker daemon running?"); newer CLIs also put it in ``ServerErrors``. The Engine API's ``GET
    /info`` body is the same object without ``ClientInfo`` (client_version None then). Daemons with CDI
    support list the devices they found in ``DiscoveredDevices`` ({"Source": "cdi", "ID":
    "nvidia.com/gpu=0"}): ``cdi_devices``."""
    out: dict[str, Any] = {"reachable": False, "server_version": None, "client_version": None, "runtimes": [],
                           "default_runtime": None, "rootless": None, "cdi_spec_dirs": [], "cdi_devices": [],
                           "error": None}
    try:
        doc = json.loads(stdout) if stdout.strip() else {}
    except ValueError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    client_raw = doc.get("ClientInfo")
    client: dict[str, Any] = client_raw if isinstance(client_raw, dict) else {}
    out["client_version"] = str(client.get("Version") or "") or None
    server = str(doc.get("ServerVersion") or "")
    errors = [str(e) for e in (doc.get("ServerErrors") or []) if e]
    err_lines = stderr.strip().splitlines()
    err_text = "; ".join(errors) or (err_lines[-1] if err_lines else "")
    out["reachable"] = bool(server) and returncode == 0 and not errors
    out["server_version"] = server or None
    runtimes = doc.get("Runtimes")
    out["runtimes"] = sorted(runtimes) if isinstance(runtimes, dict) else []
    out["default_runtime"] = str(doc.get("DefaultRuntime") or "") or None
    security = [str(s) for s in (doc.get("SecurityOptions") or [])]
    out["rootless"] = any("name=rootless" in s for s in security) if out["reachable"] else None
    out["cdi_spec_dirs"] = [str(d) for d in (doc.get("CDISpecDirs") or [])]
    devices = doc.get("DiscoveredDevices")
    out["cdi_devices"] = sorted({str(d["ID"]) for d in devices if isinstance(d, dict) and d.get("ID")
                                 and str(d.get("Source") or "cdi") == "cdi"}) if isinstance(devices, list) else []
    if not out["reachable"]:
        out["error"] = err_text or (f"docker info exited {returncode}" if returncode else "no server version")
    return out


def parse_docker_info_text(text: str) -> dict[str, Any]:
    """The plain `docker info` lines users paste (" Runtimes: io.containerd.runc.v2 nvidia runc",
    " Default Runtime: runc") -> {"runtimes", "default_runtime"}; for reports that have only that."""
    out: dict[str, Any] = {"runtimes": [], "default_runtime": None}
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        if key == "Runtimes":
            out["runtimes"] = sorted(value.split())
        elif key == "Default Runtime":
            out["default_runtime"] = value.strip() or None
    return out


def parse_daemon_json(text: str) -> dict[str, Any]:
    """/etc/docker/daemon.json -> the runtimes it registers (``runtimes`` keys and their paths), the
    default runtime, and whether an NVIDIA runtime is among them (``nvidia-ctk runtime configure
    --runtime=docker`` writes ``"runtimes": {"nvidia": {"path": "nvidia-container-runtime", ...}}``)."""
    out: dict[str, Any] = {"runtimes": {}, "default_runtime": None, "nvidia": False, "error": None}
    try:
        doc = json.loads(text)
    except ValueError as exc:
        out["error"] = f"not valid JSON: {exc}"
        return out
    if not isinstance(doc, dict):
        out["error"] = "not a JSON object"
        return out
    runtimes = doc.get("runtimes")
    if isinstance(runtimes, dict):
        out["runtimes"] = {str(k): str((v or {}).get("path", "")) if isinstance(v, dict) else "" for k, v in runtimes.items()}
    out["default_runtime"] = str(doc.get("default-runtime") or "") or None
    out["nvidia"] = any("nvidia" in k.lower() or "nvidia-container-runtime" in p for k, p in out["runtimes"].items())
    return out


def parse_cdi_spec(text: str) -> dict[str, Any]:
    """A CDI spec (YAML or JSON) -> {"kind", "cdi_version", "devices"}. Only the top-level scalar keys and
    the device names are read, by line: a spec is thousands of mount lines and tfgpu needs three facts."""
    out: dict[str, Any] = {"kind": None, "cdi_version": None, "devices": []}
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            return out
        if isinstance(doc, dict):
            out["kind"] = doc.get("kind")
            out["cdi_version"] = doc.get("cdiVersion")
            out["devices"] = [str(d.get("name")) for d in doc.get("devices") or [] if isinstance(d, dict) and d.get("name")]
        return out
    in_devices = False
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#") or line.strip() == "---":
            continue
        if not line[0].isspace() and not line.startswith("-"):
            key, _, value = line.partition(":")
            in_devices = key == "devices"
            if key == "kind":
                out["kind"] = value.strip().strip("'\"") or None
            elif key == "cdiVersion":
                out["cdi_version"] = value.strip().strip("'\"") or None
            continue
        m = re.match(r"^-?\s*-?\s*name:\s*['\"]?([^'\"\s]+)", line.strip()) if in_devices else None
        if m and (line.startswith("- ") or re.match(r"^\s{0,2}- name:", line)):
            out["devices"].append(m.group(1))
    return out


def parse_group_file(text: str, group: str, user: str | None) -> dict[str, Any]:
    """/etc/group -> does ``group`` exist, and is ``user`` listed in it? (The primary group, in
    /etc/passwd, is not looked at: distributions create the `docker` group empty.)"""
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) >= 4 and parts[0] == group:
            members = [m for m in parts[3].strip().split(",") if m]
            return {"exists": True, "members": members, "member": (user in members) if user else None}
    return {"exists": False, "members": [], "member": False if user else None}


# --------------------------------------------------------------------------- probing


def _user(ctx: Ctx) -> str | None:
    for var in ("USER", "LOGNAME", "USERNAME"):
        if ctx.env.get(var):
            return ctx.env[var]
    return None


def _tool(ctx: Ctx, name: str, argv_tail: tuple[str, ...] = ("--version",)) -> dict[str, Any] | None:
    path = ctx.which(name)
    if not path:
        return None
    res = ctx.run([path, *argv_tail])
    entry: dict[str, Any] = {"path": ctx.unroot(path), "version": parse_runtime_version(res.stdout + "\n" + res.stderr)
                             if res.ok or res.stdout else None}
    if not res.ok:
        entry["error"] = res.describe()
    return entry


def docker_socket(ctx: Ctx) -> tuple[str | None, bool]:
    """Where the Docker CLI would connect, and whether that endpoint can be checked without asking the CLI
    (a local unix socket). ``DOCKER_HOST`` or a non-default context (~/.docker/config.json) send it
    elsewhere: only `docker info` knows then."""
    host = ctx.env.get("DOCKER_HOST", "")
    if host:
        return (host[len("unix://"):], True) if host.startswith("unix://") else (host, False)
    home = ctx.home()
    config = ctx.read(f"{home}/.docker/config.json", limit=_MAX_CONFIG) if home else None
    if config and re.search(r'"currentContext"\s*:\s*"(?!default")', config):
        return None, False
    runtime_dir = ctx.env.get("XDG_RUNTIME_DIR")
    if runtime_dir and ctx.exists(f"{runtime_dir}/docker.sock"):  # rootless Docker's socket
        return f"{runtime_dir}/docker.sock", True
    return "/var/run/docker.sock", True


#: Where Docker Engine's packages put its systemd unit (docker-ce, docker.io, moby-engine) and its SysV script;
#: rootless Docker's setup tool (dockerd-rootless-setuptool.sh) writes a user unit.
DOCKER_UNITS = ("/etc/systemd/system/docker.service", "/lib/systemd/system/docker.service",
                "/usr/lib/systemd/system/docker.service", "/usr/local/lib/systemd/system/docker.service")
DOCKER_INIT_SCRIPT = "/etc/init.d/docker"


def docker_service(ctx: Ctx) -> dict[str, Any]:
    """How the Docker daemon is started here, so that a fix names a command that runs: is systemd the init
    system (/run/systemd/system, as sd_booted(3) checks), which docker.service unit exists (system or the
    user's rootless one), is there a SysV init script. Nothing is run."""
    home = ctx.home()
    user_unit = f"{home}/.config/systemd/user/docker.service" if home else None
    return {"systemd": ctx.exists("/run/systemd/system"),
            "unit": next((u for u in DOCKER_UNITS if ctx.exists(u)), None),
            "user_unit": user_unit if user_unit and ctx.exists(user_unit) else None,
            "init_script": DOCKER_INIT_SCRIPT if ctx.exists(DOCKER_INIT_SCRIPT) else None}


def _docker(ctx: Ctx) -> dict[str, Any] | None:
    entry = _docker_client(ctx)
    if entry is not None and not entry["daemon"].get("reachable"):
        entry["service"] = docker_service(ctx)
    return entry


def _docker_client(ctx: Ctx) -> dict[str, Any] | None:
    path = ctx.which("docker")
    if not path:
        return None
    socket, local = docker_socket(ctx)
    if local and socket and not ctx.exists(socket):
        # No daemon socket: `docker info` would only say so, after ~0.2 s of Go start-up and connecting, and
        # even `docker --version` costs the doctor ~50 ms on 2 busy cores (measured). The version matters
        # only with a daemon (--gpus needs Docker >= 19.03), and `docker info` reports it then.
        return {"name": "docker", "path": ctx.unroot(path), "version": None,
                "version_note": "not read: no daemon to use it with (docker --version prints it)", "daemon": {
            "reachable": False, "server_version": None, "error": f"no Docker daemon socket at {socket}"},
            "rootless": None, "runtimes": [], "default_runtime": None, "cdi_spec_dirs": [], "cdi_devices": []}
    res = ctx.run([path, "info", "--format", "{{json .}}"])
    info = parse_docker_info(res.stdout, res.stderr, res.returncode if res.returncode is not None else 1)
    if res.timed_out:
        info["error"] = res.describe()
    version = info.pop("client_version")
    if version is None:  # a CLI too old for ClientInfo
        version = (_tool(ctx, "docker") or {}).get("version")
    return {"name": "docker", "path": ctx.unroot(path), "version": version, "daemon": {
        "reachable": info["reachable"], "server_version": info["server_version"], "error": info["error"]},
        "rootless": info["rootless"], "runtimes": info["runtimes"], "default_runtime": info["default_runtime"],
        "cdi_spec_dirs": info["cdi_spec_dirs"], "cdi_devices": info["cdi_devices"]}


def _daemonless(ctx: Ctx, name: str, uid: int | None) -> dict[str, Any] | None:
    entry = _tool(ctx, name)
    if entry is None:
        return None
    # podman needs no daemon; apptainer/singularity neither (setuid or user namespaces)
    return {"name": name, **entry, "daemon": {"reachable": None, "server_version": None, "error": None,
                                              "note": "no daemon needed"},
            "rootless": (uid != 0) if uid is not None else None}


def _cdi_specs(ctx: Ctx) -> list[dict[str, Any]]:
    specs: list[dict[str, Any]] = []
    for d in CDI_DIRS:
        for name in ctx.listdir(d)[:_MAX_SPECS]:
            if not name.endswith((".yaml", ".yml", ".json")):
                continue
            text = ctx.read(f"{d}/{name}", limit=_MAX_CONFIG)
            if text is None:
                specs.append({"path": f"{d}/{name}", "kind": None, "cdi_version": None, "devices": [],
                              "error": "unreadable"})
                continue
            specs.append({"path": f"{d}/{name}", **parse_cdi_spec(text)})
    return specs


def probe_containers(ctx: Ctx, *, uid: int | None = None) -> dict[str, Any]:
    """facts["containers"]: every runtime found, the user's `docker` group membership, the toolkit.
    ``uid``: the effective user id when probing this machine (root needs no group), None for a profile."""
    import threading  # plain threads: concurrent.futures would pull logging and traceback into start-up

    jobs: dict[str, Any] = {"docker": lambda: _docker(ctx)}
    for name in RUNTIMES[1:]:
        jobs[name] = (lambda n: lambda: _daemonless(ctx, n, uid))(name)
    for name in TOOLKIT_PROGRAMS:
        if name != "nvidia-container-runtime-hook":  # has no --version of its own in older releases
            jobs[name] = (lambda n: lambda: _tool(ctx, n))(name)
    present = {n: f for n, f in jobs.items() if ctx.which(n)}
    results: dict[str, Any] = {}

    def work(n: str, f: Any) -> None:
        try:
            results[n] = f()
        except Exception as exc:  # a probe never raises
            results[n] = {"name": n, "error": f"probe crashed: {type(exc).__name__}: {exc}"}

    threads = [threading.Thread(target=work, args=(n, f), daemon=True) for n, f in present.items()]
    for t in threads:
        t.start()
    for t in threads:  # each job is bounded by the context's timeout
        t.join()
    runtimes = [results[n] for n in RUNTIMES if results.get(n)]
    user = _user(ctx)
    group_text = ctx.read("/etc/group")
    group = parse_group_file(group_text or "", "docker", user)
    if group_text is None:
        group["error"] = "/etc/group unreadable"
    group["user"] = user
    group["root"] = uid == 0 if uid is not None else (user == "root" if user else None)
    daemon_text = ctx.read(DAEMON_JSON, limit=_MAX_CONFIG)
    daemon_json = {"path": DAEMON_JSON, "present": daemon_text is not None,
                   **(parse_daemon_json(daemon_text) if daemon_text is not None else
                      {"runtimes": {}, "default_runtime": None, "nvidia": False, "error": None})}
    specs = _cdi_specs(ctx)
    tools = {n.replace("-", "_"): results.get(n) for n in TOOLKIT_PROGRAMS if n != "nvidia-container-runtime-hook"}
    hook = ctx.which("nvidia-container-runtime-hook")
    tools["nvidia_container_runtime_hook"] = {"path": ctx.unroot(hook), "version": None} if hook else None
    docker = results.get("docker") or {}
    runtime_registered = daemon_json["nvidia"] or any("nvidia" in r for r in docker.get("runtimes") or [])
    gpu_cdi = [s for s in specs if str(s.get("kind") or "").startswith("nvidia.com/")]
    toolkit = {
        "present": any(tools.values()),
        **tools,
        "runtime": runtime_registered,
        "daemon_json": daemon_json,
        "cdi_specs": specs,
        "cdi_gpu_devices": sorted({f"{s['kind']}={d}" for s in gpu_cdi for d in s.get("devices") or []}),
    }
    return {"runtimes": runtimes, "docker_group": group, "toolkit": toolkit}
