/* A fake libnvidia-ml.so.1 for the benchmark's "faked GPU machine" (bench/README.md).
 *
 * It exports the NVML C functions that nvidia-ml-py (pynvml) calls for tfgpu's and env-doctor's probes,
 * with the NVML C signatures (nvml.h), so the real pynvml bindings, ctypes loading and struct decoding run.
 * The values are those of the recorded nvidia-smi table the fake nvidia-smi prints
 * (tests/data/probe/nvidia-smi/table-8gpu-h100-550.90.07.txt: 8x "NVIDIA H100 80GB HBM3", driver 550.90.07,
 * CUDA 12.4, 81559 MiB). Compute capability 9.0 is the H100's (https://developer.nvidia.com/cuda-gpus).
 * The table shows no UUIDs; these are masked the way nvidia_gpu_exporter's captures mask them.
 *
 * Build: cc -shared -fPIC -O2 -o libnvidia-ml.so.1 fake_nvml.c   (bench/run.py does this)
 */
#include <stdio.h>
#include <string.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define GPU_COUNT 8

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef void *nvmlDevice_t;

static int put(char *buf, unsigned int size, const char *value) {
    if (buf == NULL || size <= strlen(value)) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(buf, value);
    return NVML_SUCCESS;
}

static int index_of(nvmlDevice_t h) {
    size_t i = (size_t)h;
    return (i >= 1 && i <= GPU_COUNT) ? (int)(i - 1) : -1;
}

int nvmlInit_v2(void) { return NVML_SUCCESS; }
int nvmlInit(void) { return NVML_SUCCESS; }
int nvmlInitWithFlags(unsigned int flags) { (void)flags; return NVML_SUCCESS; }
int nvmlShutdown(void) { return NVML_SUCCESS; }
const char *nvmlErrorString(int rc) { (void)rc; return "fake NVML error"; }

int nvmlSystemGetDriverVersion(char *buf, unsigned int size) { return put(buf, size, "550.90.07"); }
int nvmlSystemGetNVMLVersion(char *buf, unsigned int size) { return put(buf, size, "12.550.90.07"); }
int nvmlSystemGetCudaDriverVersion(int *v) { *v = 12040; return NVML_SUCCESS; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 12040; return NVML_SUCCESS; }

int nvmlDeviceGetCount_v2(unsigned int *n) { *n = GPU_COUNT; return NVML_SUCCESS; }
int nvmlDeviceGetCount(unsigned int *n) { *n = GPU_COUNT; return NVML_SUCCESS; }

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *h) {
    if (i >= GPU_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    *h = (nvmlDevice_t)(size_t)(i + 1);
    return NVML_SUCCESS;
}
int nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *h) { return nvmlDeviceGetHandleByIndex_v2(i, h); }

int nvmlDeviceGetName(nvmlDevice_t h, char *buf, unsigned int size) {
    if (index_of(h) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    return put(buf, size, "NVIDIA H100 80GB HBM3");
}

int nvmlDeviceGetUUID(nvmlDevice_t h, char *buf, unsigned int size) {
    char uuid[64];
    int i = index_of(h);
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(uuid, sizeof uuid, "GPU-00000000-0000-0000-0000-%012d", i);
    return put(buf, size, uuid);
}

int nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *m) {
    if (index_of(h) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    m->total = 81559ULL * 1024 * 1024;
    m->used = 1ULL * 1024 * 1024;
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}

int nvmlDeviceGetCudaComputeCapability(nvmlDevice_t h, int *major, int *minor) {
    if (index_of(h) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *major = 9;
    *minor = 0;
    return NVML_SUCCESS;
}
