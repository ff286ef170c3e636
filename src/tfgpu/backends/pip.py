"""pip backend steps: a venv made by uv (fast) or `python -m venv`, then pip/uv pip install."""

from __future__ import annotations

from collections.abc import Sequence

from tfgpu.backends.steps import Step


def venv_step(base_python: str, prefix: str, *, uv: str | None, python: str) -> Step:
    if uv:
        return Step((uv, "venv", "--no-project", "--python", base_python, prefix),
                    f"create a venv with Python {python} ({base_python}) using uv")
    return Step((base_python, "-m", "venv", prefix),
                f"create a venv with Python {python} using the standard library's venv")


def _index_args(index_url: str | None, find_links: Sequence[str], offline: bool, *, uv: bool) -> list[str]:
    args: list[str] = []
    if index_url:
        args += ["--index-url", index_url]
    for fl in find_links:
        args += ["--find-links", fl]
    if offline:
        # uv: --offline forbids the network; --no-index keeps it off the default index (find-links only)
        args += (["--offline"] if uv else []) + ([] if index_url else ["--no-index"])
    return args


def pip_install_step(
    env_python: str,
    requirements: Sequence[str],
    *,
    uv: str | None,
    index_url: str | None = None,
    find_links: Sequence[str] = (),
    offline: bool = False,
    why: str,
) -> Step:
    if uv:
        argv = [uv, "pip", "install", "--python", env_python,
                *_index_args(index_url, find_links, offline, uv=True), *requirements]
    else:
        argv = [env_python, "-m", "pip", "install", "--disable-pip-version-check",
                *_index_args(index_url, find_links, offline, uv=False), *requirements]
    return Step(tuple(argv), why)
