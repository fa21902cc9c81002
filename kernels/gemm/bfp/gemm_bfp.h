// y = x W^T (+ bias) against block-float weights (BFP8_B, BFP4_B; codec: bfp_weights.h) without
// a widened copy of the matrix: the packed GEMM's register tiles (gemm.h, gemm_schedule.h) stream
// 8.5 or 4.5 bits a weight and widen the codes in registers, on portable Highway (gemm_bfp.cpp;
// with bf16 activations below AVX-512 the row-group tiles, gemm_bfp_row_groups.h) and for one token
// on AVX-512F (gemm_bfp_one_token.cpp); from BfpWidenOnceTokens tokens one panel at a time is
// widened into a per-thread buffer for the BF16 / F32 GEMM's own tiles.
//
// Contract (bit for bit; tests/kernels/gemm_bfp_test.cpp): a bfp matrix multiplies exactly as the
// BF16 / F32 GEMM on its decoded values, i.e. GemmBfp(x, panels) == Gemm(x, PackedMatrix::Pack(D))
// for D = DequantizeBfpMatrix's values,
//   kBF16: D as BF16 (exact: every code is a bf16), subnormals flushed to zero of their sign, with
//          the BF16 GEMM's order (gemm.h: per 32-k block an even-k and an odd-k chain, bf16-rounded
//          activations, FTZ; K padded to 32 with zeros, as the BF16 panels are);
//   kF32:  D as F32 (exact, no flush), the f32 FMA chain over k in increasing order;
// for any token count, tile, row range, thread count and SIMD target, with or without the AVX-512
// kernel. The only padding terms run are zeros that leave a chain unchanged (the f32 chain is
// never -0: no FTZ).
//
// Panel layout (BfpPanels): output rows in panels of 32 (= one tt-metal tile column tn), K-major:
// panel p = its k tiles tk = 0 .. K/32 - 1 back to back, each BfpTileBytes(f) bytes (1088 / 576,
// as tt-metal's tile, so bytes() is tt-metal's size), holding k in [32 tk, 32 tk + 32) x n in
// [32 p, 32 p + 32), in the kernels' order rather than tt-metal's face order:
//   [0, 64)    exponents: byte 4 kp + 2 h + b = E of the block (k = 2 kp + b, half h), kp < 16,
//              h < 2 (h: n in [16 h, 16 h + 16)), so one 32-bit word holds a k pair's two E
//   [64, ...)  codes:
//     bfp8: row k (< 32) of 32 bytes, byte n = the code's signed magnitude as a two's-complement
//           int8 (-127..127): one sign extension and one conversion give 16 rows' exact f32
//           multipliers of one k (the FMA tiles)
//     bfp4: chunks of 64 bytes = 16 little-endian 32-bit lanes, chunk 2 g + h (g < 4): lane i
//           (n = 16 h + i), nibble at bit 4 j + 16 b = code (k = 8 g + 2 j + b, n), its signed
//           magnitude in two's complement (-7..7): vpermw or vpermps on the lanes shifted by
//           4 j (+ 16 b) looks codes up, and two shifts sign-extend one where no table fits
// A code whose magnitude is 0 is stored as 0 (tt-metal never writes a negative zero; one from a
// file is cleared). Loading tt-metal tiles (BfpPanels::FromTiles) is this per-tile reorder only:
// exponents moved, bfp8 codes regrouped into rows, bfp4 nibbles regrouped, both made two's
// complement.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/gemm/bfp/bfp_int8.h"
#include "kernels/gemm/bfp/bfp_weights.h"
#include "kernels/gemm/quant/quant_gemm.h"
#include "kernels/gemm/weight_format.h"
#include "kernels/matmul.h"
#include "util/page_buffer.h"

namespace wc {

struct AmxGemmInput;  // gemm_amx.h

// Where a matrix's tiles lie in a tensor of tt-metal's tiles (a converted checkpoint's): the
// matrix [rows, cols] (N, K unpadded) is whole tile rows [tk_begin, tk_begin + K/32) of `whole`,
// its 32-row panel p the whole's tile column tile_cols[p].
struct BfpTileSlice {
  BfpLayout whole;                 // the tensor's layout
  const uint8_t* tiles = nullptr;  // [whole.bytes()]
  int64_t rows = 0, cols = 0;      // the slice's N and K
  int64_t tk_begin = 0;
  std::vector<int64_t> tile_cols;  // [ceil(rows / 32)]

