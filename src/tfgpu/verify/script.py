# -*- coding: utf-8 -*-
# mypy: ignore-errors
"""tfgpu smoke test: runs INSIDE the target environment, with its own interpreter.

Standard library + tensorflow only. It must run on every TensorFlow from 1.x (Python 2.7/3.5-3.7:
no f-strings, no annotations) to today's 2.x. It prints one JSON document on stdout between
BEGIN/END markers; TensorFlow's own log goes to stderr, which tfgpu reads and explains.
Usage: python script.py [--benchmark]
"""
from __future__ import absolute_import, division, print_function

import json
import os
import platform
import re
import sys
import time
import traceback

BEGIN = "@@TFGPU-SMOKE-BEGIN@@"
END = "@@TFGPU-SMOKE-END@@"
SCRIPT_SCHEMA = "tfgpu.smoke.script/1"
ERROR_CHARS = 2000

# Libraries worth reporting from /proc/self/maps: the CUDA toolkit, cuDNN, the driver, TensorRT, NCCL.
GPU_LIB_RE = re.compile(
    r"(?:^|/)((?:libcuda|libcudart|libcublas|libcublasLt|libcudnn\w*|libcufft|libcurand|libcusolver"
    r"|libcusparse|libnvrtc|libnvJitLink|libnvinfer\w*|libnccl|libcupti|libnvidia-ml)\.so(?:\.[\d.]+)?)$"
)


def _err(exc):
    """One exception as 'Type: message', bounded."""
    text = "%s: %s" % (type(exc).__name__, exc)
    if len(text) > ERROR_CHARS:
        text = text[:ERROR_CHARS] + "..."
    return text


def _log(msg):
    sys.stderr.write("[tfgpu-smoke] %s\n" % msg)
    sys.stderr.flush()


def parse_maps(text):
    """Paths of the GPU libraries mapped into this process, from /proc/self/maps text."""
    seen = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        path = parts[5].strip()
        if path.endswith(" (deleted)"):
            path = path[: -len(" (deleted)")]
        m = GPU_LIB_RE.search(path)
        if m and path not in seen:
            seen.append(path)
    return [{"name": os.path.basename(p), "path": p, "realpath": _realpath(p)} for p in seen]


def _realpath(path):
    try:
        return os.path.realpath(path)
    except Exception:
        return path


def loaded_libraries():
    if not sys.platform.startswith("linux"):
        return {"available": False, "reason": "only read on Linux (/proc/self/maps)", "loaded": []}
    try:
        with open("/proc/self/maps") as fh:
            text = fh.read()
    except Exception as exc:
        return {"available": False, "reason": _err(exc), "loaded": []}
    return {"available": True, "reason": None, "loaded": parse_maps(text)}


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return dict((str(k), _jsonable(v)) for k, v in value.items())
    return str(value)


def _values(x):
    """Nested lists of floats from an EagerTensor, numpy array or list."""
    if hasattr(x, "numpy"):
        x = x.numpy()
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, (list, tuple)):
        return [_values(v) for v in x]
    return float(x)


def _close(a, b, tol=1e-3):
    return abs(float(a) - float(b)) <= tol * max(1.0, abs(float(b)))


def _device_kind(name):
    name = (name or "").upper()
    if "GPU" in name:
        return "GPU"
    if "CPU" in name:
        return "CPU"
    return name or None


# Known answers: matmul [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]]; a SAME 3x3 conv of a 4x4
# image of ones with a filter of ones sums to 100, and so do the gradients w.r.t. input and filter.
MATMUL_A = [[1.0, 2.0], [3.0, 4.0]]
MATMUL_B = [[5.0, 6.0], [7.0, 8.0]]
MATMUL_C = [[19.0, 22.0], [43.0, 50.0]]
CONV_SUM = 100.0


def _check_matmul(value):
    got = _values(value)
    for i in range(2):
        for j in range(2):
            if not _close(got[i][j], MATMUL_C[i][j]):
                return "wrong result %r, expected %r" % (got, MATMUL_C)
    return None


