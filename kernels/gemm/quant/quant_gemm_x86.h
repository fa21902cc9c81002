// The quantized GEMM's hand-written x86 kernels (quant_gemm.h's contract, bit for bit), called by
// quant_gemm.cpp where KernelsOn(CpuKernels::kAvx2Int8) (the VNNI kernel: kAvx512Vnni).
#pragma once

#include <cstdint>

#include "kernels/gemm/quant/quant_gemm.h"

namespace wc {
class BfpPanels;
}

namespace wc::x86 {

// Row groups [g0, g1) of w for every token of x, into y as QuantGemm writes it (rows outside
// [row_begin, row_end) of the edge groups computed and not stored). Runs on the calling thread.
void QuantGemmAvx2(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
                   int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t g0, int64_t g1);

// One block of n activations (32 or 256) quantized as the contract says, with the codes' sums over
// each per_sum (16 or 32) values, on AVX2: the same bits as the portable quantizer. Returns false,
// writing nothing, for a block the portable code must take (all zero, a NaN or infinity, or an
// amax so small that code_max / amax overflows). code_max: 127, or 63 (7-bit blocks).
bool QuantizeBlockAvx2(const float* x, int n, int8_t* q, int16_t* sums, int per_sum, int code_max,
                       float* dx);

// The same for calls of many tokens (quant_gemm_avx2_expanded.cpp): each group block expanded to
// 8-bit codes once per chunk of tokens. The same bits.
void QuantGemmAvx2Expanded(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
                           int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t g0,
                           int64_t g1);

// The same on AVX-512 VNNI (quant_gemm_vnni.cpp: vpdpbusd, two groups a register, each block pair
// expanded once per chunk of tokens). The same bits. Called where KernelsOn(kAvx512Vnni).
void QuantGemmVnni(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
                   int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t g0, int64_t g1);

// A block-float matrix with kInt8 activations (bfp_int8.h's contract and layout), panels [pa, pb)
// for every token of x (quantized by QuantizeBfpInt8Input), on AVX-512 VNNI: each half tile is a
// Q8_0 block pair of the loop above. Runs on the calling thread; the portable kernel's bits.
void BfpInt8Vnni(const QuantInput& x, const BfpPanels& w, const float* bias, float* y,
                 int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb);

// The same on AVX2 (bfp_int8_avx2.cpp: vpmaddubsw on |q| with q's sign on the activation, a
// quarter tile a register). The same bits. Called where KernelsOn(kAvx2Int8).
void BfpInt8Avx2(const QuantInput& x, const BfpPanels& w, const float* bias, float* y,
                 int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb);

}  // namespace wc::x86