  // All of a [layout.out, layout.in] tensor's tiles.
  static BfpTileSlice Whole(const BfpLayout& layout, const uint8_t* tiles);
};

class BfpPanels {
 public:
  static constexpr int64_t kPanelRows = 32;

  BfpPanels() = default;
  BfpPanels(BfpPanels&&) noexcept = default;
  BfpPanels& operator=(BfpPanels&&) noexcept = default;

  // Called after source rows [row_begin, row_end) are packed (in blocks of rows, in order).
  using RowsDone = std::function<void(int64_t row_begin, int64_t row_end)>;

  // W (HF shape [out = w.rows, in = w.cols], F32 / BF16 / F16, any stride, unaligned) through the
  // codec (PackBfpTile), in parallel (OpenMP) over panels in blocks of about 8 MiB of source rows,
  // calling `done` after each. Throws wc::Error naming `name` and the element for a NaN or Inf (the
  // first in row-block order, whatever the thread count).
  static BfpPanels FromMatrix(BfpFormat f, const MatrixRef& w, const std::string& name,
                              ActivationPrecision precision, const RowsDone& done = nullptr);

  // From tt-metal's tiles: `tiles` [layout.bytes()], tile (tk, tn) at layout.TileOffset(tk, tn)
  // (row-major over the padded [K, N], each as bfp_weights.h step 6 lays it out: a converted
  // checkpoint's tensor). Throws wc::Error naming `name` for an exponent byte of 255 (an Inf or
  // NaN's; the packer never writes it).
  static BfpPanels FromTiles(const BfpLayout& layout, const uint8_t* tiles, const std::string& name,
                             ActivationPrecision precision);

  // Called after the source's whole tile rows [tk_begin, tk_end) are reordered (in blocks of about
  // 8 MiB of the source, in order): their bytes, one run of the source, are no longer read.
  using TileRowsDone = std::function<void(int64_t tk_begin, int64_t tk_end)>;

  // A slice of tt-metal's tiles (BfpTileSlice, a tensor-parallel rank's part of a converted
  // tensor) reordered in place, no copy of the slice made; the lowest failing tile in (tile-row
  // block, panel) order is named, whatever the thread count.
  static BfpPanels FromTiles(const BfpTileSlice& slice, const std::string& name,
                             ActivationPrecision precision, const TileRowsDone& done = nullptr);

  BfpFormat format() const { return format_; }
  ActivationPrecision precision() const { return precision_; }
  int64_t rows() const { return rows_; }  // N, unpadded (W's rows)
  int64_t cols() const { return cols_; }  // K, unpadded (W's columns)
  int64_t k_tiles() const { return (cols_ + 31) / 32; }
  int64_t panels() const { return (rows_ + kPanelRows - 1) / kPanelRows; }
  int64_t tile_bytes() const { return BfpTileBytes(format_); }
  int64_t panel_bytes() const { return k_tiles() * tile_bytes(); }
  size_t bytes() const { return static_cast<size_t>(panels() * panel_bytes()); }
  const uint8_t* data() const { return data_.data(); }
  bool empty() const { return rows_ == 0; }

  // True when every block of panel p holding a nonzero code has E in [B, 127 + B - 1]: its nonzero
  // values are bf16 normals below 2^B in magnitude, which the AVX-512 kernel widens with one
  // saturating subtract; other panels take a slower widening that flushes and handles any E.
  bool PanelIsPlain(int64_t p) const { return plain_[static_cast<size_t>(p)] != 0; }
  const uint8_t* plain_flags() const { return plain_.data(); }  // [panels] PanelIsPlain

