"""`tfgpu shell` enters the environment on machines whose ~/.bashrc runs `pyenv init` or conda's `conda init`
block (issue 29, item 1): a real bash, driven through tmux in a temporary HOME, must run the environment's
python, import TensorFlow from it, and show the environment's name in its prompt."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
PYENV = shutil.which("pyenv") or next((str(p) for p in [Path("~/.pyenv/bin/pyenv").expanduser()] if p.is_file()),
                                      None)
needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install tmux)")

#: The block `conda init bash` writes into ~/.bashrc, as conda/core/initialize.py (`_bashrc_content`,
#: https://github.com/conda/conda/blob/main/conda/core/initialize.py) renders it for a prefix.
CONDA_INIT_BLOCK = """\
# >>> conda initialize >>>
# !! Contents within this block are managed by 'conda init' !!
__conda_setup="$('{prefix}/bin/conda' 'shell.bash' 'hook' 2> /dev/null)"
if [ $? -eq 0 ]; then
    eval "$__conda_setup"
else
    if [ -f "{prefix}/etc/profile.d/conda.sh" ]; then
        . "{prefix}/etc/profile.d/conda.sh"
    else
        export PATH="{prefix}/bin:$PATH"
    fi
fi
unset __conda_setup
# <<< conda initialize <<<
"""

#: A stand-in for `conda`: `shell.bash hook` prints what conda's hook does for a shell started with
#: auto_activate_base (conda/shell/etc/profile.d/conda.sh: a `conda` function, CONDA_SHLVL, then
#: `conda activate base`), and `shell.posix activate base` what conda's PosixActivator prints: PS1 with
#: "(base) ", base's bin first on PATH, CONDA_PREFIX, CONDA_SHLVL, CONDA_DEFAULT_ENV, CONDA_PROMPT_MODIFIER.
FAKE_CONDA = """\
#!/bin/sh
base={prefix}
case "$1 $2" in
  "shell.bash hook")
    cat <<HOOK
export CONDA_EXE='$base/bin/conda'
export CONDA_PYTHON_EXE='$base/bin/python'
__conda_activate() {{
    ask_conda="\\$(PS1="\\${{PS1:-}}" "\\$CONDA_EXE" shell.posix "\\$@")" || return
    eval "\\$ask_conda"
    hash -r
}}
conda() {{
    case "\\$1" in activate|deactivate) __conda_activate "\\$@" ;; *) "\\$CONDA_EXE" "\\$@" ;; esac
}}
if [ -z "\\${{CONDA_SHLVL+x}}" ]; then export CONDA_SHLVL=0; fi
conda activate base
HOOK
    ;;
  "shell.posix activate")
    cat <<ACT
PS1='(base) $PS1'
export PATH='$base/bin:$PATH'
export CONDA_PREFIX='$base'
export CONDA_SHLVL='1'
export CONDA_DEFAULT_ENV='base'
export CONDA_PROMPT_MODIFIER='(base) '
ACT
    ;;
  *) exit 1 ;;
esac
"""


def _environment(tmp_path: Path) -> Path:
    """A venv tfgpu "made", with a stand-in TensorFlow in its site-packages only."""
    prefix = tmp_path / "envs" / "tf-shell"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    site = next(prefix.glob("lib/python*/site-packages"))
    (site / "tensorflow").mkdir()
    (site / "tensorflow" / "__init__.py").write_text('__version__ = "2.21.0"\n')
    return prefix


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[list[str]]:
    """tmux on a private socket (never the user's server); the server is killed afterwards."""
    assert TMUX is not None
    base = [TMUX, "-S", str(tmp_path / "tmux.sock")]
    yield base
    subprocess.run([*base, "kill-server"], capture_output=True, check=False)


def _wait_for(path: Path, seconds: float = 30) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.1)
    raise AssertionError(f"nothing written to {path.name} within {seconds} s")


def _screen(tmux: list[str]) -> str:
    return subprocess.run([*tmux, "capture-pane", "-p", "-t", "t"], capture_output=True, text=True,
                          check=True).stdout


