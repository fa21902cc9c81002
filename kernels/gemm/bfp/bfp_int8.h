// Block-float weights times 8-bit activations in integers (--matmul-precision int8): bfp8 / bfp4
// matrices re-expressed along K at load, so prefill runs at the machine's int8 dot-product rate
// (vpdpbusd: twice vdpbf16ps's products an instruction) while the weights keep their 8.5 / 4.5
// bits. An opt-in mode, not exact: its perplexity against bf16 activations is measured and stated
// (docs/performance.md, "Block-float weights in 8-bit integers").
//
// Why re-expressed: a bfp block shares its exponent E along N (16 rows at one k), but an integer
// dot product needs one scale along K. So each half tile, 16 rows h x 32 k (the rows sharing
// exponents, the k sharing an activation block), gets one scale from its largest E:
//   Emax = max E[k] over the k whose 16 codes are not all zero (0 when none), L = 7 - B (bfp8 0,
//   bfp4 4: the bits an int8 has beyond the code's B magnitude bits), S = Emax - L, and for each k
//   with d = E[k] - S:
//     d >= 0: the code c kept, shifted left by d when multiplied (|c| << d <= 127: exact);
//     d <  0: c' = c / 2^-d rounded half to even (the only inexact step: a value under 2^-L of
//             the block's largest loses its low bits), shift 0.
//   The integer weight q[n, k] = c' << shift (|q| <= 127) and the half's scale dW = 2^(Emax - 133)
//   (bfp_weights.h: a code's unit is 2^(E - 127 - (B - 1)), so q dW is the value), an f32, exact.
// bfp4 weights stay exact wherever a half tile's exponents span at most 4 (the common case); bfp8
// only where they are equal.
//
// --matmul-precision int7 is this mode with 7-bit activation blocks (quant_gemm.h's A32 with
// code_max 63): the same layout, kernels and contract. Its one purpose is AVX2's bfp8 tiles of 8
// tokens: x + 64 is then an unsigned byte (1..127) that vpmaddubsw multiplies by the signed code q
// as it lies, and 64 sum_k q (a row's, per block: weights only) is taken off once, so the sign
// step of the 8-bit form (a third of that loop's instructions) goes; its integer sums are the same
// exact sum_k q x. The cost is the activations' eighth bit (perplexity: docs/performance.md).
//
// The GEMM contract (every kernel, bit for bit; tests/kernels/bfp_int8_test.cpp): activations
// quantized as quant_gemm.h's A32 blocks (x zero-padded to K32; block b = k tile b; codes of at
// most 127, or 63 with int7), then y[t, r]
// computed by one thread, from acc = +0, for each k tile b in increasing order, with h the half of
// row r's tile and isum = sum_k q[r, k] xq[t, k] (exact int32),
//   acc = fma(dW[h, b] * dx[t, b], float(isum), acc)
// then y = acc + bias[r] when there is a bias: quant_gemm.h's Q8_0 step with d = dW. The bits
// depend on nothing but the row's weights and the token's activations: not on tokens per call,
// row range, threads or SIMD target.
//
// Layout in this mode (BfpPanels with precision kInt8; the same bytes a tile as tt-metal's): each
// panel holds its half tiles in two runs, half 0 of every k tile, then half 1 (a pass over one
// half's rows reads one contiguous stream), each half tile BfpInt8HalfBytes(f) = 544 / 288 bytes:
//   [0, 32)     bfp4: byte k = the shift of k (0..4; 4 for a k whose 16 codes are 0); bfp8: unused
//               (zero)
//   [32, ...)   bfp8: 8 vectors v of 16 lanes r of 4 bytes j: byte 32 + 64 v + 4 r + j =
//               q[16 h + r, 4 v + j] (int8)
//               bfp4: 4 vectors v: byte 32 + 64 v + 4 r + j = c' of (16 h + r, 4 v + j) in its
//               low nibble, of (16 h + r, 16 + 4 v + j) in its high (two's complement)
// so an AVX-512 register of one vector holds a half tile's 16 rows x 4 k as vpdpbusd reads them
// (quant_panels.h's lanes), and bfp4 needs a nibble split and a per-k shift to get there.
// The scales dW live beside the tiles (BfpPanels::int8_scales(): [panels][k tiles][2] f32).
#pragma once

#include <cstdint>

#include "kernels/gemm/bfp/bfp_weights.h"
#include "kernels/gemm/quant/quant_gemm.h"

namespace wc {

class BfpPanels;

// Bytes of one half tile in the layout above.
constexpr int64_t BfpInt8HalfBytes(BfpFormat f) {
  return BfpTileBytes(f) / 2;
}
// Where half h of k tile tk lies in its panel (bytes from the panel's start).
constexpr int64_t BfpInt8HalfOffset(BfpFormat f, int64_t k_tiles, int64_t tk, int64_t h) {
  return (h * k_tiles + tk) * BfpInt8HalfBytes(f);
}

// One tile, `tile` [BfpTileBytes(f)] in BfpPanels' bf16 layout (gemm_bfp.h), rewritten into the
// layout above: half h into halves[h] [BfpInt8HalfBytes(f)], its scale into scales[h].
void ConvertBfpTileToInt8(BfpFormat f, const uint8_t* tile, uint8_t* const halves[2],
                          float* scales);

// q[16 h + r, k] of a half tile `half` in the layout above (r < 16, k < 32).
int BfpInt8Weight(BfpFormat f, const uint8_t* half, int64_t r, int64_t k);

// The further form of the codes a kernel reads besides QuantInput::codes: none, unsigned_codes
// (the AVX2 bfp4 tiles) or codes_by8 (the AVX2 bfp8 tiles; x + 64 for 7-bit codes, QuantInput's
// comment).
enum class BfpInt8Codes : uint8_t { kPlain, kUnsigned, kBy8 };

// x [n_tokens, x_stride] f32 (the first cols of each row read) quantized as the contract says
// (zero-padded to whole k tiles; code_max 127, or 63 for int7), with the further form `extra` made
// once for every thread.
QuantInput QuantizeBfpInt8Input(const float* x, int64_t n_tokens, int64_t x_stride, int64_t cols,
                                int code_max, BfpInt8Codes extra);

// Panels [pa, pb) of w (precision kInt8 or kInt7) for every token of x into y (rows outside
// [row_begin, row_end) computed and not stored), on the calling thread, portable C++: the
// contract's bits.
void BfpInt8PortableRange(const QuantInput& x, const BfpPanels& w, const float* bias, float* y,
                          int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa,
                          int64_t pb);

}  // namespace wc
