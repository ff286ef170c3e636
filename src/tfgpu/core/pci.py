"""PCI device IDs as the probes read them and compat/gpus.toml writes them. Its own module: the probes
(tfgpu.facts.probe.parsers, run in the doctor's probe child) and the knowledge base both use it, and the probe
child need not import the knowledge base."""

from __future__ import annotations

import re

__all__ = ["normalize_pci_device_id"]


def normalize_pci_device_id(value: str | None) -> str | None:
    """An NVIDIA PCI device ID as 4 lowercase hex digits from the forms the probes read: sysfs "0x1e81",
    lspci "1e81", nvidia-smi "0x1E8110DE" (device << 16 | vendor), NVML pciDeviceId as hex. None when
    it is not one."""
    text = str(value or "").strip().lower().removeprefix("0x")
    if re.fullmatch(r"[0-9a-f]{8}", text):
        return text[:4] if text.endswith("10de") else None
    return text if re.fullmatch(r"[0-9a-f]{4}", text) else None
