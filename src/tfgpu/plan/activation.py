"""What an environment sets when it is activated: LD_LIBRARY_PATH for the nvidia-* wheels' libraries where a
release needs it, TF_FORCE_GPU_ALLOW_GROWTH on small GPUs; as venv activate lines and conda activate.d steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from tfgpu.backends.steps import Step
from tfgpu.core.tfnames import ALLOW_GROWTH, SMALL_GPU_MIB

if TYPE_CHECKING:
    from tfgpu.facts.document import Facts
    from tfgpu.kb.knowledge import KnowledgeBase
from tfgpu.plan.envspec import _join, small_gpu


def nvidia_libpath_needed(kb: KnowledgeBase, v: Version) -> bool:
    """Do release ``v``'s wheels miss the CUDA libraries of their own nvidia-* wheels unless their lib directories
    are on LD_LIBRARY_PATH (compat/rules.toml `nvidia-wheels-need-library-path`: 2.16-2.17)?"""
    return kb.rule("nvidia-wheels-need-library-path").holds(v)


def nvidia_libpath_source(kb: KnowledgeBase) -> str:
    """Where that rule comes from (tensorflow/tensorflow#63362)."""
    rule = kb.rule("nvidia-wheels-need-library-path")
    return str(kb.sources("rules").get(rule.source, {}).get("url", ""))


def _posix_activation(lines: Sequence[str]) -> str:
    body = ["# written by tfgpu: environment variables this TensorFlow environment needs"]
    for line in lines:
        name, _, value = line.partition("=")
        body.append(f"export _TFGPU_OLD_{name}=\"${{{name}:-}}\"")
        body.append(f"export {name}={value}")
    return "\n".join(body) + "\n"


def _posix_deactivation(lines: Sequence[str]) -> str:
    body = ["# written by tfgpu: undo activate.d/tfgpu_env_vars.sh"]
    for line in lines:
        name = line.partition("=")[0]
        body.append(f"if [ -n \"${{_TFGPU_OLD_{name}:-}}\" ]; then export {name}=\"$_TFGPU_OLD_{name}\"; "
                    f"else unset {name}; fi")
        body.append(f"unset _TFGPU_OLD_{name}")
    return "\n".join(body) + "\n"


def _venv_nvidia_snippet(python: str, kb: KnowledgeBase) -> str:
    releases = kb.rule("nvidia-wheels-need-library-path").applies
    return (
        f"\n# added by tfgpu: TensorFlow {releases} does not find the CUDA libraries of its nvidia-* wheels\n"
        f"# unless they are on LD_LIBRARY_PATH ({nvidia_libpath_source(kb)})\n"
        f"for _tfgpu_d in \"$VIRTUAL_ENV\"/lib/python{python}/site-packages/nvidia/*/lib; do\n"
        "  [ -d \"$_tfgpu_d\" ] && LD_LIBRARY_PATH=\"$_tfgpu_d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\"\n"
        "done\n"
        "export LD_LIBRARY_PATH\n"
        "unset _tfgpu_d\n"
    )


def activation_lines(recipe: Any, facts: Facts, *, conda_like: bool, os_name: str) -> tuple[list[str], list[str]]:
    """The NAME=VALUE lines an environment's activation sets (recipe + small-GPU memory growth), and notes."""
    lines: list[str] = []
    notes: list[str] = []
    if conda_like and recipe is not None and recipe.backend == "conda+pip" and recipe.activation and os_name != "windows":
        lines.extend(recipe.activation)
        extra = str(recipe.raw.get("extra_fix", ""))
        if "XLA_FLAGS" in extra:
            lines.append("XLA_FLAGS=--xla_gpu_cuda_data_dir=$CONDA_PREFIX/lib/")
            notes.append("XLA_FLAGS points XLA at the environment's libdevice (pip.md's Ubuntu 22.04 fix); "
                         "ptxas may still need `cuda-nvcc` from the nvidia channel: " + extra)
    if small_gpu(facts):
        lines.append("=".join(ALLOW_GROWTH))
        notes.append(f"a GPU has <= {SMALL_GPU_MIB} MiB: TF_FORCE_GPU_ALLOW_GROWTH=true makes TensorFlow allocate "
                     "GPU memory as needed instead of mapping nearly all of it (cuDNN failures reported on 2 GB GPUs)")
    return lines, notes


def conda_activation_steps(lines: Sequence[str], prefix: str, os_name: str) -> list[Step]:
    """etc/conda/activate.d (and deactivate.d) scripts that set ``lines`` in a conda environment."""
    if not lines:
        return []
    if os_name != "windows":
        return [
            Step((), "activation script: conda runs etc/conda/activate.d/*.sh on `conda activate`",
                 kind="write-file", path=_join(os_name, prefix, "etc", "conda", "activate.d", "tfgpu_env_vars.sh"),
                 content=_posix_activation(lines)),
            Step((), "deactivation script: restores the variables on `conda deactivate`",
                 kind="write-file", path=_join(os_name, prefix, "etc", "conda", "deactivate.d", "tfgpu_env_vars.sh"),
                 content=_posix_deactivation(lines)),
        ]
    content = "".join(f"set \"{line.partition('=')[0]}={line.partition('=')[2]}\"\r\n" for line in lines)
    return [Step((), "activation script: conda runs etc\\conda\\activate.d\\*.bat on `conda activate`",
                 kind="write-file", path=_join(os_name, prefix, "etc", "conda", "activate.d", "tfgpu_env_vars.bat"),
                 content=content)]
