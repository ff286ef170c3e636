# ruff: noqa: UP004, UP031, RUF017, RUF021
"""A fake TensorFlow for the smoke-script tests (see ../README.md). Python 3.5+ syntax on purpose:
the 1.x scenarios also run under an old interpreter, like real TensorFlow 1.x environments."""
import contextlib
import ctypes
import json
import os
import sys

__version__ = os.environ.get("FAKE_TF_VERSION", "2.15.0")
_MAJOR = int(__version__.split(".")[0])
_MINOR = int(__version__.split(".")[1])
_GPUS = int(os.environ.get("FAKE_TF_GPUS", "0"))
_EAGER = _MAJOR >= 2


def _read(var):
    path = os.environ.get(var)
    if not path:
        return None
    with open(path, encoding="utf-8") as fh:
        return fh.read()


_msg = _read("FAKE_TF_IMPORT_ERROR_FILE")
if _msg is not None:
    raise ImportError(_msg.strip())

_log = _read("FAKE_TF_STDERR_FILE")
if _log:
    sys.stderr.write(_log if _log.endswith("\n") else _log + "\n")
    sys.stderr.flush()

if os.environ.get("FAKE_TF_SLEEP"):  # a hung import (a driver call that never returns)
    import time

    time.sleep(float(os.environ["FAKE_TF_SLEEP"]))

if os.environ.get("FAKE_TF_SIGNAL"):  # e.g. SIGILL: what a CPU without AVX does to `import tensorflow`
    import signal

    os.kill(os.getpid(), getattr(signal, os.environ["FAKE_TF_SIGNAL"]))

for _lib in filter(None, os.environ.get("FAKE_TF_LOAD", "").split(os.pathsep)):
    ctypes.CDLL(_lib)


class errors(object):
    class OpError(Exception):
        pass

    class UnknownError(OpError):
        pass

    class InvalidArgumentError(OpError):
        pass


_stack = []


@contextlib.contextmanager
def device(name):
    _stack.append(name)
    try:
        yield
    finally:
        _stack.pop()


def _placed():
    want = _stack[-1] if _stack else ("/GPU:0" if _GPUS else "/CPU:0")
    if "GPU" in want.upper() and _GPUS:
        return "/job:localhost/replica:0/task:0/device:GPU:0"
    if not _EAGER:
        return want
    return "/job:localhost/replica:0/task:0/device:CPU:0"


class Tensor(object):
    def __init__(self, value, parents=(), op=None):
        self.value = value
        self.device = _placed()
        self.parents = parents
        self.op = op

    def numpy(self):
        return self.value

    def __add__(self, other):
        return Tensor(_map(self.value, lambda v: v + float(other)), (self,), "add")


def _map(x, fn):
    if isinstance(x, list):
        return [_map(v, fn) for v in x]
    return fn(x)


def _fill(shape, v):
    if not shape:
        return v
    return [_fill(shape[1:], v) for _ in range(shape[0])]


def constant(value, dtype=None, name=None):
    return Tensor(_map(value, float))


def ones(shape, dtype=None):
    return Tensor(_fill(list(shape), 1.0))


class random(object):
    @staticmethod
    def uniform(shape, *args, **kwargs):
        return Tensor(_fill(list(shape), 0.5))


random_uniform = random.uniform


def matmul(a, b):
    A, B = a.value, b.value
    out = [[sum(A[i][k] * B[k][j] for k in range(len(B))) for j in range(len(B[0]))] for i in range(len(A))]
    return Tensor(out, (a, b), "matmul")


def _flat(x):
    if isinstance(x, list):
        return sum((_flat(v) for v in x), [])
    return [x]


def reduce_sum(t):
    return Tensor(float(sum(_flat(t.value))), (t,), "sum")


def _conv_sum_grads(x, w):
    """Real SAME, stride-1 convolution (NHWC, HWIO) and the gradients of sum(y)."""
    n, h, wd, c = len(x), len(x[0]), len(x[0][0]), len(x[0][0][0])
    kh, kw, _, o = len(w), len(w[0]), len(w[0][0]), len(w[0][0][0])
    ph, pw = (kh - 1) // 2, (kw - 1) // 2
    y = _fill([n, h, wd, o], 0.0)
    dx = _fill([n, h, wd, c], 0.0)
    dw = _fill([kh, kw, c, o], 0.0)
    for b in range(n):
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for e in range(kw):
                        p, q = i + a - ph, j + e - pw
                        if not (0 <= p < h and 0 <= q < wd):
                            continue
                        for ci in range(c):
                            for oi in range(o):
                                y[b][i][j][oi] += x[b][p][q][ci] * w[a][e][ci][oi]
                                dx[b][p][q][ci] += w[a][e][ci][oi]
                                dw[a][e][ci][oi] += x[b][p][q][ci]
    return y, dx, dw


