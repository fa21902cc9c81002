// BF16 weights times 12-bit activations in 16-bit integer products (--matmul-precision int16): on
// AVX2, where no instruction multiplies bf16 pairs, vpmaddwd forms 16 products an instruction
// against an FMA's 8, so prefill runs above the f32 FMA rate the default mode is bound by
// (tools/experiments/int16_vs_fma.cpp). An opt-in mode, not exact: its perplexity against bf16
// activations is measured and stated (docs/performance.md, "BF16 weights in 16-bit integers").
//
// The weights (at load, once). Each row r's block b of 32 k (K zero-padded to 32) gets one
// power-of-two scale from its largest magnitude m: with e the exponent frexp gives m (m < 2^e),
// clamped to e >= -111 (so dW stays a normal float; an all-zero block takes -111 too),
//   dW[r, b] = 2^(e - 15),  q[r, k] = W[r, k] / dW rounded half to even.
// A bf16 weight has 8 significant bits, so |q| <= 255 * 2^7 = 32640 and q is exact wherever the
// weight's exponent is within 7 of its block's largest; a smaller one is rounded to a code (the
// mode's only weight rounding: 0.7% of the weights of a normal random matrix, each off by at most
// half a code, 2^-15 of its block's largest).
//
// The activations (every call). Token t's block b of 32 k with largest magnitude m:
//   m finite and >= 2^-100:  dx = m / 2047, xq = x / dx rounded half to even (|xq| <= 2047);
//   m < 2^-100 (zeros):      dx = 0, xq = 0;
//   m not finite:            dx = NaN, xq = 0 (the output row becomes NaN, as the float modes').
//
// The GEMM contract (every kernel, bit for bit; tests/kernels/bf16_int16_test.cpp): y[t, r] is
// computed from acc = +0, for each block b in increasing order, with
//   isum = sum over the block's k of q[r, k] xq[t, k]   (exact in int32: |isum| <= 32 * 32640 *
//                                                        2047 < 2^31)
//   acc = fma(dW[r, b] * dx[t, b], float(isum), acc)   (float(isum) rounded to nearest even)
// then y = acc + bias[r] when there is a bias: quant_gemm.h's Q8_0 step with d = dW. The float
// steps are IEEE's, subnormals included, whatever the calling thread's FTZ / DAZ (dW dx is
// subnormal where the block's largest weight times its largest activation is under ~1e-30, and 0
// under ~1e-37). No step depends on the tokens per call, the row range, the threads or the SIMD
// target.
//
// Layout (PackedMatrix with format kBF16 and precision kInt16): the BF16 panels' own, int16 codes
// in place of the bf16 values, panel[k / 2][32 rows][2] (so one 256-bit load holds 8 rows' (k, k +
// 1) pairs, as vpmaddwd multiplies them), and beside them the scales' exponents e - 15 as int8,
// [panels][K / 32 blocks][32 rows].
#pragma once

#include <cstdint>
#include <vector>

namespace wc {

class PackedMatrix;

// A BF16 panel (PackedMatrix's layout, `blocks` blocks of 32 k, bf16 subnormals already flushed)
// quantized in place as the contract says: each bf16 value replaced by its int16 code, each row's
// block exponent e - 15 written to exps ([blocks][32]).
void QuantizeInt16Panel(uint16_t* panel, int64_t blocks, int8_t* exps);

// Token activations quantized as the contract says.
//   codes: [n_tokens][cols] int16 (cols = K padded to 32), token t's blocks in k order
//   dx:    [n_tokens][cols / 32] f32
struct Int16Input {
  int64_t n_tokens = 0, cols = 0, blocks = 0;
  std::vector<int16_t> codes;
  std::vector<float> dx;
  const int16_t* Codes(int64_t t) const { return codes.data() + t * cols; }
  const float* Dx(int64_t t) const { return dx.data() + t * blocks; }
};

// x: [n_tokens, x_stride] f32, of which the first `cols` of each row are read (zero-padded to a
// multiple of 32).
Int16Input QuantizeInt16Activations(const float* x, int64_t n_tokens, int64_t x_stride,
                                    int64_t cols);

// y[t * y_stride + (r - row_begin)] = the contract's y[t, r] for t < x.n_tokens, r in [row_begin,
// row_end), w a PackedMatrix of format kBF16 with precision kInt16 (x quantized for its cols).
// bias: [w.rows()] or nullptr. Splits panels over OpenMP threads, or runs on the calling thread
// inside a parallel region; the kernel is the format table's (format_table.h).
void Int16Gemm(const Int16Input& x, const PackedMatrix& w, const float* bias, float* y,
               int64_t y_stride, int64_t row_begin, int64_t row_end);

// Panels [pa, pb) on the calling thread, portable C++ (rows outside [row_begin, row_end) computed
// and not stored): the contract's bits.
void Int16PortableRange(const Int16Input& x, const PackedMatrix& w, const float* bias, float* y,
                        int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa,
                        int64_t pb);

namespace x86 {
// The same on AVX2 (bf16_int16_avx2.cpp: vpmaddwd on 8 rows' pairs a register, tiles of 16 rows
// by 4 tokens). The same bits. Called where KernelsOn(kAvx2Int8).
void Int16Avx2Range(const Int16Input& x, const PackedMatrix& w, const float* bias, float* y,
                    int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb);
}  // namespace x86

}  // namespace wc
