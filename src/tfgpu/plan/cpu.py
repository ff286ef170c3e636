"""The CPU route (--cpu): tensorflow-cpu (or tensorflow) without CUDA or nvidia-* wheels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from packaging.version import Version

from tfgpu.core.errors import UsageError
from tfgpu.kb.queries import pin_source_urls
from tfgpu.plan.choose import target_os
from tfgpu.plan.model import Plan
from tfgpu.plan.request import BuildRequest

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts
    from tfgpu.kb.knowledge import KnowledgeBase
from tfgpu.plan.envspec import _check_python_and_name, _join, env_python, pins_for


def cpu_dist(kb: KnowledgeBase, v: Version, os_name: str, arch: str = "x86_64") -> str:
    """The PyPI project that installs TensorFlow ``v`` for the CPU only: tensorflow-cpu where compat/rules.toml
    `tensorflow-cpu-package` holds (x86_64 Linux and Windows from 2.1), else tensorflow (CPU-only up to 2.0; aarch64
    has no tensorflow-cpu wheel; on macOS, where tensorflow-cpu stops at 2.16.2, tensorflow is a CPU build as well).
    Neither pulls nvidia-* wheels without [and-cuda]."""
    return "tensorflow-cpu" if kb.rule("tensorflow-cpu-package").holds(v, os_name, arch) else "tensorflow"


def cpu_dist_source(kb: KnowledgeBase) -> str:
    """Where the tensorflow-cpu rule comes from (a URL)."""
    rule = kb.rule("tensorflow-cpu-package")
    return str(kb.sources("rules").get(rule.source, {}).get("url", ""))


def plan_cpu_environment(kb: KnowledgeBase, facts: Facts, req: BuildRequest, *,
                         tools: Mapping[str, str | None] | None = None, home: str = "~/.local/share/tfgpu") -> Plan:
    """A CPU-only venv for ``req.tf`` (a release or a series): `tensorflow-cpu` or `tensorflow`, never
    [and-cuda] or nvidia-* wheels; nothing about the GPU is judged."""
    tf, name, prefix, python = str(req.tf), req.name, req.prefix, req.python
    index_url, find_links, offline = req.index_url, req.find_links, req.offline
    from tfgpu.backends import pip as pip_backend
    from tfgpu.backends.runners import PIP, Context
    from tfgpu.plan.choose import interpreters

    tools = dict(tools or {})
    os_name = target_os(facts)
    python = _check_python_and_name(python, name)
    try:
        v = kb.resolve_tf(tf, os=os_name)
    except UsageError:  # no GPU build for this OS (native Windows after 2.10, macOS): the CPU builds follow Linux's
        v = kb.resolve_tf(tf, os="linux")
        os_kb = "linux"
    else:
        os_kb = os_name
    tfs = str(v)
    if prefix is None:
        name = name or f"tf{tfs}-cpu"
        prefix = _join(os_name, home, "envs", name)
    ctx = Context(v=v, os=os_name, tools=tools, interpreters=interpreters(facts, tools),
                  wheel_pythons=tuple(kb.pythons_for(v, os_kb)), python=python, newest_python=kb.newest_python(os_kb))
    err = PIP.can_build(None, ctx)  # type: ignore[arg-type]  # the pip runner does not look at the recipe
    if err is not None:
        raise err
    py_ver = PIP.python_for(ctx)
    assert py_ver is not None
    arch = str((facts.get("platform") or {}).get("arch") or "x86_64")
    dist = cpu_dist(kb, v, os_name, arch)
    reqs = [f"{dist}=={tfs}"]
    notes: list[str] = []
    sources = [cpu_dist_source(kb)]
    for p in pins_for(v):
        reqs.append(p.requirement)
        notes.append(f"pin {p.requirement}: {p.why}" + (" (inferred)" if p.confidence != "sourced" else ""))
        sources.append(pin_source_urls(p))
    uv = tools.get("uv")
    base_python = ctx.interpreters.get(py_ver) or f"python{py_ver}"
    steps = (pip_backend.venv_step(base_python, prefix, uv=uv, python=py_ver),
             pip_backend.pip_install_step(
                 env_python(prefix, os_name, conda=False), reqs, uv=uv, index_url=index_url,
                 find_links=find_links, offline=offline,
                 why=f"install {reqs[0]} (CPU only: no CUDA, no nvidia-* wheels)"
                     + (f" with {len(reqs) - 1} pin(s)" if len(reqs) > 1 else "")))
    notes.append("CPU only (--cpu): TensorFlow will not use a GPU; the smoke test checks CPU ops")
    return Plan(
        tf=tfs, backend="pip", backend_reason="--cpu: a venv and pip; a CPU build needs no CUDA or conda",
        prefix=prefix, name=name, python=py_ver, steps=steps, notes=tuple(notes), recipe_id="cpu",
        sources=tuple(dict.fromkeys(s for s in sources if s)), tool="uv" if uv else "venv", os=os_name,
        pip_requirements=tuple(reqs), env_python=env_python(prefix, os_name, conda=False), verdict="ready",
        cpu=True,
    )
