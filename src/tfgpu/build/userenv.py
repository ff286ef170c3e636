"""Using an environment tfgpu made: its activation variables, `tfgpu run`, `tfgpu shell`, and which one
`tfgpu smoke` tests when none is named.

``command_for(entry, cmd)`` is the one seam: (argv, env) for a command inside an environment. venvs and conda
environments get the variables their activation sets (a venv's bin/activate with what tfgpu appended to it, a
conda environment's etc/conda/activate.d/*.sh, which nothing runs when no conda is installed); container
environments run the command in their image (tfgpu.judge.containers.run_in_container, when that module is there).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfgpu.backends.names import CONTAINER_BACKENDS  # a registry entry of an image
from tfgpu.core.errors import UsageError
from tfgpu.core.tfnames import ALLOW_GROWTH

#: TensorFlow maps nearly all GPU memory by default; growth is what the containers route and small GPUs use
#: (https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth). A value the caller set wins.


def find_entry(name: str | None = None, prefix: str | None = None) -> dict[str, Any]:
    """The registry entry of an environment tfgpu made, by name or prefix; refused (exit 2) otherwise."""
    from tfgpu.build import registry

    if (name is None) == (prefix is None):
        msg = "name an environment: NAME or --prefix DIR" if name is None else "NAME and --prefix are exclusive"
        raise UsageError(msg, hint="`tfgpu envs` lists the environments tfgpu made")
    key = name if name is not None else str(Path(prefix or "").expanduser().resolve())
    entry = registry.find(key)
    if entry is None:
        msg = f"{key!r} is not an environment tfgpu made"
        raise UsageError(msg, hint="`tfgpu envs` lists them; `tfgpu create --tf 2.21 --cpu` makes one")
    if entry.get("backend") not in CONTAINER_BACKENDS and not Path(str(entry["prefix"])).is_dir():
        msg = f"the directory of {entry.get('name') or key} ({entry['prefix']}) is gone"
        raise UsageError(msg, hint=f"`tfgpu remove {entry.get('name') or entry['prefix']}` forgets it")
    return entry




def container_of(entry: Mapping[str, Any]) -> tuple[str, str]:
    """The runtime and the image (or Apptainer's .sif file) of a container entry, checked: the registry is a
    file, and what it names becomes argv (a program of its choosing, or `-v/:/host` read as an option)."""
    from tfgpu.facts.probe.containers import (
        RUNTIMES as CONTAINER_PROGRAMS,  # the runtimes tfgpu knows and probes
    )
    from tfgpu.judge.containers import check_image_ref

    runtime, image = str(entry.get("tool") or entry["backend"]), str(entry["prefix"])
    if runtime not in CONTAINER_PROGRAMS:
        msg = f"the registry names {runtime!r} as the container runtime of {entry.get('name') or image!r}"
        raise UsageError(msg, hint=f"tfgpu runs only {', '.join(CONTAINER_PROGRAMS)}; `tfgpu remove` forgets the entry")
    sif = runtime in ("apptainer", "singularity") and image.endswith(".sif")
    if sif and not (Path(image).is_absolute() and image.isprintable()):
        msg = f"the registry's image file {image!r} is not an absolute path"
        raise UsageError(msg, hint="`tfgpu remove` forgets the entry; `tfgpu create --backend apptainer` pulls it again")
    if not sif:
        check_image_ref(image)
    return runtime, image


def is_conda_env(entry: Mapping[str, Any]) -> bool:
    return entry.get("backend") in ("conda", "rattler") or (Path(str(entry["prefix"])) / "conda-meta").is_dir()


def activation_script(entry: Mapping[str, Any]) -> str:
    """POSIX sh that activates the environment as its own activation would (pure)."""
    from shlex import quote

    prefix = str(entry["prefix"])
    q = quote(prefix)
    if is_conda_env(entry):
        lines = [f"CONDA_PREFIX={q}; export CONDA_PREFIX", f'PATH={q}/bin:"$PATH"; export PATH',
                 f"CONDA_DEFAULT_ENV={quote(str(entry.get('name') or prefix))}; export CONDA_DEFAULT_ENV",
                 f'for _tfgpu_f in {q}/etc/conda/activate.d/*.sh; do [ -f "$_tfgpu_f" ] && . "$_tfgpu_f"; done',
                 "unset _tfgpu_f"]
    else:  # a venv: bin/activate, with what tfgpu appended (its variables, LD_LIBRARY_PATH for 2.16/2.17)
        lines = [f"VIRTUAL_ENV_DISABLE_PROMPT=1; . {q}/bin/activate"]
    name, value = ALLOW_GROWTH
    lines.append(f': "${{{name}:={value}}}"; export {name}')
    return "\n".join(lines) + "\n"


def activated_environ(entry: Mapping[str, Any], base: Mapping[str, str] | None = None,
                      *, timeout: float = 30) -> dict[str, str]:
    """The environment variables inside the environment: its activation run by sh (an effect, through
    tfgpu.core.process), read back with `env -0`."""
    from tfgpu.core import process as run

    base = dict(os.environ if base is None else base)
    res = run.capture(["sh", "-c", activation_script(entry) + "env -0\n"], timeout=timeout, env=base)
    if not res.ok:
        msg = f"activating {entry['prefix']} failed: {res.describe()}"
        raise UsageError(msg, hint="its activation scripts may be broken; `tfgpu create --force` rebuilds it")
    out: dict[str, str] = {}
    for item in res.stdout.split("\0"):
        key, sep, value = item.partition("=")
        if sep and key and key not in ("_", "SHLVL", "PWD", "OLDPWD"):
            out[key] = value
    return out


def command_for(entry: Mapping[str, Any], cmd: Sequence[str], *, base: Mapping[str, str] | None = None,
                cwd: str | None = None) -> tuple[tuple[str, ...], dict[str, str]]:
    """The seam `tfgpu run` and `tfgpu shell` use: the argv and environment that run ``cmd`` inside ``entry``."""
    env = dict(os.environ if base is None else base)
    if entry.get("backend") in CONTAINER_BACKENDS:
        from tfgpu.judge import containers

        runtime, image = container_of(entry)
        argv = containers.run_in_container(runtime, image, list(cmd), cwd or str(Path.cwd()),
                                           entry.get("gpu_args") or ())
        return tuple(argv), env
    if os.name == "nt":
        return tuple(cmd), windows_environ(entry, env)
    return tuple(cmd), activated_environ(entry, env)


#: The folders conda's activation puts first on PATH on Windows, in its order (conda/conda,
#: conda/activate.py, `_get_path_dirs`): the prefix, its MinGW, MSYS2 and Library folders, Scripts and bin.
_CONDA_WINDOWS_PATH = ("", "Library\\mingw-w64\\bin", "Library\\usr\\bin", "Library\\bin", "Scripts", "bin")


#: The shells `tfgpu shell` enters through their own start-up files: bash (--rcfile), zsh (ZDOTDIR), POSIX sh
#: (ENV), fish (--init-command). Any other shell starts with the activated variables only.
SHELL_KINDS = {"bash": "bash", "zsh": "zsh", "sh": "sh", "dash": "sh", "ash": "sh", "ksh": "sh", "mksh": "sh",
               "fish": "fish"}


def prompt_label(entry: Mapping[str, Any]) -> str:
    """The environment's name as the prompt shows it: only characters no shell's prompt expansion acts on
    (the registry is a file; a name reaches PS1, which bash and zsh expand)."""
    import re

    label = str(entry.get("name") or Path(str(entry["prefix"])).name)
    return re.sub(r"[^A-Za-z0-9._+-]", "?", label)[:64] or "env"


def shell_launch(entry: Mapping[str, Any], shell: str, rcdir: str,
                 environ: Mapping[str, str]) -> tuple[tuple[str, ...], dict[str, str], dict[str, str]]:
    """How `tfgpu shell` starts ``shell`` inside ``entry`` (pure): (argv, environment additions, files to write
    under ``rcdir``). The user's own start-up files run first and the environment's activation after them: an
    rc file that runs `pyenv init` or conda's `conda initialize` block puts pyenv's shims or conda's base
    environment in front of PATH again, so activating only before the shell starts is undone (issue 29)."""
    from shlex import quote

    kind = SHELL_KINDS.get(Path(shell).name)
    label = prompt_label(entry)
    activate = str(Path(rcdir) / "activate.sh")
    files = {"activate.sh": activation_script(entry)}
    again = f". {quote(activate)}\n"
    prompt = _prompt_lines(entry, label)
    if kind == "bash":
        files["bashrc"] = '[ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"\n' + again + prompt
        return (shell, "--rcfile", str(Path(rcdir) / "bashrc"), "-i"), {}, files
    if kind == "zsh":
        # zsh reads $ZDOTDIR/.zshenv and .zshrc: ours run the user's (from their ZDOTDIR, else HOME) first
        files[".zshenv"] = ('ZDOTDIR="${_TFGPU_ZDOTDIR:-$HOME}"\n'
                            '[ -f "$ZDOTDIR/.zshenv" ] && . "$ZDOTDIR/.zshenv"\n'
                            f'_TFGPU_ZDOTDIR="$ZDOTDIR"; ZDOTDIR={quote(rcdir)}\n')
        files[".zshrc"] = ('ZDOTDIR="$_TFGPU_ZDOTDIR"; unset _TFGPU_ZDOTDIR\n'
                           '[ -f "$ZDOTDIR/.zshrc" ] && . "$ZDOTDIR/.zshrc"\n'
                           f"emulate sh -c {quote('. ' + quote(activate))}\n" + prompt)
        extra = {"ZDOTDIR": rcdir}
        if environ.get("ZDOTDIR"):
            extra["_TFGPU_ZDOTDIR"] = environ["ZDOTDIR"]
        return (shell, "-i"), extra, files
    if kind == "sh":  # an interactive POSIX shell reads the file $ENV names
        user_env = environ.get("ENV", "")
        files["env.sh"] = ((f"[ -f {quote(user_env)} ] && . {quote(user_env)}\n" if user_env else "") + again
                           + prompt.replace("${PS1-}", "${PS1-$ }"))
        return (shell, "-i"), {"ENV": str(Path(rcdir) / "env.sh")}, files
    if kind == "fish":  # --init-command runs after fish's configuration files
        bin_dir = str(Path(str(entry["prefix"])) / "bin")
        init = (f"set -gx PATH {_fish_quote(bin_dir)} $PATH; functions -q fish_prompt; "
                "and functions -c fish_prompt _tfgpu_fish_prompt; "
                f"and function fish_prompt; printf '(%s) ' {_fish_quote(label)}; _tfgpu_fish_prompt; end")
        return (shell, "-i", "--init-command", init), {}, {}
    return (shell,), {}, {}


def _prompt_lines(entry: Mapping[str, Any], label: str) -> str:
    """sh that puts (label) in front of the prompt; for a conda environment it replaces the "(base) " that a
    `conda init` block's activation of the base environment put there (conda's CONDA_PROMPT_MODIFIER)."""
    if not is_conda_env(entry):
        return f'PS1="({label}) ${{PS1-}}"\n'
    return ('[ -n "${CONDA_PROMPT_MODIFIER-}" ] && PS1="${PS1#"$CONDA_PROMPT_MODIFIER"}"\n'
            f'CONDA_PROMPT_MODIFIER="({label}) "; export CONDA_PROMPT_MODIFIER\n'
            f'PS1="({label}) ${{PS1-}}"\n')


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def open_shell(entry: Mapping[str, Any], shell: str) -> int:
    """`tfgpu shell`: an interactive ``shell`` inside ``entry``, entered after the user's start-up files; its
    exit status (an effect: writes its start-up files into a private temporary folder, removed afterwards)."""
    import shutil
    import tempfile

    from tfgpu.core import process as run

    if entry.get("backend") in CONTAINER_BACKENDS or os.name == "nt":  # the image's shell; cmd.exe: no rc file
        cmd, env = command_for(entry, [shell])
        env["TFGPU_ENV"] = str(entry.get("name") or entry["prefix"])
        return run.run_foreground(cmd, env=env)
    rcdir = tempfile.mkdtemp(prefix="tfgpu-shell-")
    try:
        argv, extra, files = shell_launch(entry, shell, rcdir, os.environ)
        for fname, text in files.items():
            (Path(rcdir) / fname).write_text(text, encoding="utf-8")
        cmd, env = command_for(entry, list(argv))
        env.update(extra)
        env["TFGPU_ENV"] = str(entry.get("name") or entry["prefix"])
        return run.run_foreground(cmd, env=env)
    finally:
        shutil.rmtree(rcdir, ignore_errors=True)


def windows_environ(entry: Mapping[str, Any], base: Mapping[str, str]) -> dict[str, str]:
    """The environment inside ``entry`` on native Windows, as its activation sets it: a venv's
    Scripts\\activate.bat (VIRTUAL_ENV, Scripts first on PATH), or conda's PATH order and CONDA_PREFIX.
    Activation .bat scripts are not run: tfgpu's own variables are set here instead."""
    prefix = str(entry["prefix"]).rstrip("\\/")
    env = {k: v for k, v in base.items() if k.upper() != "PYTHONHOME"}
    path_key = next((k for k in env if k.upper() == "PATH"), "PATH")
    old_path = env.pop(path_key, "")
    if is_conda_env(entry):
        first = [prefix + ("\\" + d if d else "") for d in _CONDA_WINDOWS_PATH]
        env.update({"CONDA_PREFIX": prefix, "CONDA_DEFAULT_ENV": str(entry.get("name") or prefix)})
    else:
        first = [prefix + "\\Scripts"]
        env["VIRTUAL_ENV"] = prefix
    env[path_key] = ";".join([*first, *([old_path] if old_path else [])])
    name, value = ALLOW_GROWTH
    env.setdefault(name, value)
    return env