def _wait_for_prompt(tmux: list[str], seconds: float = 30) -> None:
    """Until the shell shows its first prompt (a line after tfgpu's note, then a moment of quiet), so nothing
    is typed ahead."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        lines = [line for line in _screen(tmux).splitlines() if line.strip()]
        note = next((i for i, line in enumerate(lines) if "leaves it" in line), None)
        if note is not None and len(lines) > note + 1:
            time.sleep(0.5)
            return
        time.sleep(0.1)
    raise AssertionError(f"no prompt within {seconds} s:\n{_screen(tmux)}")


def _drive_shell(tmp_path: Path, tmux: list[str], rc_files: dict[str, str], extra_env: dict[str, str],
                 shell: str = "/bin/bash") -> tuple[str, str]:
    """`tfgpu shell tf-shell` in tmux with HOME=tmp_path/home holding ``rc_files`` (paths under HOME): what
    `python` says inside, and the screen (its prompt)."""
    from tfgpu.build import registry

    home = tmp_path / "home"
    for name, text in rc_files.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    tfgpu_home = tmp_path / "tfgpu-home"
    os.environ["TFGPU_HOME"] = str(tfgpu_home)  # restored by the monkeypatch of the caller
    prefix = _environment(tmp_path)
    registry.record(name="tf-shell", prefix=str(prefix), backend="pip", tool="venv", tf="2.21.0", python="3.11",
                    recipe="cpu", env_python=str(prefix / "bin" / "python"))
    env = {"HOME": str(home), "SHELL": shell, "TERM": "xterm", "TFGPU_HOME": str(tfgpu_home),
           "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "PS1": "$ ", **extra_env}
    src = Path(__file__).resolve().parents[3] / "src"
    env["PYTHONPATH"] = str(src)
    launch = shlex.join(["env", "-i", *(f"{k}={v}" for k, v in env.items()),
                         sys.executable, "-m", "tfgpu", "shell", "tf-shell"])
    subprocess.run([*tmux, "new-session", "-d", "-s", "t", "-x", "200", "-y", "40", launch], check=True)
    _wait_for_prompt(tmux)
    out = tmp_path / "python.txt"
    probe = 'import sys, tensorflow; print(sys.prefix, tensorflow.__version__, tensorflow.__file__)'
    subprocess.run([*tmux, "send-keys", "-t", "t", f"python -c '{probe}' > {out} 2>&1", "Enter"], check=True)
    said = _wait_for(out)
    screen = _screen(tmux)
    subprocess.run([*tmux, "send-keys", "-t", "t", "exit", "Enter"], check=True)
    return said.strip(), screen


def _assert_inside(said: str, screen: str, tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "tf-shell"
    assert said.startswith(f"{prefix} 2.21.0 {prefix}/lib/"), said  # the environment's python and TensorFlow
    prompts = [line for line in screen.splitlines() if "python -c" in line]
    assert prompts, screen
    assert prompts[0].startswith("(tf-shell) "), screen  # the prompt names the environment


@pytest.mark.real_subprocess
@needs_tmux
@pytest.mark.skipif(PYENV is None, reason="pyenv is not installed")
@pytest.mark.parametrize("virtualenv_init", [False, True], ids=["pyenv-init", "pyenv-virtualenv-init"])
def test_shell_enters_the_environment_when_bashrc_runs_pyenv_init(
        tmp_path: Path, tmux: list[str], monkeypatch: pytest.MonkeyPatch, virtualenv_init: bool) -> None:
    assert PYENV is not None
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "tfgpu-home"))
    root = subprocess.run([PYENV, "root"], capture_output=True, text=True, check=True).stdout.strip()
    bashrc = (f"export PYENV_ROOT={shlex.quote(root)}\n"
              'export PATH="$PYENV_ROOT/bin:$PATH"\n'
              'eval "$(pyenv init - bash)"\n')
    if virtualenv_init and (Path(root) / "plugins" / "pyenv-virtualenv").is_dir():
        bashrc += 'eval "$(pyenv virtualenv-init -)"\n'
    said, screen = _drive_shell(tmp_path, tmux, {".bashrc": bashrc}, {})
    _assert_inside(said, screen, tmp_path)


@pytest.mark.real_subprocess
@needs_tmux
def test_shell_enters_the_environment_when_bashrc_runs_conda_init(
        tmp_path: Path, tmux: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "tfgpu-home"))
    base = tmp_path / "miniconda3"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "conda").write_text(FAKE_CONDA.format(prefix=shlex.quote(str(base))))
    (base / "bin" / "conda").chmod(0o755)
    (base / "bin" / "python").write_text("#!/bin/sh\necho conda-base-python\n")  # base's python: no TensorFlow
    (base / "bin" / "python").chmod(0o755)
    said, screen = _drive_shell(tmp_path, tmux, {".bashrc": CONDA_INIT_BLOCK.format(prefix=base)}, {})
    _assert_inside(said, screen, tmp_path)


@pytest.mark.real_subprocess
@needs_tmux
@pytest.mark.skipif(PYENV is None, reason="pyenv is not installed")
@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_enter_the_environment_after_their_own_start_up_files(
        tmp_path: Path, tmux: list[str], monkeypatch: pytest.MonkeyPatch, shell: str) -> None:
    """zsh's ~/.zshrc runs `pyenv init - zsh`; fish's config.fish puts pyenv's shims first on PATH (as
    `pyenv init - fish` does)."""
    assert PYENV is not None
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed (apt-get install {shell})")
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "tfgpu-home"))
    root = subprocess.run([PYENV, "root"], capture_output=True, text=True, check=True).stdout.strip()
    if shell == "zsh":
        rc = {".zshrc": f"export PYENV_ROOT={shlex.quote(root)}\n"
                        'export PATH="$PYENV_ROOT/bin:$PATH"\neval "$(pyenv init - zsh)"\n'}
    else:
        rc = {".config/fish/config.fish": f"set -gx PYENV_ROOT {shlex.quote(root)}\n"
                                          "set -gx PATH $PYENV_ROOT/shims $PYENV_ROOT/bin $PATH\n"}
    said, screen = _drive_shell(tmp_path, tmux, rc, {}, shell=exe)
    _assert_inside(said, screen, tmp_path)


def test_each_shell_runs_the_users_startup_files_before_the_activation(tmp_path: Path) -> None:
    """The launch for bash, zsh, POSIX sh and fish (pure): the user's rc first, the activation after it."""
    from tfgpu.build.userenv import shell_launch

    entry = {"name": "tf$(rm -rf ~)", "prefix": "/envs/tf 2.21", "backend": "pip"}
    argv, extra, files = shell_launch(entry, "/bin/bash", "/run/rc", {})
    assert argv == ("/bin/bash", "--rcfile", "/run/rc/bashrc", "-i")
    rc = files["bashrc"].splitlines()
    assert rc[0] == '[ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"'
    assert rc[1] == ". /run/rc/activate.sh"
    assert rc[2] == 'PS1="(tf??rm?-rf???) ${PS1-}"'  # nothing a prompt expands
    assert ". '/envs/tf 2.21'/bin/activate" in files["activate.sh"]
    argv, extra, files = shell_launch(entry, "/usr/bin/zsh", "/run/rc", {"ZDOTDIR": "/home/u/.config/zsh"})
    assert argv == ("/usr/bin/zsh", "-i")
    assert extra == {"ZDOTDIR": "/run/rc", "_TFGPU_ZDOTDIR": "/home/u/.config/zsh"}
    assert files[".zshrc"].index('. "$ZDOTDIR/.zshrc"') < files[".zshrc"].index("activate.sh")
    argv, extra, files = shell_launch(entry, "/bin/dash", "/run/rc", {"ENV": "/home/u/.shinit"})
    assert (argv, extra) == (("/bin/dash", "-i"), {"ENV": "/run/rc/env.sh"})
    assert files["env.sh"].startswith("[ -f /home/u/.shinit ] && . /home/u/.shinit\n. /run/rc/activate.sh\n")
    argv, _, _ = shell_launch(entry, "/usr/bin/fish", "/run/rc", {})
    assert argv[:3] == ("/usr/bin/fish", "-i", "--init-command")
    assert argv[3].startswith("set -gx PATH '/envs/tf 2.21/bin' $PATH;")
    conda = {"name": "c", "prefix": "/envs/c", "backend": "rattler"}
    _, _, files = shell_launch(conda, "/bin/bash", "/run/rc", {})
    assert 'PS1="${PS1#"$CONDA_PROMPT_MODIFIER"}"' in files["bashrc"]  # conda's "(base) " is replaced
