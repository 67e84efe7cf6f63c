// Occupancy oracle (tests/test_sass_occupancy.py): the same register-hungry body (128 live accumulators)
// under 12 `__launch_bounds__(THREADS, MIN_CTAS)` pairs. ptxas caps each kernel's registers at the most
// that lets MIN_CTAS CTAs of THREADS threads co-reside; the occupancy formula must agree exactly.
#define NACC 128

__device__ __forceinline__ void lb_body(const float* __restrict__ x, float* __restrict__ y, int n) {
    float acc[NACC];
#pragma unroll
    for (int j = 0; j < NACC; ++j) acc[j] = x[threadIdx.x + j * 1024];
    for (int i = 0; i < n; ++i) {
#pragma unroll
        for (int j = 0; j < NACC; ++j) acc[j] = fmaf(acc[j], acc[(j + 1) % NACC], 1.0f);
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < NACC; ++j) s += acc[j];
    y[threadIdx.x] = s;
}

#define LB_KERNEL(LB_T, LB_B) \
    extern "C" __global__ void __launch_bounds__(LB_T, LB_B) lb_##LB_T##_##LB_B(const float* x, float* y, int n) { \
        lb_body(x, y, n); \
    }

LB_KERNEL(256, 3)
LB_KERNEL(128, 5)
LB_KERNEL(96, 9)
LB_KERNEL(384, 2)
LB_KERNEL(256, 4)
LB_KERNEL(128, 8)
LB_KERNEL(256, 6)
LB_KERNEL(64, 12)
LB_KERNEL(128, 12)
LB_KERNEL(320, 3)
LB_KERNEL(32, 24)
LB_KERNEL(1024, 1)
