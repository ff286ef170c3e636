__global__ void add(float *a, float b) { a[threadIdx.x] += b; }
__global__ void mul(float *a, float b) { a[threadIdx.x] *= b; }
int main() { return 0; }
