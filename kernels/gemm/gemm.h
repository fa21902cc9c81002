// y = x W^T (+ bias) against a PackedMatrix: register-blocked microkernels, tiles of up to 12
// tokens by 32..128 weight rows with the accumulators in registers, run-time SIMD dispatch
// (Highway).
//
// Reduction order (the determinism contract), then the bias added once:
//   F32, F16 weights: one chain of fused multiply-adds over k in increasing order from +0,
//     acc = fma(x[k], W[r, k], acc) for k = 0, 1, ..., cols - 1.
//   BF16 weights: the order of AMX's TDPBF16PS as the Intel SDM defines it (and the hardware does:
//     tools/experiments/amx_vs_dp.cpp), K zero-padded to a multiple of 32. For each block of 32 k
//     (b = 0, 1, ...), from e = o = +0, for j = 0 .. 15 in order
//       e = fma(x[32 b + 2 j], W[r, 32 b + 2 j], e); o = fma(x[32 b + 2 j + 1], W[r, ...], o)
//     then c = c + (e + o), c from +0; every result flushed to zero of its sign when tiny as x86
//     detects it (MXCSR.FTZ, set by the kernels, and AMX alike: below 2^-126 after rounding to 24
//     bits with unbounded exponent; gemm_amx.h), x rounded to bf16 with kBF16 activations
//     (subnormals flushed to zero) or taken as f32 with kF32. Calls of BF16 panels with bf16
//     activations from kAmxMinTokens tokens run on AMX tiles where the CPU has them (gemm_amx.h):
//     one TDPBF16PS per block is exactly this order.
// The result depends on nothing but the element's own x row and W row: not on the number of tokens
// in the call, the tile a token lands in, the row range, the thread count or the SIMD target (every
// target has FMA). So decode (one token) and prefill (many) give identical bits.
//
// A bfp8 / bfp4 matrix (PackedMatrix::bfp()) runs on the block-float GEMM (gemm_bfp.h), which
// streams its tiles and gives the bits the BF16 (kF32: F32) chain above gives on its decoded
// values (the block-float contract, weight_format.h); every entry point below routes it there.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/gemm/bf16/bf16_int16.h"
#include "kernels/gemm/format_table.h"
#include "kernels/gemm/packed_matrix.h"
#include "kernels/gemm/quant/quant_gemm.h"

namespace wc {

// Activations packed for one PackedMatrix's kernel: tiles of tokens interleaved along k, so a
// microkernel broadcasts each tile's x[t, k] from one contiguous stream.
//   data: tiles of at most MR tokens (the path's tile height), as few as possible and balanced
//         (gemm_schedule.h's TokenTiles), the tile of tokens [t0, t0 + h) at
//         data + t0 * floats_per_token, laid out [padded_cols][h] (f32 paths) or
//         [padded_cols / 2][h][2] (bf16 pairs), or, for the vdpbf16ps tiles (gemm_bf16_dot.h),
//         padded_cols / 2 floats' room a token: [padded_cols / 4][h][2] bf16 pairs of one parity.
//   For a bfp matrix it holds the block-float GEMM's input instead (BfpGemmInput: K padded to 32,
//   its own tile heights), and for a call on AMX the AMX tiles' input (gemm_amx.h). Either way it
//   serves the one matrix it was packed for (any row ranges).
class GemmInput {
 public:
  int64_t n_tokens() const { return n_tokens_; }
  // Whether this input is also the one `w`'s kernel reads (same kernel path, columns and
  // activation rounding; never a bfp matrix's, whose input is bound to its panels), so one packing
  // of the activations serves several matrices (gemm_group.h).
  bool Serves(const PackedMatrix& w) const;

 private:
  friend GemmInput PackGemmInput(const float*, int64_t, int64_t, const PackedMatrix&);
  friend void Gemm(const GemmInput&, const PackedMatrix&, const float*, float*, int64_t, int64_t,
                   int64_t);
  int path_ = 0;         // which kernel the layout is for (gemm.cpp's GemmPath)
  int tile_tokens_ = 1;  // MR
  ActivationPrecision precision_ = ActivationPrecision::kF32;  // how x entered: bf16-rounded or not
  int64_t n_tokens_ = 0;
  int64_t floats_per_token_ = 0;
  int64_t cols_ = 0;    // the matrix's padded_cols the input was packed for
  int64_t x_cols_ = 0;  // the matrix's cols: the values of x read (the rest zero)
  std::vector<float> data_;
  BfpGemmInput bfp_;  // path_ == the block-float path: the input (data_ empty)
  std::shared_ptr<const AmxGemmInput> amx_;  // path_ == AMX (gemm_amx.h): the input
  std::shared_ptr<const QuantInput> quant_;  // a GGML-quantized matrix's (quant_gemm.h)
  std::shared_ptr<const Int16Input> int16_;  // a BF16 matrix's with kInt16 (bf16_int16.h)
};

// x: [n_tokens, x_stride] f32, of which the first w.cols() of each row are read.
GemmInput PackGemmInput(const float* x, int64_t n_tokens, int64_t x_stride, const PackedMatrix& w);

// y[t * y_stride + (r - row_begin)] = sum_k x[t, k] W[r, k] (+ bias[r]) for t < n_tokens,
// r in [row_begin, row_end). bias: [w.rows()] or nullptr. Splits panels over OpenMP threads
// (contiguous ranges), or runs on the calling thread inside a parallel region; identical results.
void Gemm(const GemmInput& x, const PackedMatrix& w, const float* bias, float* y, int64_t y_stride,
          int64_t row_begin, int64_t row_end);

// Both steps: packs x, then the whole row range. y: [n_tokens, w.rows()].
void Gemm(const float* x, int64_t n_tokens, const PackedMatrix& w, const float* bias, float* y);

// MR: the most tokens one tile of w's kernel holds in a call of n_tokens (GemmInput's tile
// height). A caller that splits many tokens into calls (an MLP in chunks) loses nothing to
// part-filled tiles with calls of a multiple of it.
int GemmTileTokens(const PackedMatrix& w, int64_t n_tokens);

// The kernels a matrix's products run on by call size, from the format table (format_table.h's
// GemmKernelsByTokens), after its format: e.g. "bf16: bf16 pairs (AVX2)", "bfp8: bf16 row groups
// (AVX2); from 32 tokens each panel widened once, bf16 pairs (AVX2)", "Q4_K: int8 blocks (AVX2
// vpmaddubsw)". Valid for the process.
const char* GemmKernelName(const PackedMatrix& w);

// The instructions that bound a call of w with n_tokens tokens (its kernel's GemmPeak), and
// whether that is AMX (BF16 panels or a bfp matrix's, bf16 activations, an AMX CPU).
GemmPeak GemmPeakOf(const PackedMatrix& w, int64_t n_tokens);
bool GemmUsesAmx(const PackedMatrix& w, int64_t n_tokens);

// Tests turn the hand-written x86 GEMM tiles (cpu_kernels.h's kAvx512Gemm, kAmxBf16Gemm and the
// vdpbf16ps tiles' kAvx512Bf16Vbmi) off (and on) to compare them with the portable tiles.
void SetGemmX86Kernels(bool enabled);

}  // namespace wc
