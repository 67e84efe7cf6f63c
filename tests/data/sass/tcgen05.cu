// Probe kernel for sm_100a: tcgen05 (5th-generation tensor core) with the accumulator in tensor memory.
// Per k-tile one elected thread issues 4 x tcgen05.mma kind::f16 (bf16 x bf16 -> f32, M = 128, N = 128) and a
// tcgen05.commit to an mbarrier; the CTA allocates 128 TMEM columns. Compiled, never run.
#include <cstdint>

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Instruction descriptor (PTX ISA, kind::f16): D f32 (bit 4), A bf16 (bit 7), B bf16 (bit 10), N >> 3 at bit 17,
// M >> 4 at bit 24.
#define IDESC_BF16_M128_N128 ((1u << 4) | (1u << 7) | (1u << 10) | ((128u >> 3) << 17) | ((128u >> 4) << 24))

extern "C" __global__ void __launch_bounds__(128, 1) tc05_mma(float* __restrict__ d, int k_tiles) {
    __shared__ alignas(1024) uint16_t sa[128 * 64];
    __shared__ alignas(1024) uint16_t sb[128 * 64];
    __shared__ alignas(8) uint64_t bar;
    __shared__ uint32_t tmem_slot;
    if (threadIdx.x < 32) {
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 128;" :: "r"(smem_addr(&tmem_slot)));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    }
    if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_addr(&bar)));
    __syncthreads();
    uint32_t tmem = tmem_slot;
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; ++kt) {
        if (threadIdx.x == 0) {
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                uint64_t da = (uint64_t(smem_addr(sa + kk * 16)) >> 4) | (uint64_t(64) << 32) | (uint64_t(1) << 46);
                uint64_t db = (uint64_t(smem_addr(sb + kk * 16)) >> 4) | (uint64_t(64) << 32) | (uint64_t(1) << 46);
                asm volatile("{ .reg .pred p; setp.ne.b32 p, %4, 0;\n"
                             "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p; }"
                             :: "r"(tmem), "l"(da), "l"(db), "r"(IDESC_BF16_M128_N128), "r"(kt | kk));
            }
            asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
                         :: "r"(smem_addr(&bar)) : "memory");
        }
        uint32_t done = 0;
        while (!done) {
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                         : "=r"(done) : "r"(smem_addr(&bar)), "r"(kt & 1) : "memory");
        }
    }
    uint32_t r0, r1, r2, r3;
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(tmem + ((threadIdx.x & 96u) << 16)));
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
    float* out = d + (blockIdx.x * 128 + threadIdx.x) * 4;
    out[0] = __uint_as_float(r0); out[1] = __uint_as_float(r1); out[2] = __uint_as_float(r2); out[3] = __uint_as_float(r3);
    __syncthreads();
    if (threadIdx.x < 32) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 128;" :: "r"(tmem));
}

// tc05_pair_fp8: the CTA-pair form (cta_group::2, launched as a 2x1x1 cluster): per k-tile 2 x tcgen05.mma
// kind::f8f6f4 (e4m3 x e4m3 -> f32, M = 256 across the pair, N = 128) and one multicast commit.
#define IDESC_E4M3_M256_N128 ((1u << 4) | ((128u >> 3) << 17) | ((256u >> 4) << 24))

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128, 1) tc05_pair_fp8(float* __restrict__ d, int k_tiles) {
    __shared__ alignas(1024) uint8_t sa[128 * 128];
    __shared__ alignas(1024) uint8_t sb[64 * 128];
    __shared__ alignas(8) uint64_t bar;
    __shared__ uint32_t tmem_slot;
    if (threadIdx.x < 32) {
        asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], 256;" :: "r"(smem_addr(&tmem_slot)));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;");
    }
    if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_addr(&bar)));
    __syncthreads();
    uint32_t tmem = tmem_slot;
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; ++kt) {
        if (threadIdx.x == 0) {
#pragma unroll
            for (int kk = 0; kk < 2; ++kk) {
                uint64_t da = (uint64_t(smem_addr(sa + kk * 32)) >> 4) | (uint64_t(64) << 32) | (uint64_t(1) << 46);
                uint64_t db = (uint64_t(smem_addr(sb + kk * 32)) >> 4) | (uint64_t(64) << 32) | (uint64_t(1) << 46);
                asm volatile("{ .reg .pred p; setp.ne.b32 p, %4, 0;\n"
                             "tcgen05.mma.cta_group::2.kind::f8f6f4 [%0], %1, %2, %3, p; }"
                             :: "r"(tmem), "l"(da), "l"(db), "r"(IDESC_E4M3_M256_N128), "r"(kt | kk));
            }
            asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
                         :: "r"(smem_addr(&bar)), "h"((uint16_t)3) : "memory");
        }
        uint32_t done = 0;
        while (!done) {
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                         : "=r"(done) : "r"(smem_addr(&bar)), "r"(kt & 1) : "memory");
        }
    }
    uint32_t r0;
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];" : "=r"(r0) : "r"(tmem + ((threadIdx.x & 96u) << 16)));
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
    d[blockIdx.x * 128 + threadIdx.x] = __uint_as_float(r0);
    __syncthreads();
    if (threadIdx.x < 32) asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, 256;" :: "r"(tmem));
}
