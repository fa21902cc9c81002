// y = x W^T (+ bias) for GGML-quantized weights (QuantPanels, quant_panels.h) by integer dot
// products: each token's activations are quantized to 8-bit blocks, as llama.cpp's `vec_dot_type`
// does for these types, and every block product is an exact 32-bit integer sum.
//
// Activations (QuantInput), per token, along k:
//   Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 weights: blocks of 32 values ("A32");
//   Q4_K, Q5_K, Q6_K weights: blocks of 256 values ("A256") with the sums of each 16 codes.
// A block x[0:n] becomes amax = max |x[i]|; if amax is 0, dx = 0 and every code 0; else
// dx = amax / 127 and q[i] = round-half-even(x[i] * (127 / amax)) (each a single f32 operation,
// so |q| <= 127), sum = the codes' sum. A non-finite amax makes dx that value and every code 0 (the
// products come out NaN, as the float GEMM's would); an amax so small that 127 / amax overflows
// (below 127 / FLT_MAX, about 3.7e-37) makes the block zero (dx = 0, every code 0). A32 blocks
// may instead be 7-bit (code_max 63, --matmul-precision int7, bfp_int8.h): 63 in place of 127
// throughout, so |q| <= 63; the products and sums below are the same.
//
// The contract: y[t, r] is computed by exactly one thread with a fixed sequence of operations
// that depends only on the row's blocks and token t's quantized blocks: from acc = +0, for each
// weight block b in increasing k order, with q the weight codes (UnpackedGroupBlock's integers),
// d / m the block's f16 fields as f32, dx / x codes / sums token t's block, and fma one rounding
// (every SIMD target: the hardware FMA or std::fma):
//   Q8_0          acc = fma(d * dx, float(sum_i q_i x_i), acc)
//   Q4_0 / Q5_0   the same with sum_i (q_i - 8) x_i / sum_i (q_i - 16) x_i
//   Q4_1 / Q5_1   acc = fma(d * dx, float(sum_i q_i x_i), acc); acc = fma(m, dx * float(sum), acc)
//   Q4_K / Q5_K   I = sum_j sc_j sum_{i in sub j} q_i x_i, M = sum_j min_j (bsum_2j + bsum_2j+1);
//                 acc = fma(d * dx, float(I), acc); acc = fma(-(dmin * dx), float(M), acc)
//   Q6_K          I = sum_j sc_j (sum_{i in sub j} q_i x_i - 32 bsum_j);
//                 acc = fma(d * dx, float(I), acc)
// then y = acc + bias[r] (one addition) when there is a bias. The integer sums are exact (int32),
// so however a kernel forms them (vpmaddubsw, vpdpbusd, scalar loops) the bits depend on nothing
// but the element's own data: not on the tokens per call, the tile a token lands in, the row
// range, the thread count or the SIMD target.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gemm/quant/quant_panels.h"

namespace wc {

enum class QuantActivation : uint8_t { kA32, kA256 };
constexpr QuantActivation ActivationOf(GgmlQuant q) {
  return IsKQuant(q) ? QuantActivation::kA256 : QuantActivation::kA32;
}

// Token activations quantized for one kind of weights (the contract above).
//   codes: [n_tokens][cols] int8, token t's blocks in k order
//   dx:    [n_tokens][blocks] f32
//   sums:  kA32: [n_tokens][blocks] (each block's code sum); kA256: [n_tokens][blocks][16] (each
//          16 codes' sum)
struct QuantInput {
  QuantActivation kind = QuantActivation::kA32;
  int code_max = 127;  // the largest |code|: 127, or 63 for 7-bit blocks
  int64_t n_tokens = 0, cols = 0, blocks = 0;
  std::vector<int8_t> codes;
  std::vector<float> dx;
  std::vector<int16_t> sums;
  // bfp4 int8 inputs for the AVX2 kernel's many-token tiles only (QuantizeBfpInt8Input): [n_tokens]
  // [cols] the codes as unsigned x + 128 (x ^ 0x80), made once for every thread's panels.
  std::vector<uint8_t> unsigned_codes;
  // bfp8 int8 inputs for the AVX2 kernel's 8-token tiles only: [n_tokens / 8][cols / 4][8][4] the
  // codes of each whole group of 8 tokens interleaved by 4 (k 4 j .. 4 j + 3 of its tokens side
  // by side), so the tile reads all 8 through one pointer. With 7-bit codes (code_max 63) these
  // are x + 64 (1..127: the AVX2 bfp8 int7 tiles' unsigned operand).
  std::vector<int8_t> codes_by8;
  const int8_t* Codes(int64_t t) const { return codes.data() + t * cols; }
  const int8_t* CodesBy8(int64_t group) const { return codes_by8.data() + group * 8 * cols; }
  const uint8_t* UnsignedCodes(int64_t t) const { return unsigned_codes.data() + t * cols; }
  const float* Dx(int64_t t) const { return dx.data() + t * blocks; }
  const int16_t* Sums(int64_t t) const {
    return sums.data() + t * blocks * (kind == QuantActivation::kA256 ? 16 : 1);
  }
};

// x: [n_tokens, x_stride] f32, of which the first `cols` of each row are read; cols whole blocks.
// code_max: 127, or 63 (kA32 only).
QuantInput QuantizeActivations(const float* x, int64_t n_tokens, int64_t x_stride, int64_t cols,
                               QuantActivation kind, int code_max = 127);

// y[t * y_stride + (r - row_begin)] = the contract's y[t, r] for t < x.n_tokens, r in [row_begin,
// row_end). bias: [w.rows()] or nullptr. x must be quantized for w (ActivationOf(w.type()), the
// same cols). QuantGemm splits the row groups over OpenMP threads, or runs on the calling thread
// inside a parallel region; QuantGemmSerial always runs on the calling thread. Identical results.
void QuantGemm(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
               int64_t y_stride, int64_t row_begin, int64_t row_end);
void QuantGemmSerial(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
                     int64_t y_stride, int64_t row_begin, int64_t row_end);

}  // namespace wc