class nn(object):
    @staticmethod
    def conv2d(input, filters, strides, padding, *args, **kwargs):
        on_gpu = "GPU" in _placed()
        if on_gpu:
            log = _read("FAKE_TF_CONV_STDERR_FILE")
            if log:
                sys.stderr.write(log if log.endswith("\n") else log + "\n")
            msg = _read("FAKE_TF_CONV_ERROR_FILE")
            if msg is not None:
                raise errors.UnknownError(msg.strip())
        y, dx, dw = _conv_sum_grads(input.value, filters.value)
        t = Tensor(y, (input, filters), "conv")
        t.grads = (dx, dw)
        return t


def _grads_of_sum(target, sources):
    conv = target.parents[0] if target.op == "sum" else None
    if conv is None or conv.op != "conv":
        raise NotImplementedError("the fake only differentiates reduce_sum(conv2d(x, w))")
    out = []
    for s in sources:
        if s is conv.parents[0]:
            out.append(Tensor(conv.grads[0]))
        elif s is conv.parents[1]:
            out.append(Tensor(conv.grads[1]))
        else:
            out.append(None)
    return out


class _Graph(object):
    @contextlib.contextmanager
    def as_default(self):
        yield self


class GPUOptions(object):
    def __init__(self, allow_growth=False, **kwargs):
        self.allow_growth = allow_growth


class ConfigProto(object):
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class Session(object):
    def __init__(self, graph=None, config=None):
        self.config = config

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def run(self, fetches):
        if isinstance(fetches, (list, tuple)):
            return [self.run(f) for f in fetches]
        return fetches.value


if _EAGER:

    class GradientTape(object):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def watch(self, t):
            pass

        def gradient(self, target, sources):
            return _grads_of_sum(target, sources)

    def executing_eagerly():
        return True

    def function(fn=None, jit_compile=None, experimental_compile=None, **kwargs):
        if jit_compile is not None and _MINOR < 5:
            raise TypeError("function() got an unexpected keyword argument 'jit_compile'")
        if experimental_compile is not None and _MINOR < 1:  # real TF 2.0.4 (nox -s recipes, 2026-11-22)
            raise TypeError("function() got an unexpected keyword argument 'experimental_compile'")
        return fn

else:
    Graph = _Graph

    def executing_eagerly():
        return False

    def gradients(ys, xs):
        return _grads_of_sum(ys, xs)

    if not os.environ.get("FAKE_TF_NO_XLA"):

        class xla(object):
            class experimental(object):
                @staticmethod
                def compile(computation, inputs=None):
                    return [computation(*inputs)]


class _PhysicalDevice(object):
    def __init__(self, i):
        self.name = "/physical_device:GPU:%d" % i
        self.device_type = "GPU"


_growth = {}


class _Experimental(object):
    @staticmethod
    def list_physical_devices(kind=None):
        return [_PhysicalDevice(i) for i in range(_GPUS)] if kind in (None, "GPU") else []

    @staticmethod
    def set_memory_growth(dev, enable):
        _growth[dev.name] = enable


if _MAJOR >= 2 and _MINOR >= 3 or _MAJOR >= 3:

    def _details(dev):
        raw = os.environ.get("FAKE_TF_DEVICE_DETAILS")
        return json.loads(raw) if raw else {}

    _Experimental.get_device_details = staticmethod(_details)


if _MAJOR >= 2 or _MINOR >= 14:

    class config(object):
        experimental = _Experimental
        if _MAJOR >= 2 and _MINOR >= 1:
            list_physical_devices = staticmethod(_Experimental.list_physical_devices)


class test(object):
    @staticmethod
    def is_built_with_cuda():
        return True

    @staticmethod
    def is_gpu_available(cuda_only=False):
        return _GPUS > 0


if os.environ.get("FAKE_TF_BUILD_INFO"):

    class sysconfig(object):
        @staticmethod
        def get_build_info():
            return json.loads(os.environ["FAKE_TF_BUILD_INFO"])



class compat(object):
    v1 = sys.modules[__name__]