def _check_sums(sums):
    bad = [s for s in sums if not _close(s, CONV_SUM)]
    if bad:
        return "wrong result: sums %r, expected %r each" % (sums, CONV_SUM)
    return None


def _record(name, fn, want_gpu):
    start = time.time()
    res = {"name": name, "status": "fail", "device": None, "on_gpu": False, "error": None,
           "seconds": None, "reason": None}
    try:
        out = fn()
        res["seconds"] = round(time.time() - start, 4)
        if out.get("skip"):
            res["status"] = "skip"
            res["reason"] = out["skip"]
            return res
        res["device"] = out.get("device")
        res["on_gpu"] = _device_kind(out.get("device")) == "GPU"
        if out.get("wrong"):
            res["error"] = out["wrong"]
        elif want_gpu and not res["on_gpu"]:
            res["error"] = "asked for /GPU:0 but the op ran on %s" % (out.get("device") or "an unknown device")
        else:
            res["status"] = "pass"
    except Exception as exc:
        res["seconds"] = round(time.time() - start, 4)
        res["error"] = _err(exc)
        _log("%s failed: %s" % (name, res["error"]))
    return res


# ------------------------------------------------------------------------------------ TF 2.x eager


def _eager_tests(tf, dev, want_gpu, benchmark):
    def matmul():
        with tf.device(dev):
            a = tf.constant(MATMUL_A)
            b = tf.constant(MATMUL_B)
            c = tf.matmul(a, b)
        return {"device": c.device, "wrong": _check_matmul(c)}

    def conv():
        with tf.device(dev):
            x = tf.ones([1, 4, 4, 1])
            w = tf.ones([3, 3, 1, 1])
            with tf.GradientTape() as tape:
                tape.watch(x)
                tape.watch(w)
                y = tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")
                loss = tf.reduce_sum(y)
            dx, dw = tape.gradient(loss, [x, w])
            sums = [float(_values(tf.reduce_sum(t))) for t in (y, dx, dw)]
        devices = [y.device, dx.device, dw.device]
        cpu = [d for d in devices if _device_kind(d) != "GPU"]
        return {"device": cpu[0] if cpu else y.device, "wrong": _check_sums(sums)}

    def xla():
        def f(a, b):
            return tf.matmul(a, b) + 1.0

        try:
            compiled = tf.function(f, jit_compile=True)
            how = "tf.function(jit_compile=True)"
        except TypeError:
            try:
                compiled = tf.function(f, experimental_compile=True)
                how = "tf.function(experimental_compile=True)"
            except TypeError:  # TF 2.0's tf.function has neither option (2.1 has experimental_compile)
                return {"skip": "tf.function of this TensorFlow has no jit_compile/experimental_compile option"}
        with tf.device(dev):
            c = compiled(tf.constant(MATMUL_A), tf.constant(MATMUL_B))
        got = _values(c)
        wrong = None
        for i in range(2):
            for j in range(2):
                if not _close(got[i][j], MATMUL_C[i][j] + 1.0):
                    wrong = "wrong result %r via %s" % (got, how)
        return {"device": c.device, "wrong": wrong}

    tests = [_record("matmul", matmul, want_gpu), _record("conv2d", conv, want_gpu)]
    if hasattr(tf, "function"):
        tests.append(_record("xla", xla, want_gpu))
    else:
        tests.append({"name": "xla", "status": "skip", "reason": "tf.function is missing", "device": None,
                      "on_gpu": False, "error": None, "seconds": None})
    bench = None
    if benchmark:
        bench = _eager_benchmark(tf, want_gpu)
    return tests, bench


def _timeit(fn, repeat):
    fn()  # warm-up: kernels, autotuning, memory
    best = None
    for _ in range(repeat):
        start = time.time()
        fn()
        took = time.time() - start
        best = took if best is None else min(best, took)
    return best