  // With precision kInt8 or kInt7 the tiles are in bfp_int8.h's layout (converted as they are
  // packed) and these are its half tiles' scales dW: [panels][k_tiles][2] f32. Empty otherwise.
  const float* int8_scales() const { return int8_scales_.data(); }
  size_t int8_scale_bytes() const { return int8_scales_.size() * sizeof(float); }
  // With kInt8 / kInt7: half h of k tile tk of panel p (bfp_int8.h's layout), and its scale dW.
  const uint8_t* Int8Half(int64_t p, int64_t tk, int64_t h) const {
    return data_.data() + p * panel_bytes() + BfpInt8HalfOffset(format_, k_tiles(), tk, h);
  }
  float Int8Scale(int64_t p, int64_t tk, int64_t h) const {
    return int8_scales_[static_cast<size_t>((p * k_tiles() + tk) * 2 + h)];
  }

  // W[r, k] (the exact decoded value; with kInt8 / kInt7 the value it multiplies as, q dW) and row
  // r as floats (tests; a tied head's lookup).
  float At(int64_t r, int64_t k) const;
  void Row(int64_t r, float* out) const;  // out: [cols] f32

 private:
  void Init(BfpFormat f, int64_t rows, int64_t cols, ActivationPrecision precision);
  // Reorders tile bytes `tt` (tt-metal's layout) into tile (tk, p) of the panels.
  void PutTile(int64_t tk, int64_t p, const uint8_t* tt);
  void MarkPlain();

  BfpFormat format_ = BfpFormat::kBfp8;
  ActivationPrecision precision_ = ActivationPrecision::kBF16;
  int64_t rows_ = 0, cols_ = 0;
  PageBuffer data_;                 // [panels][k_tiles][tile_bytes], 2 MiB aligned, huge pages
  std::vector<uint8_t> plain_;      // [panels] PanelIsPlain
  std::vector<float> int8_scales_;  // [panels][k_tiles][2] with kInt8 / kInt7, else empty
};

// Calls of at least BfpWidenOnceTokens(w) tokens widen each panel once instead of in registers per
// token tile, so the widening is paid once per panel, not once per token tile. With bf16
// activations on the portable tiles a thread widens a panel 512 k pairs at a time into f32 halves
// (128 KB, L2-resident; the even k's rows and the odd k's of each block apart, so no tile splits a
// pair) and runs every token tile of the pairs kernel on that chunk before the next
// (gemm_schedule.h's RunHalves); on AMX up to kBfpAmxFusedMaxTokens (32) each k tile is widened
// into L1 just before its TDPBF16PS (gemm_bfp_amx.h), beyond it, and with f32 activations, the
// whole panel is widened (about 2 KB per k tile) into the BF16 (F32) GEMM's packed panel for that
// GEMM's own tiles (AMX's, or gemm_schedule.h's PortableRange). Either side of the threshold the
// results are the same bits (the contract). Measured per target (tests/kernels/gemm_bfp_bench.cpp,
// FalconShapes with BFP_BENCH_TOKENS): on AMX from 2 tokens (Intel Xeon, 2026-11-28: 4544 x 18176
// at 3 tokens bfp8 7.1 -> 3.5 ms, bfp4 5.5 -> 2.0 ms against the in-register tiles; at 2 bfp8
// within noise, bfp4 4.2 -> 2.2 ms), on AVX-512 without it from 16 (Intel Xeon, 2026-11-26); on
// AVX2 with bf16 activations from 32 (AMD EPYC Zen 3, 2026-11-28: the row-group
// tiles, gemm_bfp_row_groups.h, hold 6 tokens and widen each code once per 6; bfp8 4544 x 4544 at
// 24 tokens 8.2 ms in registers against 8.9 widened once, at 32 the two within noise, at 64
// widened once 12% faster, at 512 10%), with f32 activations from 5 (2026-11-27: its in-register
// tiles hold 3 tokens).
constexpr int64_t kBfpWidenOnceTokensAvx512 = 16;
// With vdpbf16ps (AVX-512 BF16 without AMX) each panel is widened once for the BF16 dot tiles from
// 6 tokens, the dot tile's full height: below it a part-filled dot tile loses to the in-register
// FMA tiles, from it the widening is paid by enough tokens (measured both ways:
// docs/performance.md, "Batched decode against llama-batched-bench").
constexpr int64_t kBfpDotWidenOnceTokens = 6;
constexpr int64_t kBfpWidenOnceTokensAvx2 = 32;    // bf16 activations, every target below AVX-512
constexpr int64_t kBfpWidenOnceTokensAvx2F32 = 5;  // f32 activations, every target below AVX-512
constexpr int64_t kBfpWidenOnceTokensAmx = 2;

// The threshold for w's calls on this CPU and SIMD limit (WORMCHAT_SIMD): one of the four above.
int64_t BfpWidenOnceTokens(const BfpPanels& w);

// Activations packed for one BfpPanels' kernel (the BF16 / F32 GEMM's layouts, gemm.h's
// GemmInput), K padded to 32 with zeros: tiles of at most MR tokens (balanced, gemm_schedule.h's
// TokenTiles), the tile of tokens [t0, t0 + h) at data + t0 * floats_per_token, laid out
//   kF32:                    [K32][h] f32
//   kBF16 portable:          [K32 / 2][h][2] f32 (bf16-rounded values)
//   kBF16 AVX-512 BF16:      [K32 / 2][h] bf16 pairs as one float's bits (h <= 10 bfp8, 12 bfp4;
//                            12 when the panels are widened once)
//   kInt8, kInt7:            none: x quantized in 8-bit (7-bit) blocks (bfp_int8.h)
class BfpGemmInput {
 public:
  int64_t n_tokens() const { return n_tokens_; }

