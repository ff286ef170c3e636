"""GPU names as the tables compare them: vendor words, memory sizes and MIG/vGPU suffixes dropped."""

from __future__ import annotations

import functools
import re

#: factor, laptop/Max-Q, workstation/server edition), dropped before names are compared. A laptop or
#: Max-Q part shares its desktop model's chip from Pascal on (NVIDIA's CUDA GPUs page lists one row);
#: Maxwell/Kepler mobile parts carry the M in the model number ("GTX 960M") and stay distinct.
_GPU_NAME_DROP = (
    r"\b(?:nvidia|geforce|tesla|quadro|laptop|mobile|embedded|gpu|generation|workstation|server|edition|"
    r"with|max q|design|nvgpu|pcie|sxm\d?|nvl\d*|hbm\d?e?|\d+(?:\.\d+)?\s?(?:gb|g|mb))\b"
)


#: A MIG slice ("... MIG 1g.5gb") or vGPU profile ("A40-48Q") suffix: the rest names the physical GPU.
_GPU_NAME_SLICE = r"\s(?:mig\b.*|\d+[abcq])$"


@functools.cache
def _gpu_name_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The two patterns above, compiled on first use (~1.5 ms the doctor needs only for a GPU whose compute
    capability no probe reported)."""
    return re.compile(_GPU_NAME_SLICE), re.compile(_GPU_NAME_DROP)


def normalize_gpu_name(name: str) -> str:
    """A GPU name as compared with the tables: "NVIDIA GeForce RTX 3060 Laptop GPU" -> "rtx 3060",
    "NVIDIA A100-SXM4-40GB" -> "a100", "Quadro M1000M" -> "m1000m", "TITAN X (Pascal)" -> "titan x
    pascal". Whole names are compared, never parts: "RTX A3000 Laptop" is not "A30"."""
    text = str(name).lower().replace("_", " ").replace("-", " ").replace("(tm)", " ").replace("(r)", " ")
    text = re.sub(r"[()\[\],]", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    gpu_slice, drop = _gpu_name_patterns()
    text = gpu_slice.sub("", text)
    text = drop.sub(" ", text)
    return re.sub(r"\s+", " ", text).strip()
