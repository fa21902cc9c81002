// Weights repacked once at load into the layout the GEMM microkernels stream (gemm.h).
//
// Output rows are grouped in panels of kPanelRows = 32 (the last one padded with zero rows). Inside
// a panel the values are K-major, so a microkernel reads each panel as one contiguous stream and
// every loaded vector holds one k of 16 (AVX-512) or 8 (AVX2) rows:
//   F32, F16:  panel[k][32]          elements of the source dtype, padded_cols = cols
//   BF16:      panel[k / 2][32][2]   the pair (k, k + 1) of each row side by side, padded_cols =
//                                    cols rounded up to 32 with zero columns (gemm.h's order runs
//                                    blocks of 32 k): a k-pair row is two rows of an AMX B tile
// Panel p starts at data() + p * panel_elems() elements (64-byte aligned). The buffer is 2 MiB
// aligned and asks the kernel for transparent huge pages: decode streams every weight byte per
// token, and 4 KiB pages cost a TLB miss every 64 cache lines.
//
// BF16 subnormals are flushed to zero of the same sign while packing: AMX reads them as zero (DAZ),
// so the FMA tiles, which read the same packed values, agree with it bit for bit.
//
// A matrix has a WeightFormat (kernels/gemm/weight_format.h, --weights): the panels' dtype is the
// format's own for f32, f16 and bf16. A bfp8/bfp4 matrix holds no such panels but its packed tiles
// (BfpPanels, gemm_bfp.h: 1088 / 576 bytes a 32x32 tile, tt-metal's size), which the block-float
// GEMM streams; it multiplies as its decoded values (the block-float contract) would as BF16
// panels, or as F32 panels with kF32 activations, and dtype() names those panels.
// (ActivationPrecision, how activations enter the products, is weight_format.h's.) A BF16 matrix
// packed for kInt16 activations holds int16 codes in its BF16 panels instead (bf16_int16.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/gemm/bfp/gemm_bfp.h"
#include "kernels/gemm/quant/quant_panels.h"
#include "kernels/gemm/weight_format.h"
#include "kernels/matmul.h"
#include "util/page_buffer.h"

namespace wc {

class PackedMatrix {
 public:
  static constexpr int64_t kPanelRows = 32;

  PackedMatrix() = default;
  PackedMatrix(PackedMatrix&&) noexcept = default;
  PackedMatrix& operator=(PackedMatrix&&) noexcept = default;

  // Called after source rows [row_begin, row_end) are copied (in blocks of rows, in order), so a
  // caller can release them while the rest is packed.
  using RowsDone = std::function<void(int64_t row_begin, int64_t row_end)>;

  // A copy of w (row-major, any dtype and row stride) in the packed layout, packed in parallel over
  // panels. `precision` must be kF32 unless w is BF16.
  static PackedMatrix Pack(const MatrixRef& w,
                           ActivationPrecision precision = ActivationPrecision::kF32,
                           const RowsDone& done = nullptr);
  // w (F32, BF16 or F16) converted to `format` and packed, in parallel over panels, calling `done`
  // as above. f32: widened exactly; bf16: rounded to nearest even (copied from BF16); f16: only
  // from F16; bfp8/bfp4: quantized tile by tile by the exact packer (BfpPanels::FromMatrix) and
  // held as tiles (the block-float contract above). `precision` applies to a bf16 matrix and to a
  // bfp one (kBF16: multiplied as BF16 panels of its decoded values would be; kF32: as F32 panels
  // of them). Throws wc::Error naming `name` (the tensor) and the element for a non-finite weight
  // of a bfp matrix (the first in row-block order), or for f16 from another dtype.
  static PackedMatrix Pack(const MatrixRef& w, WeightFormat format, ActivationPrecision precision,
                           const std::string& name, const RowsDone& done = nullptr);
  // A bfp matrix from tt-metal's tiles as stored (a converted checkpoint's tensor, `tiles`
  // [layout.bytes()], BfpPanels::FromTiles): no quantization, the same matrix Pack would make of
  // the weights those tiles were packed from. Throws wc::Error naming `name` for an exponent byte
  // of 255.
  static PackedMatrix FromBfpTiles(const BfpLayout& layout, const uint8_t* tiles,
                                   ActivationPrecision precision, const std::string& name);
  // The same from a slice of a tile tensor (BfpPanels::FromTiles), `done` called as the source's
  // tile rows are used up.
  static PackedMatrix FromBfpTiles(const BfpTileSlice& slice, ActivationPrecision precision,
                                   const std::string& name,
                                   const BfpPanels::TileRowsDone& done = nullptr);

