"""Runs INSIDE an environment `nox -s recipes` built: import TensorFlow, report the resolved versions of
the packages recipes pin, and load with ctypes every CUDA library the build needs.

Standard library + tensorflow only, Python 2.7/3.5+ syntax (no f-strings). Prints one JSON document.
A missing NVIDIA driver makes only libcuda (cuInit) fail; libcudart/libcublas/libcudnn load without one.
"""

import ctypes
import glob
import json
import os
import re
import sys

PACKAGES = ("tensorflow", "tensorflow-gpu", "numpy", "protobuf", "keras", "h5py", "typing-extensions",
            "typing_extensions", "tf-keras", "tensorflow-estimator", "scipy")

#: Library families TensorFlow's dso loader opens (tensorflow/tsl/platform/default/dso_loader.cc).
CUDA_FAMILIES = ("cudart", "cublas", "cublasLt", "cufft", "curand", "cusolver", "cusparse", "cudnn")


def versions():
    """name -> version of the installed distributions we report, from their *.dist-info directory names
    (works on every Python: uv's venvs have no pkg_resources, and importlib.metadata is 3.8+)."""
    wanted = dict((n.lower().replace("_", "-"), n) for n in PACKAGES)
    out = {}
    for d in site_dirs():
        for path in glob.glob(os.path.join(d, "*.dist-info")) + glob.glob(os.path.join(d, "*.egg-info")):
            stem = os.path.basename(path).rsplit(".", 1)[0]
            name, _, ver = stem.partition("-")
            key = name.lower().replace("_", "-")
            if key in wanted and ver:
                out[key] = ver.split("-py")[0]
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
        # TensorRT's wheels (tensorflow[and-cuda] 2.14 pins tensorrt==8.5.3.1) keep libnvinfer beside them
        found.extend(sorted(glob.glob(os.path.join(d, "tensorrt*", "lib*.so*"))))
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
    except Exception as exc:
        return "LSTM: %s: %s" % (type(exc).__name__, str(exc)[:300])
    return None


def h5_check(tf):
    """Save and load a Keras model in HDF5: h5py 3 broke load_model of TF < 2.4 ('str' object has no
    attribute 'decode'). None when it works or h5py is not installed."""
    try:
        import h5py  # noqa: F401
    except Exception:
        return None
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp()
    try:
        keras = tf.keras
        # uncompiled: Keras 3 cannot reload a legacy .h5 compiled with loss="mse" ('Could not locate
        # function'), a Keras matter; the h5py one fails on the model_config/keras_version attributes
        model = keras.Sequential([keras.layers.Dense(2, input_shape=(3,))])
        path = os.path.join(tmp, "m.h5")
        model.save(path)
        keras.models.load_model(path)
        return None
    except Exception as exc:
        return "%s: %s" % (type(exc).__name__, str(exc)[:300])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
    except Exception as exc:
        text = str(exc)
        missing = re.findall(r"(lib[\w.+-]+\.so[\w.]*): cannot open shared object file", text)
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        telling = [ln for ln in lines if "cannot open shared object" in ln] or \
            [ln for ln in lines if "Error" in ln] or lines[-1:]
        doc["import_error"] = "%s: %s" % (type(exc).__name__, telling[0][:400] if telling else "")
        doc["missing_libraries"] = missing
        doc["versions"] = versions()
        print(json.dumps(doc))
        return
    doc["tf_version"] = tf.__version__
    doc["versions"] = versions()
    info = {}
    try:
        info = dict(tf.sysconfig.get_build_info())  # TF >= 2.3
    except Exception as exc:
        doc["build_info_error"] = "%s: %s" % (type(exc).__name__, exc)
    doc["build_info"] = dict((k, str(v)) for k, v in info.items())
    try:
        doc["cuda_build"] = bool(tf.test.is_built_with_cuda())
    except Exception:
        doc["cuda_build"] = None
    wheel_libs = nvidia_wheel_libs()
    by_name = dict((os.path.basename(p), p) for p in wheel_libs)
    loads = []
    for family, candidates in wanted_sonames(info):
        entry = {"family": family, "candidates": candidates, "loaded": None, "how": None, "error": None}
        for cand in candidates:
            err = try_load(cand)
            if err is None:  # on the loader's path, or already loaded by TensorFlow (its RUNPATH)
                entry["loaded"], entry["how"], entry["error"] = cand, "by soname", None
                break
            if cand in by_name and try_load(by_name[cand]) is None:
                entry["loaded"], entry["how"], entry["error"] = cand, "from the nvidia wheel", None
                break
            entry["error"] = err
        loads.append(entry)
    doc["build_info_libs"] = loads
    doc["keras_error"] = keras_check(tf)
    doc["h5_error"] = h5_check(tf)
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
