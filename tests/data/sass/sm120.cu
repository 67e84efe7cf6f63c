// Probe kernel for sm_120a (RTX Blackwell): warp-level block-scaled fp4 mma.sync, one m16n8k64 e2m1 x e2m1 -> f32
// with ue8m0 scales (scale_vec::2X: one scale per 32 elements of K) per k-step.
#include <cstdint>

extern "C" __global__ void mma_mxf4(const uint32_t* __restrict__ a, const uint32_t* __restrict__ b,
                                    const uint32_t* __restrict__ sf, float* __restrict__ d, int k_steps) {
    float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;
#pragma unroll 1
    for (int k = 0; k < k_steps; ++k) {
        const uint32_t* pa = a + (k * 32 + threadIdx.x) * 4;
        const uint32_t* pb = b + (k * 32 + threadIdx.x) * 2;
        uint32_t sfa = sf[k * 64 + threadIdx.x], sfb = sf[k * 64 + 32 + threadIdx.x];
        asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {0, 0}, %11, {0, 0};\n"
                     : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                     : "r"(pa[0]), "r"(pa[1]), "r"(pa[2]), "r"(pa[3]), "r"(pb[0]), "r"(pb[1]), "r"(sfa), "r"(sfb));
    }
    float* pd = d + threadIdx.x * 4;
    pd[0] = c0; pd[1] = c1; pd[2] = c2; pd[3] = c3;
}
