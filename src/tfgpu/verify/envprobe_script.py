# mypy: ignore-errors
"""Runs INSIDE the environment `tfgpu doctor --import` judges: import TensorFlow, ask it for its GPUs, then open each
library name given on the command line through TensorFlow's own loader (tf.load_op_library: dlopen from
libtensorflow_framework, the object whose RUNPATH TensorFlow's CUDA loader searches), and report what the process
really mapped (/proc/self/maps). Standard library + tensorflow only; Python 2.7/3.5+ syntax. One JSON document
between markers on stdout; TensorFlow's log goes to stderr.
Usage: python envprobe_script.py LIBNAME...
"""

import json
import os
import re
import sys

BEGIN = "@@TFGPU-ENVPROBE-BEGIN@@"
END = "@@TFGPU-ENVPROBE-END@@"
LIB_RE = re.compile(r"(?:^|/)(lib(?:cuda|cudart|cublas|cublasLt|cudnn\w*|cufft|curand|cusolver|cusparse|nccl|cupti"
                    r"|nvrtc|nvJitLink|nvinfer\w*)\.so(?:\.[\d.]+)?)$")


def mapped():
    out = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    if LIB_RE.search(path) and path not in out:
                        out.append(path)
    except Exception:  # not Linux
        return None
    return out


def main():
    doc = {"import_error": None, "version": None, "gpus": None, "gpu_error": None, "loads": {}, "mapped": None}
    try:
        import tensorflow as tf
        doc["version"] = getattr(tf, "__version__", None)
    except BaseException as exc:
        doc["import_error"] = f"{type(exc).__name__}: {str(exc)[:1500]}"
        doc["mapped"] = mapped()
        return doc
    try:
        lister = getattr(getattr(tf, "config", None), "list_physical_devices", None)
        if lister is None:
            from tensorflow.python.client import device_lib
            doc["gpus"] = [d.name for d in device_lib.list_local_devices() if d.device_type == "GPU"]
        else:
            doc["gpus"] = [d.name for d in lister("GPU")]
    except BaseException as exc:
        doc["gpu_error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
    for name in sys.argv[1:]:
        try:
            tf.load_op_library(name)
            doc["loads"][name] = None
        except BaseException as exc:
            doc["loads"][name] = (f"{type(exc).__name__}: {exc}")[:300]
    doc["mapped"] = mapped()
    return doc


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")
    result = main()
    sys.stdout.write("\n" + BEGIN + "\n" + json.dumps(result) + "\n" + END + "\n")
    sys.stdout.flush()