 private:
  friend BfpGemmInput PackBfpGemmInput(const float*, int64_t, int64_t, const BfpPanels&);
  friend void GemmBfp(const BfpGemmInput&, const BfpPanels&, const float*, float*, int64_t, int64_t,
                      int64_t);
  int path_ = 0;             // gemm_bfp.cpp's BfpPath
  bool widen_once_ = false;  // each panel widened once (on AMX: above kBfpAmxFusedMaxTokens)
  bool row_groups_ = false;  // below it on the pairs path: gemm_bfp_row_groups.h's tiles
  int tile_tokens_ = 1;
  int64_t n_tokens_ = 0;
  int64_t floats_per_token_ = 0;
  const BfpPanels* panels_ = nullptr;  // the matrix it was packed for
  std::vector<float> data_;
  std::shared_ptr<const AmxGemmInput> amx_;  // on AMX (gemm_amx.h, gemm_bfp_amx.h): the input
  bool dot_ = false;  // widened once for the vdpbf16ps tiles (gemm_bf16_dot.h): data_ in their
                      // layout
  std::shared_ptr<const QuantInput> int8_;  // with kInt8 / kInt7 (bfp_int8.h): the quantized x
};

// MR: the most tokens one tile of w's kernel holds in a call of n_tokens (the input's tile height;
// 16 on AMX).
int GemmBfpTileTokens(const BfpPanels& w, int64_t n_tokens);

// x: [n_tokens, x_stride] f32, of which the first w.cols() of each row are read.
BfpGemmInput PackBfpGemmInput(const float* x, int64_t n_tokens, int64_t x_stride,
                              const BfpPanels& w);

// y[t * y_stride + (r - row_begin)] = sum_k x[t, k] W[r, k] (+ bias[r]) for t < n_tokens,
// r in [row_begin, row_end). bias: [w.rows()] or nullptr. Splits panels over OpenMP threads
// (contiguous ranges), or runs on the calling thread inside a parallel region; identical results.
void GemmBfp(const BfpGemmInput& x, const BfpPanels& w, const float* bias, float* y,
             int64_t y_stride, int64_t row_begin, int64_t row_end);

// Both steps: y [n_tokens, w.rows()].
void GemmBfp(const float* x, int64_t n_tokens, const BfpPanels& w, const float* bias, float* y);

// The kernel w's products run on, e.g. "bfp8 bf16 pairs (AVX3, one token AVX-512F)", "bfp4 f32
// FMA (AVX2)".
std::string GemmBfpKernelName(const BfpPanels& w);

// True when calls of w with n_tokens tokens run on AMX tiles (from kBfpWidenOnceTokensAmx tokens:
// up to kBfpAmxFusedMaxTokens a k tile widened at a time, gemm_bfp_amx.h; beyond, each panel once).
bool GemmBfpUsesAmx(const BfpPanels& w, int64_t n_tokens);

}  // namespace wc
