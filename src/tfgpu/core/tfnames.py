"""What TensorFlow itself is called and reads, named once: its distributions on PyPI, the environment variable
that stops it mapping all GPU memory, and the GPU size below which tfgpu sets it. No imports: the probes, the
verdicts and the planners all use these."""

from __future__ import annotations

#: Every PyPI distribution that installs the `tensorflow` Python package (two of them overwrite each other's
#: files), as pypi.org lists them: the official ones (tensorflow, -gpu up to 2.11, -cpu from 1.15, tf-nightly*),
#: the vendor builds (tensorflow-intel and intel-tensorflow, tensorflow-macos, -aarch64, -cpu-aws, -rocm,
#: -directml).
TF_BUILDS = ("tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tensorflow-intel", "tf-nightly", "tf-nightly-gpu",
             "tf-nightly-cpu", "intel-tensorflow", "tensorflow-macos", "tensorflow-aarch64", "tensorflow-cpu-aws",
             "tensorflow-rocm", "tensorflow-directml")
#: Distributions the probes report beside the builds: plug-ins and parts that name TensorFlow.
TF_COMPANIONS = ("tensorflow-metal", "tensorflow-io-gcs-filesystem")
#: The conda package names of a TensorFlow build (tensorflow-base carries the library in Anaconda's and
#: conda-forge's packaging).
TF_CONDA_PACKAGES = ("tensorflow", "tensorflow-gpu", "tensorflow-base", "tensorflow-cpu")

#: TensorFlow maps nearly all GPU memory at start unless this is set (https://www.tensorflow.org/guide/gpu,
#: "Limiting GPU memory growth"); tfgpu sets it on small GPUs and in the smoke test.
ALLOW_GROWTH = ("TF_FORCE_GPU_ALLOW_GROWTH", "true")

#: GPUs with at most this much memory get ALLOW_GROWTH: a 2 GB MX150 and a GTX 1080 failed with
#: CUDNN_STATUS_INTERNAL_ERROR / "Failed to get convolution algorithm" until memory growth was enabled (blog posts
#: 'Tensorflow创建GPU环境', 2020-06-13, and '使用 GPU 加速 Tensorflow 神经网络训练').
SMALL_GPU_MIB = 4096
