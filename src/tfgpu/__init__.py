"""tfgpu: environment doctor and installer for TensorFlow on NVIDIA GPUs."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