def _eager_benchmark(tf, have_gpu):
    if not have_gpu:
        return {"skipped": "no GPU to compare with"}
    out = {}
    for name, make in (("matmul", _bench_matmul_eager), ("conv2d", _bench_conv_eager)):
        try:
            cpu = _timeit(make(tf, "/CPU:0"), 3)
            gpu = _timeit(make(tf, "/GPU:0"), 3)
            out[name] = {"cpu_seconds": cpu, "gpu_seconds": gpu,
                         "speedup": (cpu / gpu) if gpu else None}
        except Exception as exc:
            out[name] = {"error": _err(exc)}
    return out


def bench_shapes():
    """Benchmark sizes: matmul N x N, conv [8, S, S, C] * [3, 3, C, C]. TFGPU_SMOKE_BENCH_SIZE sets N."""
    try:
        n = max(2, int(os.environ.get("TFGPU_SMOKE_BENCH_SIZE", "2048")))
    except ValueError:
        n = 2048
    s = max(4, n // 32)
    c = max(1, min(64, n // 32))
    return [n, n], [8, s, s, c], [3, 3, c, c]


def _bench_matmul_eager(tf, dev):
    mm, _, _ = bench_shapes()
    with tf.device(dev):
        a = tf.random.uniform(mm)
        b = tf.random.uniform(mm)

    def run():
        with tf.device(dev):
            c = tf.matmul(a, b)
        _values(tf.reduce_sum(c))
    return run


def _bench_conv_eager(tf, dev):
    _, xs, ws = bench_shapes()
    with tf.device(dev):
        x = tf.random.uniform(xs)
        w = tf.random.uniform(ws)

    def run():
        with tf.device(dev):
            y = tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")
        _values(tf.reduce_sum(y))
    return run


# ---------------------------------------------------------------------------------- TF 1.x graph


def _v1(tf):
    compat = getattr(tf, "compat", None)
    v1 = getattr(compat, "v1", None)
    if v1 is not None and hasattr(v1, "Session"):
        return v1
    return tf


def _graph_tests(tf, dev, want_gpu, benchmark):
    v1 = _v1(tf)

    def session(graph):
        gpu_options = v1.GPUOptions(allow_growth=True)
        # No soft placement: an op pinned to the GPU that cannot run there fails instead of
        # silently moving to the CPU, which is the placement check on the session API.
        config = v1.ConfigProto(allow_soft_placement=False, log_device_placement=True,
                                gpu_options=gpu_options)
        return v1.Session(graph=graph, config=config)

    def matmul():
        graph = v1.Graph()
        with graph.as_default(), v1.device(dev):
            c = v1.matmul(v1.constant(MATMUL_A), v1.constant(MATMUL_B))
        with session(graph) as sess:
            value = sess.run(c)
        return {"device": c.device or dev, "wrong": _check_matmul(value)}

    def conv():
        graph = v1.Graph()
        with graph.as_default(), v1.device(dev):
            x = v1.ones([1, 4, 4, 1])
            w = v1.ones([3, 3, 1, 1])
            y = v1.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")
            loss = v1.reduce_sum(y)
            dx, dw = v1.gradients(loss, [x, w])
            sums = [v1.reduce_sum(t) for t in (y, dx, dw)]
        with session(graph) as sess:
            values = sess.run(sums)
        return {"device": y.device or dev, "wrong": _check_sums([float(_values(v)) for v in values])}

    def xla():
        xla_mod = getattr(getattr(tf, "xla", None), "experimental", None)
        if xla_mod is None or not hasattr(xla_mod, "compile"):
            return {"skip": "this TensorFlow %s has no tf.xla.experimental.compile" % _version(tf)}
        graph = v1.Graph()
        with graph.as_default(), v1.device(dev):
            outs = xla_mod.compile(lambda a, b: v1.matmul(a, b) + 1.0,
                                   inputs=[v1.constant(MATMUL_A), v1.constant(MATMUL_B)])
            c = outs[0] if isinstance(outs, (list, tuple)) else outs
        with session(graph) as sess:
            value = sess.run(c)
        got = _values(value)
        wrong = None
        if not all(_close(got[i][j], MATMUL_C[i][j] + 1.0) for i in range(2) for j in range(2)):
            wrong = "wrong result %r" % (got,)
        return {"device": c.device or dev, "wrong": wrong}

    tests = [_record("matmul", matmul, want_gpu), _record("conv2d", conv, want_gpu),
             _record("xla", xla, want_gpu)]
    bench = None
    if benchmark:
        bench = _graph_benchmark(v1, want_gpu, session)
    return tests, bench


def _graph_benchmark(v1, have_gpu, session):
    if not have_gpu:
        return {"skipped": "no GPU to compare with"}
    out = {}
    mm, xs, ws = bench_shapes()
    for name in ("matmul", "conv2d"):
        try:
            times = {}
            for dev in ("/device:CPU:0", "/device:GPU:0"):
                graph = v1.Graph()
                with graph.as_default(), v1.device(dev):
                    if name == "matmul":
                        r = v1.reduce_sum(v1.matmul(v1.random_uniform(mm), v1.random_uniform(mm)))
                    else:
                        r = v1.reduce_sum(v1.nn.conv2d(v1.random_uniform(xs), v1.random_uniform(ws),
                                                       [1, 1, 1, 1], "SAME"))
                with session(graph) as sess:
                    times[dev] = _timeit(lambda: sess.run(r), 3)
            cpu, gpu = times["/device:CPU:0"], times["/device:GPU:0"]
            out[name] = {"cpu_seconds": cpu, "gpu_seconds": gpu, "speedup": (cpu / gpu) if gpu else None}
        except Exception as exc:
            out[name] = {"error": _err(exc)}
    return out


# ------------------------------------------------------------------------------------- discovery


def _version(tf):
    return getattr(tf, "__version__", None) or getattr(tf, "VERSION", None)


def build_info(tf):
    info = {"source": None}
    sysconfig = getattr(tf, "sysconfig", None)
    get = getattr(sysconfig, "get_build_info", None)
    if get is not None:
        try:
            raw = dict(get())
            info.update(_jsonable(raw))
            info["source"] = "tf.sysconfig.get_build_info"
        except Exception as exc:
            info["error"] = _err(exc)
    if info.get("is_cuda_build") is None:
        test = getattr(tf, "test", None)
        fn = getattr(test, "is_built_with_cuda", None)
        if fn is not None:
            try:
                info["is_cuda_build"] = bool(fn())
                info["source"] = info["source"] or "tf.test.is_built_with_cuda"
            except Exception as exc:
                info["error"] = _err(exc)
    return info


def find_gpus(tf):
    """GPUs TensorFlow sees, after turning on memory growth (before any op runs)."""
    res = {"method": None, "gpus": [], "memory_growth": None, "error": None}
    config = getattr(tf, "config", None)
    lister = getattr(config, "list_physical_devices", None)
    method = "tf.config.list_physical_devices"
    experimental = getattr(config, "experimental", None)
    if lister is None:
        lister = getattr(experimental, "list_physical_devices", None)
        method = "tf.config.experimental.list_physical_devices"
    if lister is not None:
        res["method"] = method
        try:
            devices = list(lister("GPU"))
        except Exception as exc:
            res["error"] = _err(exc)
            devices = []
        grow = getattr(experimental, "set_memory_growth", None)
        details = getattr(experimental, "get_device_details", None)
        growth = []
        for d in devices:
            entry = {"name": getattr(d, "name", str(d)), "device_type": getattr(d, "device_type", "GPU")}
            if grow is not None:
                try:
                    grow(d, True)
                    growth.append(True)
                except Exception as exc:  # already initialised: report, do not fail
                    growth.append(False)
                    entry["memory_growth_error"] = _err(exc)
            if details is not None:
                try:
                    entry["details"] = _jsonable(details(d))
                except Exception as exc:
                    entry["details_error"] = _err(exc)
            res["gpus"].append(entry)
        res["memory_growth"] = all(growth) if growth else None
        return res
    # TF 1.x before 1.14: device_lib lists devices; is_gpu_available says yes/no.
    res["method"] = "device_lib.list_local_devices"
    try:
        from tensorflow.python.client import device_lib

        for d in device_lib.list_local_devices():
            if getattr(d, "device_type", "") == "GPU":
                res["gpus"].append({"name": d.name, "device_type": "GPU",
                                    "details": {"description": getattr(d, "physical_device_desc", "")}})
    except Exception as exc:
        res["error"] = _err(exc)
        test = getattr(tf, "test", None)
        avail = getattr(test, "is_gpu_available", None)
        if avail is not None:
            res["method"] = "tf.test.is_gpu_available"
            try:
                if avail():
                    res["gpus"].append({"name": "/device:GPU:0", "device_type": "GPU"})
            except Exception as exc2:
                res["error"] = _err(exc2)
    res["memory_growth"] = "session gpu_options.allow_growth"
    return res


def _compile_timer():
    """Time spent compiling Python source to bytecode while TensorFlow is imported: in a new environment no
    module has its .pyc yet, and the first import compiles thousands of files (seconds of the smoke test the
    user should see as such). SourceFileLoader.source_to_code is what compiles a module without a valid .pyc;
    it is wrapped for the import and restored after. Returns (the totals, a function that restores it)."""
    spent = {"seconds": 0.0, "files": 0}
    try:
        from importlib.machinery import SourceFileLoader
    except ImportError:  # Python 2: no importlib.machinery (nothing is timed)
        return spent, lambda: None
    original = SourceFileLoader.source_to_code
    clock = getattr(time, "perf_counter", time.time)

    def timed(self, *args, **kwargs):
        start = clock()
        try:
            return original(self, *args, **kwargs)
        finally:
            spent["seconds"] += clock() - start
            spent["files"] += 1

    SourceFileLoader.source_to_code = timed

    def restore():
        SourceFileLoader.source_to_code = original

    return spent, restore


def main(argv):
    benchmark = "--benchmark" in argv
    doc = {
        "schema": SCRIPT_SCHEMA,
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "platform": sys.platform,
        "tensorflow": None,
        "import_error": None,
        "build_info": None,
        "api": None,
        "gpus": None,
        "tests": [],
        "benchmark": None,
        "libraries": None,
        "error": None,
        "import": None,
    }
    os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    compiled, restore = _compile_timer()
    clock = getattr(time, "perf_counter", time.time)
    start = clock()
    try:
        import tensorflow as tf  # noqa: E402 - the point of this script
    except Exception as exc:
        traceback.print_exc()
        doc["import_error"] = _err(exc)
        doc["libraries"] = loaded_libraries()
        return doc
    finally:
        restore()
        doc["import"] = {"seconds": round(clock() - start, 3), "compile_seconds": round(compiled["seconds"], 3),
                         "compiled_files": compiled["files"]}
    try:
        doc["tensorflow"] = {"version": _version(tf), "file": getattr(tf, "__file__", None)}
        doc["build_info"] = build_info(tf)
        eager = bool(getattr(tf, "executing_eagerly", lambda: False)())
        doc["api"] = "eager" if eager else "graph"
        gpus = find_gpus(tf)
        doc["gpus"] = gpus
        have_gpu = bool(gpus["gpus"])
        dev = "/GPU:0" if have_gpu else "/CPU:0"
        if eager:
            tests, bench = _eager_tests(tf, dev, have_gpu, benchmark)
        else:
            tests, bench = _graph_tests(tf, "/device:GPU:0" if have_gpu else "/device:CPU:0", have_gpu,
                                        benchmark)
        doc["tests"] = tests
        doc["benchmark"] = bench
    except Exception as exc:
        traceback.print_exc()
        doc["error"] = _err(exc)
    doc["libraries"] = loaded_libraries()
    return doc


def emit(doc):
    sys.stderr.flush()
    text = json.dumps(doc, sort_keys=True)
    sys.stdout.write("\n%s\n%s\n%s\n" % (BEGIN, text, END))
    sys.stdout.flush()


if __name__ == "__main__":
    emit(main(sys.argv[1:]))
