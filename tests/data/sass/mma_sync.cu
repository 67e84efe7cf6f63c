// Probe kernels: warp-level mma.sync (compiled for sm_80 and sm_90a by the tests).
#include <cstdint>

// mma_bf16: one m16n8k16 bf16 -> f32 mma.sync per (not unrolled) k-step; per thread 4 A, 2 B and 4 C/D registers.
extern "C" __global__ void mma_bf16(const uint32_t* __restrict__ a, const uint32_t* __restrict__ b, float* __restrict__ d, int k_steps) {
    float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;
#pragma unroll 1
    for (int k = 0; k < k_steps; ++k) {
        const uint32_t* pa = a + (k * 32 + threadIdx.x) * 4;
        const uint32_t* pb = b + (k * 32 + threadIdx.x) * 2;
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                     : "r"(pa[0]), "r"(pa[1]), "r"(pa[2]), "r"(pa[3]), "r"(pb[0]), "r"(pb[1]));
    }
    float* pd = d + threadIdx.x * 4;
    pd[0] = c0; pd[1] = c1; pd[2] = c2; pd[3] = c3;
}

#if __CUDA_ARCH__ >= 890
// mma_e4m3: one m16n8k32 e4m3 x e4m3 -> f32 mma.sync per k-step: native QMMA on sm_89/sm_120. On sm_90a ptxas
// emulates it: each thread's 16 A + 8 B fp8 values are unpacked two per F2FP (8 + 4 = 12), then k32 = 2 x HMMA k16.
extern "C" __global__ void mma_e4m3(const uint32_t* __restrict__ a, const uint32_t* __restrict__ b, float* __restrict__ d, int k_steps) {
    float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;
#pragma unroll 1
    for (int k = 0; k < k_steps; ++k) {
        const uint32_t* pa = a + (k * 32 + threadIdx.x) * 4;
        const uint32_t* pb = b + (k * 32 + threadIdx.x) * 2;
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                     : "r"(pa[0]), "r"(pa[1]), "r"(pa[2]), "r"(pa[3]), "r"(pb[0]), "r"(pb[1]));
    }
    float* pd = d + threadIdx.x * 4;
    pd[0] = c0; pd[1] = c1; pd[2] = c2; pd[3] = c3;
}
#endif
