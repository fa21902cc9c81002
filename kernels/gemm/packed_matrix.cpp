#include "kernels/gemm/packed_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/gemm/bf16/bf16_int16.h"
#include "util/bf16.h"
#include "util/error.h"

namespace wc {
namespace {

constexpr int64_t kPanel = PackedMatrix::kPanelRows;

// Element k of a source row as a float (exact for every dtype).
float SourceValue(const uint8_t* row, DType dtype, int64_t k) {
  if (dtype == DType::kF32) {
    float f;
    std::memcpy(&f, row + 4 * k, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, row + 2 * k, 2);
  return dtype == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
}

const uint8_t* SourceRow(const MatrixRef& w, int64_t r) {
  return static_cast<const uint8_t*>(w.data) + r * w.row_stride * DTypeSize(w.dtype);
}

// Index of W[i, k] of a panel (i < 32) in its elements: [k][32] or, BF16, [k / 2][32][2].
int64_t InPanel(DType panel_dtype, int64_t i, int64_t k) {
  return panel_dtype == DType::kBF16 ? (k / 2) * 2 * kPanel + i * 2 + k % 2 : k * kPanel + i;
}

// Packs rows [p * 32, p * 32 + 32) of w into `out` (one panel of `dtype`, already zeroed): the
// source's values copied (same dtype), widened to f32, or rounded to bf16 (nearest even).
void PackPanel(const MatrixRef& w, int64_t p, DType dtype, uint8_t* out) {
  const int64_t r0 = p * kPanel, n = std::min(kPanel, w.rows - r0);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = SourceRow(w, r0 + i);
    if (dtype == w.dtype && dtype != DType::kBF16) {  // F32 or F16 copied
      const size_t es = DTypeSize(dtype);
      for (int64_t k = 0; k < w.cols; ++k)
        std::memcpy(out + InPanel(dtype, i, k) * es, row + k * es, es);
    } else if (dtype == DType::kBF16) {
      auto* o = reinterpret_cast<uint16_t*>(out);
      for (int64_t k = 0; k < w.cols; ++k) {
        uint16_t h;
        if (w.dtype == DType::kBF16)
          std::memcpy(&h, row + 2 * k, 2);
        else
          h = F32ToBF16(SourceValue(row, w.dtype, k));
        o[InPanel(dtype, i, k)] = FlushBF16Subnormal(h);
      }
    } else {  // F32 from BF16 or F16
      auto* o = reinterpret_cast<float*>(out);
      for (int64_t k = 0; k < w.cols; ++k) o[InPanel(dtype, i, k)] = SourceValue(row, w.dtype, k);
    }
  }
}

// The precision a BF16 or bfp matrix asked for `p` multiplies at: kInt8 and kInt7 are a
// block-float matrix's modes alone (bfp_int8.h) and kInt16 a BF16 one's (bf16_int16.h); the other
// takes bf16 activations.
ActivationPrecision PrecisionOf(WeightFormat f, ActivationPrecision p) {
  if ((IsInt8Codes(p) && !IsBfp(f)) || (p == ActivationPrecision::kInt16 && IsBfp(f)))
    return ActivationPrecision::kBF16;
  return p;
}

}  // namespace

PackedMatrix PackedMatrix::Pack(const MatrixRef& w, ActivationPrecision precision,
                                const RowsDone& done) {
  WC_CHECK(precision == ActivationPrecision::kF32 || w.dtype == DType::kBF16,
           "bf16 activations need a BF16 matrix");
  WC_CHECK(!IsInt8Codes(precision), "int8 / int7 activations need a block-float matrix");
  WC_CHECK(precision != ActivationPrecision::kInt16 || w.dtype == DType::kBF16,
           "int16 activations need a BF16 matrix");
  return Pack(w, FormatOfDType(w.dtype), precision, "", done);
}

PackedMatrix PackedMatrix::Pack(const MatrixRef& w, WeightFormat format,
                                ActivationPrecision precision, const std::string& name,
                                const RowsDone& done) {
  WC_CHECK(w.rows >= 0 && w.cols >= 0 && w.row_stride >= w.cols, "bad matrix shape");
  if (format == WeightFormat::kF16 && w.dtype != DType::kF16)
    throw Error(Cat(name, ": f16 weights only as an F16 checkpoint stores them"));
  PackedMatrix m;
  m.format_ = format;
  switch (format) {
    case WeightFormat::kF32:
      m.dtype_ = DType::kF32;
      break;
    case WeightFormat::kF16:
      m.dtype_ = DType::kF16;
      break;
    case WeightFormat::kBF16:
      m.dtype_ = DType::kBF16;
      break;
    case WeightFormat::kBfp8:
    case WeightFormat::kBfp4:
      m.dtype_ = precision == ActivationPrecision::kF32 ? DType::kF32 : DType::kBF16;
      break;
    default:  // a GGML type: only as a file stores it (FromGgmlRows)
      throw Error(
          Cat(name, ": ", WeightFormatName(format), " weights only as a GGUF file stores them"));
  }
  m.precision_ =
      m.dtype_ != DType::kBF16 ? ActivationPrecision::kF32 : PrecisionOf(format, precision);
  m.rows_ = w.rows;
  m.cols_ = w.cols;
  if (IsBfp(format)) {  // the tiles themselves (no panels of values: padded_cols 0)
    m.bfp_ = BfpPanels::FromMatrix(BfpOf(format), w, name, m.precision_, done);
    return m;
  }
  m.padded_cols_ = m.dtype_ == DType::kBF16 ? (w.cols + 31) / 32 * 32 : w.cols;
  const int64_t panels = m.panels(), elems = m.panel_elems();
  const int64_t esize = DTypeSize(m.dtype_);
  m.data_ = PageBuffer(static_cast<size_t>(std::max<int64_t>(1, panels * elems * esize)));
  uint8_t* base = m.data_.data();
  // Blocks of about 8 MiB of source, so `done` can release a large matrix while it is packed.
  const int64_t row_bytes = std::max<int64_t>(1, w.row_stride * DTypeSize(w.dtype));
  const int64_t block = std::max<int64_t>(1, (int64_t{8} << 20) / (kPanelRows * row_bytes));
  const bool int16 = m.precision_ == ActivationPrecision::kInt16;
  const int64_t blocks = m.padded_cols_ / 32;
  if (int16) m.int16_exps_.assign(static_cast<size_t>(panels * blocks * kPanelRows), 0);
  for (int64_t p0 = 0; p0 < panels; p0 += block) {
    const int64_t p1 = std::min(panels, p0 + block);
#pragma omp parallel for schedule(static)
    for (int64_t p = p0; p < p1; ++p) {
      PackPanel(w, p, m.dtype_, base + p * elems * esize);
      if (int16)  // the bf16 values become their codes in place (bf16_int16.h)
        QuantizeInt16Panel(reinterpret_cast<uint16_t*>(base + p * elems * esize), blocks,
                           m.int16_exps_.data() + p * blocks * kPanelRows);
    }
    if (done) done(p0 * kPanelRows, std::min(w.rows, p1 * kPanelRows));
  }
  return m;
}

PackedMatrix PackedMatrix::FromGgmlRows(GgmlQuant type, const uint8_t* src, int64_t rows,
                                        int64_t cols, int64_t row_bytes, const std::string& name,
                                        const RowsDone& done) {
  PackedMatrix m;
  m.format_ = FormatOf(type);
  m.dtype_ = DType::kF32;  // no panels of values: padded_cols 0
  m.precision_ = ActivationPrecision::kF32;
  m.rows_ = rows;
  m.cols_ = cols;
  m.quant_ = QuantPanels::FromRows(type, src, rows, cols, row_bytes, name, done);
  return m;
}

PackedMatrix PackedMatrix::FromBfpTiles(const BfpLayout& layout, const uint8_t* tiles,
                                        ActivationPrecision precision, const std::string& name) {
  return FromBfpTiles(BfpTileSlice::Whole(layout, tiles), precision, name);
}

PackedMatrix PackedMatrix::FromBfpTiles(const BfpTileSlice& slice, ActivationPrecision precision,
                                        const std::string& name,
                                        const BfpPanels::TileRowsDone& done) {
  PackedMatrix m;
  m.format_ = slice.whole.format == BfpFormat::kBfp8 ? WeightFormat::kBfp8 : WeightFormat::kBfp4;
  m.dtype_ = precision == ActivationPrecision::kF32 ? DType::kF32 : DType::kBF16;
  m.precision_ = PrecisionOf(m.format_, precision);
  m.rows_ = slice.rows;
  m.cols_ = slice.cols;
  m.bfp_ = BfpPanels::FromTiles(slice, name, m.precision_, done);
  return m;
}

int64_t PackedMatrix::Index(int64_t r, int64_t k) const {
  const int64_t i = r % kPanelRows;
  const int64_t in_panel =
      dtype_ == DType::kBF16 ? (k / 2) * 2 * kPanelRows + i * 2 + k % 2 : k * kPanelRows + i;
  return (r / kPanelRows) * panel_elems() + in_panel;
}

float PackedMatrix::ValueAt(int64_t index) const {
  const uint8_t* p = data_.data() + index * DTypeSize(dtype_);
  if (dtype_ == DType::kF32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  if (precision_ == ActivationPrecision::kInt16) {  // q dW of the element's row and block
    const int64_t panel = index / panel_elems(), in_panel = index % panel_elems();
    const int64_t k = in_panel / (2 * kPanelRows) * 2 + in_panel % 2;
    const int64_t i = in_panel % (2 * kPanelRows) / 2;
    const int8_t e =
        int16_exps_[static_cast<size_t>((panel * (padded_cols_ / 32) + k / 32) * kPanelRows + i)];
    return std::ldexp(static_cast<float>(static_cast<int16_t>(h)), e);
  }
  return dtype_ == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
}

// A bfp matrix's decoded value as its GEMM multiplies it: kBF16 flushes a subnormal (the BF16
// panels' FlushBF16Subnormal; every decoded value is a bf16, so this is the same bits).
float PackedMatrix::BfpValue(int64_t r, int64_t k) const {
  const float v = bfp_.At(r, k);
  if (precision_ == ActivationPrecision::kBF16 && std::fpclassify(v) == FP_SUBNORMAL)
    return std::copysign(0.0f, v);
  return v;
}

void PackedMatrix::Row(int64_t r, float* out) const {
  WC_CHECK(r >= 0 && r < rows_, "row out of range");
  if (IsGgmlQuant(format_)) return quant_.Row(r, out);
  if (IsBfp(format_)) {
    for (int64_t k = 0; k < cols_; ++k) out[k] = BfpValue(r, k);
    return;
  }
  for (int64_t k = 0; k < cols_; ++k) out[k] = ValueAt(Index(r, k));
}

float PackedMatrix::At(int64_t r, int64_t k) const {
  WC_CHECK(r >= 0 && r < rows_ && k >= 0 && k < cols_, "element out of range");
  if (IsGgmlQuant(format_)) return quant_.At(r, k);
  return IsBfp(format_) ? BfpValue(r, k) : ValueAt(Index(r, k));
}

}  // namespace wc
