# mypy: ignore-errors
"""Runs INSIDE the environment `tfgpu doctor --import` judges: import TensorFlow, ask it for its GPUs, then open each
library name given on the command line through TensorFlow's own CUDA loader -- the DsoLoader::Get*DsoHandle function
of libtensorflow_framework (TSL's or StreamExecutor's, called through ctypes: the code gpu_device.cc's GPU check
runs) or, where the framework exports none for that library, tf.load_op_library (a dlopen from the same object) --
and report what the process really mapped (/proc/self/maps). Standard library + tensorflow only; Python 2.7/3.5+
syntax. One JSON document between markers on stdout; TensorFlow's log goes to stderr.
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


#: soname family -> TensorFlow's loader function (tsl/platform/default/dso_loader.cc)
LOADERS = {"cuda": "GetCudaDriverDsoHandle", "cudart": "GetCudaRuntimeDsoHandle", "cublas": "GetCublasDsoHandle",
           "cublasLt": "GetCublasLtDsoHandle", "cufft": "GetCufftDsoHandle", "curand": "GetCurandDsoHandle",
           "cusolver": "GetCusolverDsoHandle", "cusparse": "GetCusparseDsoHandle", "cudnn": "GetCudnnDsoHandle"}
NAMESPACES = ("tsl", "stream_executor")  # 2.12+, then 1.14-2.11


def framework(tf):
    import glob
    here = os.path.dirname(getattr(tf, "__file__", "") or "")
    for d in (here, os.path.join(os.path.dirname(here), "tensorflow_core")):
        hits = sorted(glob.glob(os.path.join(d, "libtensorflow_framework.so.*")))
        if hits:
            return hits[0]
    return None


def loader_function(lib, name):
    """TensorFlow's DsoLoader function for a soname, or None; it returns a StatusOr through a hidden pointer."""
    m = re.match(r"^lib([A-Za-z]+)\.so", name)
    fn = LOADERS.get(m.group(1)) if m else None
    if lib is None or fn is None:
        return None, None
    for ns in NAMESPACES:
        symbol = "_ZN%d%s8internal9DsoLoader%d%sEv" % (len(ns), ns, len(fn), fn)
        try:
            f = getattr(lib, symbol)
        except AttributeError:
            continue
        return f, "%s::internal::DsoLoader::%s" % (ns, fn)
    return None, None


def open_through_tensorflow(tf, names, doc):
    import ctypes
    path = framework(tf)
    try:
        lib = ctypes.CDLL(path) if path else None
    except OSError:
        lib = None
    for name in names:
        f, how = loader_function(lib, name)
        try:
            if f is not None:
                f.restype = None
                f.argtypes = [ctypes.c_void_p]
                out = (ctypes.c_uint64 * 16)()  # the StatusOr<void*> it returns (16 bytes), with room to spare
                f(ctypes.addressof(out))
                doc["loads"][name] = None
            else:
                how = "tf.load_op_library"
                tf.load_op_library(name)
                doc["loads"][name] = None
        except BaseException as exc:
            doc["loads"][name] = ("%s: %s" % (type(exc).__name__, exc))[:300]
        doc["how"][name] = how


def main():
    doc = {"import_error": None, "version": None, "gpus": None, "gpu_error": None, "loads": {}, "how": {},
           "mapped": None}
    try:
        import tensorflow as tf
        doc["version"] = getattr(tf, "__version__", None)
    except BaseException as exc:
        doc["import_error"] = "%s: %s" % (type(exc).__name__, str(exc)[:1500])
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
        doc["gpu_error"] = "%s: %s" % (type(exc).__name__, str(exc)[:500])
    open_through_tensorflow(tf, sys.argv[1:], doc)
    doc["mapped"] = mapped()
    return doc


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")
    result = main()
    sys.stdout.write("\n" + BEGIN + "\n" + json.dumps(result) + "\n" + END + "\n")
    sys.stdout.flush()
