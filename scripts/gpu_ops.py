"""The GPU operations scripts/gpu_check.sh logs (issue 27, section 5): a small op that must work and one that must fail,
with JAX and with PyTorch, so that `tfgpu explain` reads real CUDA logs of this machine.

    python3 scripts/gpu_ops.py jax-ok | jax-oom | torch-ok | torch-oom

Each prints what it used (versions, devices) and lets a failure end in the library's own traceback, as a user's
script would. The failing ones ask for several times the GPU's memory in one allocation (an out-of-memory error).
Nothing here is imported by tfgpu; stdlib + the library under test only.
"""

from __future__ import annotations

import os
import sys

# one allocation this many times the GPU's memory: certainly more than the GPU has
OOM_FACTOR = 4


def jax_ok() -> None:
    import jax
    import jax.numpy as jnp

    print(f"jax {jax.__version__}, jaxlib {getattr(jax.lib, '__version__', '?')}, backend {jax.default_backend()}")
    print(f"devices: {jax.devices()}")
    x = jnp.ones((2048, 2048), jnp.float32)
    y = (x @ x).block_until_ready()
    print(f"matmul 2048x2048: sum {float(y.sum())}")
    img = jnp.ones((8, 3, 64, 64), jnp.float32)
    kernel = jnp.ones((16, 3, 3, 3), jnp.float32)
    out = jax.lax.conv_general_dilated(img, kernel, (1, 1), "SAME").block_until_ready()  # cuDNN on a GPU
    print(f"conv 3x3: shape {out.shape}, sum {float(out.sum())}")


def jax_oom() -> None:
    import jax
    import jax.numpy as jnp

    dev = jax.devices()[0]
    print(f"jax {jax.__version__}, device {dev}")
    try:
        limit = int((dev.memory_stats() or {}).get("bytes_limit") or 0)
    except Exception as exc:  # memory_stats is not available on every backend
        print(f"memory_stats: {type(exc).__name__}: {exc}")
        limit = 0
    n = (OOM_FACTOR * limit // 4) if limit else 2**38  # float32 elements (2**38: 1 TiB)
    print(f"allocating {n * 4} bytes on {dev} (bytes_limit {limit})")
    jnp.zeros((n,), jnp.float32).block_until_ready()


def torch_ok() -> None:
    import torch

    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
    print(f"cuda available: {torch.cuda.is_available()}, devices: {torch.cuda.device_count()}")
    dev = torch.device("cuda")
    print(f"device 0: {torch.cuda.get_device_name(0)}, capability {torch.cuda.get_device_capability(0)}")
    x = torch.ones((2048, 2048), device=dev)
    y = x @ x
    img = torch.ones((8, 3, 64, 64), device=dev)
    out = torch.nn.functional.conv2d(img, torch.ones((16, 3, 3, 3), device=dev), padding=1)  # cuDNN
    torch.cuda.synchronize()
    print(f"matmul 2048x2048: sum {float(y.sum())}; conv 3x3: shape {tuple(out.shape)}, sum {float(out.sum())}")


def torch_oom() -> None:
    import torch

    total = torch.cuda.get_device_properties(0).total_memory
    print(f"torch {torch.__version__}, device 0: {torch.cuda.get_device_name(0)}, total {total} bytes")
    torch.empty(OOM_FACTOR * total, dtype=torch.uint8, device="cuda")


OPS = {"jax-ok": jax_ok, "jax-oom": jax_oom, "torch-ok": torch_ok, "torch-oom": torch_oom}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in OPS:
        print(f"usage: gpu_ops.py {{{'|'.join(OPS)}}}", file=sys.stderr)
        return 2
    print(f"python {sys.version.split()[0]}; CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}")
    sys.stdout.flush()
    OPS[argv[0]]()
    print("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