  // GGML-quantized rows as a GGUF file holds them (QuantPanels::FromRows: row r's blocks at
  // src + r * row_bytes), repacked into 8-row groups in their own bits; they multiply by 8-bit
  // activations (quant_gemm.h). Throws wc::Error naming `name` for a row that is not whole blocks.
  static PackedMatrix FromGgmlRows(GgmlQuant type, const uint8_t* src, int64_t rows, int64_t cols,
                                   int64_t row_bytes, const std::string& name,
                                   const RowsDone& done = nullptr);

  // The format the weights are held in (what they multiply as).
  WeightFormat format() const { return format_; }
  // The panels' element type; for a bfp matrix the panels its decoded values multiply as (BF16
  // with bf16 activations, else F32).
  DType dtype() const { return dtype_; }
  ActivationPrecision precision() const { return precision_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t panels() const { return (rows_ + kPanelRows - 1) / kPanelRows; }
  // The f32 / f16 / bf16 panel layout (not a bfp matrix's: see bfp()).
  int64_t padded_cols() const { return padded_cols_; }
  int64_t panel_elems() const { return padded_cols_ * kPanelRows; }
  const void* data() const { return data_.data(); }
  // A bfp matrix's tiles (IsBfp(format())); empty otherwise.
  const BfpPanels& bfp() const { return bfp_; }
  // A GGML-quantized matrix's groups (IsGgmlQuant(format())); empty otherwise.
  const QuantPanels& quant() const { return quant_; }
  // A BF16 matrix with kInt16 activations (bf16_int16.h): its panels hold the int16 codes q in
  // the BF16 layout, and the scales' exponents lie beside them, [panels][padded_cols / 32][32].
  const int16_t* int16_codes() const { return reinterpret_cast<const int16_t*>(data_.data()); }
  const int8_t* int16_exps() const { return int16_exps_.data(); }
  // Bytes held: the panels (with int16 activations and their scales' exponents, a byte a row and
  // 32 k), or a bfp matrix's tiles (tt-metal's size, BfpPanels::bytes()) and, with int8
  // activations, their half tiles' scales (8 bytes a tile).
  size_t bytes() const {
    if (IsBfp(format_)) return bfp_.bytes() + bfp_.int8_scale_bytes();
    if (IsGgmlQuant(format_)) return quant_.bytes();
    return static_cast<size_t>(panels() * panel_elems() * DTypeSize(dtype_)) + int16_exps_.size();
  }
  bool empty() const { return rows_ == 0; }

  // W[r, k] as a float, read from the packed layout (tests, debugging, a tied head's embedding
  // lookup): the value it multiplies as (a bfp matrix's decoded value, a subnormal flushed to zero
  // of its sign with kBF16; a GGML-quantized one's value as ggml dequantizes it).
  float At(int64_t r, int64_t k) const;
  // out[0:cols] = row r as At gives it (a tied LM head serves the embedding lookup this way, so the
  // checkpoint's copy need not stay mapped). out: [cols] f32.
  void Row(int64_t r, float* out) const;

 private:
  // Element index of W[r, k] in data() (either layout), and the float value at an index.
  int64_t Index(int64_t r, int64_t k) const;
  float ValueAt(int64_t index) const;
  float BfpValue(int64_t r, int64_t k) const;  // a bfp matrix's W[r, k], as At

  WeightFormat format_ = WeightFormat::kF32;
  DType dtype_ = DType::kF32;
  ActivationPrecision precision_ = ActivationPrecision::kF32;
  int64_t rows_ = 0, cols_ = 0, padded_cols_ = 0;
  PageBuffer data_;    // [panels, panel_elems] of dtype_, 2 MiB aligned, huge pages (not bfp)
  BfpPanels bfp_;      // a bfp matrix's tiles, else empty
  QuantPanels quant_;  // a GGML-quantized matrix's groups, else empty
  std::vector<int8_t> int16_exps_;  // kInt16: [panels][padded_cols / 32][32], else empty
};

}  // namespace wc