def activate_line(entry: Mapping[str, Any], os_name: str = "linux") -> str:
    """How a user activates it in their own shell (conda users: `conda activate`; a venv: its activate script)."""
    from shlex import quote

    prefix = str(entry["prefix"])
    if is_conda_env(entry):
        return f"conda activate {quote(prefix)}  (or micromamba activate; none needed for `tfgpu run`)"
    if os_name == "windows":
        return f"{prefix}\\Scripts\\activate.bat"
    return f". {quote(prefix + '/bin/activate')}"


def how_to_use(entry: Mapping[str, Any], os_name: str = "linux") -> list[str]:
    """The lines `tfgpu create` ends with."""
    target = str(entry.get("name") or "--prefix " + str(entry["prefix"]))
    return [f"use it: tfgpu run {target} -- python -c 'import tensorflow as tf; print(tf.__version__)'",
            f"        tfgpu shell {target}", f"        {activate_line(entry, os_name)}"]


def most_recent() -> dict[str, Any] | None:
    """The environment tfgpu made last (the registry's newest `created`) whose directory exists."""
    from tfgpu.build import registry

    items = [e for e in registry.load() if e.get("backend") not in CONTAINER_BACKENDS
             and Path(str(e.get("prefix"))).is_dir()]
    if not items:
        return None
    # the registry appends: on a tie of `created` (one second), the later entry is the newer
    return max(enumerate(items), key=lambda ie: (str(ie[1].get("created") or ""), ie[0]))[1]


