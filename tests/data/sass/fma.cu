// Probe kernels for the static SASS analysis (tests/test_sass_*.py): plain CUDA-core code.
// fma_loop: a k-loop of two dependent FMAs per source iteration, unrolled x4 by ptxas' front end.
extern "C" __global__ void fma_loop(const float* __restrict__ x, float* __restrict__ y, int n) {
    float a = x[threadIdx.x], b = x[threadIdx.x + 1];
#pragma unroll 4
    for (int i = 0; i < n; ++i) {
        a = fmaf(a, b, 1.0f);
        b = fmaf(b, a, 2.0f);
    }
    y[threadIdx.x] = a + b;
}

// pressure_lb: 48 live floats under __launch_bounds__(256, 8): 65536 / (256 x 8) = 32 registers, so ptxas spills.
extern "C" __global__ void __launch_bounds__(256, 8) pressure_lb(const float* __restrict__ x, float* __restrict__ y, int n) {
    float v[48];
#pragma unroll
    for (int j = 0; j < 48; ++j) v[j] = x[threadIdx.x + j * 256];
    for (int i = 0; i < n; ++i) {
#pragma unroll
        for (int j = 0; j < 48; ++j) v[j] = fmaf(v[j], v[(j + 1) % 48], v[(j + 7) % 48]);
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 48; ++j) s += v[j];
    y[threadIdx.x] = s;
}

// smem_exp: 4096 B of static shared memory; per (not unrolled) iteration one LDG, one STS, one LDS, two
// __syncthreads (BAR.SYNC) and one exp2f (MUFU.EX2).
extern "C" __global__ void smem_exp(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[1024];
    float acc = 0.f;
#pragma unroll 1
    for (int i = 0; i < n; ++i) {
        tile[threadIdx.x] = x[i * blockDim.x + threadIdx.x];
        __syncthreads();
        acc += exp2f(tile[(threadIdx.x + 1) & 1023]);
        __syncthreads();
    }
    y[threadIdx.x] = acc;
}

// local_array: a dynamically indexed local array lives on the stack (LDL/STL) without being a spill.
extern "C" __global__ void local_array(const int* __restrict__ idx, float* __restrict__ y) {
    float v[32];
#pragma unroll
    for (int j = 0; j < 32; ++j) v[j] = j * 0.5f;
    y[threadIdx.x] = v[idx[threadIdx.x] & 31];
}
