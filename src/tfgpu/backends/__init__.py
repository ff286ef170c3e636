"""Installers a plan can use: pip (uv or python -m venv), conda/mamba/micromamba, tfgpu's embedded engine."""