#: The conda packages whose versions are the CUDA runtime an environment really has (the pip wheels' names are
#: the knowledge base's: compat/cuda.toml cuda_runtime_wheels, cudnn_wheels).
_CONDA_CUDA = ("cuda-cudart", "cuda-version", "cudatoolkit")


def installed_cuda(prefix: str | os.PathLike[str]) -> dict[str, str]:
    """The CUDA runtime and cuDNN installed in an environment, read from what was installed (pip's
    *.dist-info of the nvidia-* wheels, conda's conda-meta records); {} when it has none (a CPU or a
    system-CUDA environment). Keys: cuda, cuda_from, cudnn, cudnn_from."""
    import json
    import re

    from tfgpu.kb.knowledge import load_kb

    kb = load_kb()
    root = Path(prefix)
    found: dict[str, str] = {}
    for info in root.glob("lib/python*/site-packages/*.dist-info"):
        m = re.fullmatch(r"(.+)-([^-]+)\.dist-info", info.name)
        if not m:
            continue
        dist = m.group(1).lower().replace("_", "-")
        if dist in kb.cuda_runtime_dists and "cuda" not in found:
            found.update(cuda=m.group(2), cuda_from=f"{dist}, pip")
        if dist in kb.cudnn_dists and "cudnn" not in found:
            found.update(cudnn=m.group(2), cudnn_from=f"{dist}, pip")
    for rec in sorted((root / "conda-meta").glob("*.json")):
        try:
            meta = json.loads(rec.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        name, ver = str(meta.get("name", "")), str(meta.get("version", ""))
        if name in _CONDA_CUDA and "cuda" not in found:
            found.update(cuda=ver, cuda_from=f"{name}, conda")
        if name == "cudnn" and "cudnn" not in found:
            found.update(cudnn=ver, cudnn_from="cudnn, conda")
    return found
