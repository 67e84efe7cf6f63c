// Probe kernel for sm_90a: TMA loads into shared memory, mbarrier wait, 4 x wgmma m64n64k16 bf16 -> f32 per
// 64-wide k-tile (64 / 16 = 4), TMA store of the result. Compiled, never run: descriptors are placeholders.
#include <cuda.h>
#include <cstdint>

#define WG_ACC(i) "+f"(acc[i])

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ uint64_t smem_desc(const void* p) {
    // start address (>> 4, 14 bits) | leading byte offset 1 | stride byte offset 64 (1024 B) | 128B swizzle
    return (uint64_t(smem_addr(p) >> 4) & 0x3FFF) | (uint64_t(1) << 16) | (uint64_t(64) << 32) | (uint64_t(1) << 62);
}

extern "C" __global__ void __launch_bounds__(128, 1)
wgmma_tma(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
          const __grid_constant__ CUtensorMap tma_d, int k_tiles) {
    __shared__ alignas(1024) uint16_t sa[64 * 64];
    __shared__ alignas(1024) uint16_t sb[64 * 64];
    __shared__ alignas(8) uint64_t bar;
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.f;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_addr(&bar)));
        asm volatile("fence.proxy.async.shared::cta;");
    }
    __syncthreads();
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; ++kt) {
        if (threadIdx.x == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_addr(&bar)), "r"(16384));
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                         :: "r"(smem_addr(sa)), "l"(&tma_a), "r"(kt * 64), "r"(blockIdx.x * 64), "r"(smem_addr(&bar)) : "memory");
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                         :: "r"(smem_addr(sb)), "l"(&tma_b), "r"(kt * 64), "r"(blockIdx.y * 64), "r"(smem_addr(&bar)) : "memory");
        }
        uint32_t done = 0;
        while (!done) {
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                         : "=r"(done) : "r"(smem_addr(&bar)), "r"(kt & 1) : "memory");
        }
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            uint64_t da = smem_desc(sa + kk * 16), db = smem_desc(sb + kk * 16);
            asm volatile(
                "{ .reg .pred p; setp.ne.b32 p, %34, 0;\n"
                "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0; }"
                : WG_ACC(0), WG_ACC(1), WG_ACC(2), WG_ACC(3), WG_ACC(4), WG_ACC(5), WG_ACC(6), WG_ACC(7),
                  WG_ACC(8), WG_ACC(9), WG_ACC(10), WG_ACC(11), WG_ACC(12), WG_ACC(13), WG_ACC(14), WG_ACC(15),
                  WG_ACC(16), WG_ACC(17), WG_ACC(18), WG_ACC(19), WG_ACC(20), WG_ACC(21), WG_ACC(22), WG_ACC(23),
                  WG_ACC(24), WG_ACC(25), WG_ACC(26), WG_ACC(27), WG_ACC(28), WG_ACC(29), WG_ACC(30), WG_ACC(31)
                : "l"(da), "l"(db), "r"(1));
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        __syncthreads();
    }
    float* out = reinterpret_cast<float*>(sa);
#pragma unroll
    for (int i = 0; i < 32; ++i) out[threadIdx.x * 32 + i] = acc[i];
    asm volatile("fence.proxy.async.shared::cta;");
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                     :: "l"(&tma_d), "r"(blockIdx.y * 64), "r"(blockIdx.x * 64), "r"(smem_addr(sa)) : "memory");
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
}

// ws_knobs: warp-specialization knobs: setmaxnreg (kept by ptxas thanks to __launch_bounds__(384, 1): REG becomes
// 65536 / 384 = 170 rounded down to 8 = 168) and a 2x1x1 cluster.
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1) ws_knobs(float* d) {
    if (threadIdx.x < 128) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    }
    asm volatile("barrier.cluster.arrive.aligned; barrier.cluster.wait.aligned;");
    d[threadIdx.x] = 1.f;
}

// ws_nolb: the same setmaxnreg without launch bounds: ptxas drops it (warning C7508).
extern "C" __global__ void ws_nolb(float* d) {
    if (threadIdx.x < 128) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    }
    d[threadIdx.x] = 1.f;
}
