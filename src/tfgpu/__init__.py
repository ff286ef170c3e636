"""tfgpu: environment doctor and installer for TensorFlow on NVIDIA GPUs.

In a notebook or a script: ``import tfgpu; tfgpu.doctor()`` (also ``tfgpu.doctor(tf="2.21")``,
``tfgpu.explain(log_text)``, ``tfgpu.smoke()``; tfgpu.api.notebook). They are loaded on first use, so that
``import tfgpu`` itself stays cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__", "doctor", "explain", "smoke"]

#: The notebook API (tfgpu.api.notebook), imported when first asked for.
_LAZY = ("doctor", "explain", "smoke")


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from tfgpu.api import notebook

        return getattr(notebook, name)
    msg = f"module 'tfgpu' has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
