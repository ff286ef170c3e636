# -*- coding: utf-8 -*-
"""Runs INSIDE an environment `nox -s recipes` built: import TensorFlow, report the resolved versions of
the packages recipes pin, and load with ctypes every CUDA library the build needs.

Standard library + tensorflow only, Python 2.7/3.5+ syntax (no f-strings). Prints one JSON document.
A missing NVIDIA driver makes only libcuda (cuInit) fail; libcudart/libcublas/libcudnn load without one.
"""
from __future__ import print_function

import ctypes
import glob
import json
import os
import sys

PACKAGES = ("tensorflow", "tensorflow-gpu", "numpy", "protobuf", "keras", "h5py", "typing-extensions",
            "typing_extensions", "tf-keras", "tensorflow-estimator", "scipy")

#: Library families TensorFlow's dso loader opens (tensorflow/tsl/platform/default/dso_loader.cc).
CUDA_FAMILIES = ("cudart", "cublas", "cublasLt", "cufft", "curand", "cusolver", "cusparse", "cudnn")


def versions():
    out = {}
    try:
        from importlib import metadata  # Python 3.8+

        for name in PACKAGES:
            try:
                out[name.replace("_", "-")] = metadata.version(name)
            except Exception:
                pass
        return out
    except ImportError:
        pass
    try:
        import pkg_resources

        for name in PACKAGES:
            try:
                out[name.replace("_", "-")] = pkg_resources.get_distribution(name).version
            except Exception:
                pass
    except ImportError:
        pass
    return out


def site_dirs():
    import site

    dirs = []
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # old virtualenv's site.py
        pass
    dirs.extend(p for p in sys.path if p.endswith("site-packages"))
    return [d for i, d in enumerate(dirs) if d not in dirs[:i]]


def nvidia_wheel_libs():
    found = []
    for d in site_dirs():
        found.extend(sorted(glob.glob(os.path.join(d, "nvidia", "*", "lib", "lib*.so*"))))
    return found


def try_load(name_or_path):
    try:
        ctypes.CDLL(name_or_path, mode=ctypes.RTLD_GLOBAL)
        return None
    except OSError as exc:
        return str(exc)[:300]


def load_all(paths):
    """Load every library, retrying those whose dependencies (in another nvidia/*/lib) were not loaded yet."""
    errors = dict((p, "not tried") for p in paths)
    pending = list(paths)
    while pending:
        failed = []
        for path in pending:
            errors[path] = try_load(path)
            if errors[path] is not None:
                failed.append(path)
        if len(failed) == len(pending):
            break
        pending = failed
    return errors


def keras_check(tf):
    """A Keras LSTM on a symbolic input: numpy >= 1.20 breaks it on TF <= 2.4 (tensorflow#47087)."""
    try:
        keras = tf.keras
        inp = keras.Input(shape=(3, 1))
        keras.layers.LSTM(2)(inp)
        return None
    except Exception as exc:  # noqa: BLE001
        return "%s: %s" % (type(exc).__name__, str(exc)[:300])


def wanted_sonames(info):
    """The sonames a build's dso loader asks for, from get_build_info()'s versions."""
    names = []
    cuda = str(info.get("cuda_version") or "")
    cudnn = str(info.get("cudnn_version") or "")
    if cuda:
        major = cuda.split(".")[0]
        names.append(("cudart", ["libcudart.so." + cuda, "libcudart.so." + major + ".0", "libcudart.so." + major]))
        names.append(("cublas", ["libcublas.so." + cuda, "libcublas.so." + major]))
    if cudnn:
        names.append(("cudnn", ["libcudnn.so." + cudnn.split(".")[0]]))
    return names


def main():
    doc = {"python": "%d.%d.%d" % sys.version_info[:3]}
    try:
        import tensorflow as tf
    except Exception as exc:  # noqa: BLE001 - the failure is the answer
        doc["import_error"] = "%s: %s" % (type(exc).__name__, str(exc)[:500])
        doc["versions"] = versions()
        print(json.dumps(doc))
        return
    doc["tf_version"] = tf.__version__
    doc["versions"] = versions()
    info = {}
    try:
        info = dict(tf.sysconfig.get_build_info())  # TF >= 2.3
    except Exception as exc:  # noqa: BLE001
        doc["build_info_error"] = "%s: %s" % (type(exc).__name__, exc)
    doc["build_info"] = dict((k, str(v)) for k, v in info.items())
    try:
        doc["cuda_build"] = bool(tf.test.is_built_with_cuda())
    except Exception:  # noqa: BLE001
        doc["cuda_build"] = None
    wheel_libs = nvidia_wheel_libs()
    by_name = dict((os.path.basename(p), p) for p in wheel_libs)
    loads = []
    for family, candidates in wanted_sonames(info):
        entry = {"family": family, "candidates": candidates, "loaded": None, "how": None, "error": None}
        for cand in candidates:
            err = try_load(cand)
            if err is None:
                entry["loaded"], entry["how"] = cand, "dynamic loader"
                break
            if cand in by_name and try_load(by_name[cand]) is None:
                entry["loaded"], entry["how"] = cand, "nvidia wheel"
                break
            entry["error"] = err
        loads.append(entry)
    doc["build_info_libs"] = loads
    doc["keras_error"] = keras_check(tf)
    wheel_results = []
    errors = load_all(wheel_libs)
    for path in wheel_libs:
        err = errors[path]
        wheel_results.append({"lib": os.path.relpath(path, os.path.dirname(os.path.dirname(os.path.dirname(path)))),
                              "error": err})
    doc["nvidia_wheel_libs"] = wheel_results
    doc["libcuda"] = try_load("libcuda.so.1")  # expected to fail on a machine without the driver
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
