# ruff: noqa: UP004, UP031
"""Fake tensorflow.python.client.device_lib (TensorFlow < 1.14 has no tf.config)."""
import tensorflow as _tf


class _Device(object):
    def __init__(self, name, device_type, desc):
        self.name = name
        self.device_type = device_type
        self.physical_device_desc = desc


def list_local_devices():
    out = [_Device("/device:CPU:0", "CPU", "")]
    for i in range(_tf._GPUS):
        out.append(_Device("/device:GPU:%d" % i, "GPU", "device: %d, name: Fake GPU, compute capability: 5.2" % i))
    return out
