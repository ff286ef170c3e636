#!/bin/sh
exec /usr/local/cuda-13.0/bin/nvcc "$@"
