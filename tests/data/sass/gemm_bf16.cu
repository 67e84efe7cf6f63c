// A cuBLAS-free bf16 GEMM, C = A * B^T (A: M x K, B: N x K, both K-contiguous; C: M x N fp32), written the
// Ampere way: 128 x 128 x 32 CTA tiles, 4 warps of 64 x 64, cp.async double buffering, ldmatrix and
// mma.sync m16n8k16. The README analyses it for h100-sxm and b200 (it runs there, but without wgmma/tcgen05).
// Hand count per k-tile (BK = 32 = 2 k16 steps), per warp:
//   mma.sync: (64 / 16 = 4 m-tiles) x (64 / 8 = 8 n-tiles) x 2 k16-steps = 64 HMMA.16816.F32.BF16
//   ldmatrix.x4: (4 for A + 4 for B) x 2 k16-steps = 16 LDSM
//   cp.async 16 B per thread: A and B tiles of 128 x 32 bf16 = 512 chunks each / 128 threads = 4 + 4 = 8 LDGSTS
// Static shared memory: 2 stages x (128 + 128) rows x 32 bf16 x 2 B = 32768 B. Assumes M, N % 128 == 0, K % 32 == 0.
#include <cstdint>

#define GEMM_BM 128
#define GEMM_BN 128
#define GEMM_BK 32

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(smem_u32(dst)), "l"(src));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}

extern "C" __global__ void __launch_bounds__(128)
gemm_bf16_tn(const uint16_t* __restrict__ A, const uint16_t* __restrict__ B, float* __restrict__ C,
             int M, int N, int K) {
    __shared__ alignas(128) uint16_t As[2][GEMM_BM][GEMM_BK];
    __shared__ alignas(128) uint16_t Bs[2][GEMM_BN][GEMM_BK];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = (warp >> 1) * 64, wn = (warp & 1) * 64;
    const int m0 = blockIdx.y * GEMM_BM, n0 = blockIdx.x * GEMM_BN;
    float acc[4][8][4] = {};

    auto load_tile = [&](int stage, int kt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            int chunk = tid + i * 128, row = chunk >> 2, col = (chunk & 3) * 8;
            cp_async16(&As[stage][row][col], A + (size_t)(m0 + row) * K + kt * GEMM_BK + col);
            cp_async16(&Bs[stage][row][col], B + (size_t)(n0 + row) * K + kt * GEMM_BK + col);
        }
        asm volatile("cp.async.commit_group;");
    };

    const int k_tiles = K / GEMM_BK;
    load_tile(0, 0);
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt & 1;
        if (kt + 1 < k_tiles) {
            load_tile(s ^ 1, kt + 1);
            asm volatile("cp.async.wait_group 1;" ::: "memory");
        } else {
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < GEMM_BK; kk += 16) {
            uint32_t a[4][4], b[8][2];
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
                ldmatrix_x4(a[mi], &As[s][wm + mi * 16 + (lane & 15)][kk + (lane >> 4) * 8]);
#pragma unroll
            for (int nj = 0; nj < 4; ++nj) {
                uint32_t r[4];
                ldmatrix_x4(r, &Bs[s][wn + nj * 16 + (lane & 7) + ((lane >> 4) << 3)][kk + ((lane >> 3) & 1) * 8]);
                b[2 * nj][0] = r[0]; b[2 * nj][1] = r[1]; b[2 * nj + 1][0] = r[2]; b[2 * nj + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
#pragma unroll
                for (int ni = 0; ni < 8; ++ni)
                    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                                 : "+f"(acc[mi][ni][0]), "+f"(acc[mi][ni][1]), "+f"(acc[mi][ni][2]), "+f"(acc[mi][ni][3])
                                 : "r"(a[mi][0]), "r"(a[mi][1]), "r"(a[mi][2]), "r"(a[mi][3]),
                                   "r"(b[ni][0]), "r"(b[ni][1]));
        }
        __syncthreads();
    }
    const int g = lane >> 2, t2 = (lane & 3) * 2;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) {
            float* c = C + (size_t)(m0 + wm + mi * 16 + g) * N + n0 + wn + ni * 8 + t2;
            c[0] = acc[mi][ni][0]; c[1] = acc[mi][ni][1];
            c[8 * N] = acc[mi][ni][2]; c[8 * N + 1] = acc[mi][ni][3];
        }
}
