#include "kernels/packed_matrix.h"

#include <cstring>

#include "util/bf16.h"
#include "util/error.h"

namespace wc {
namespace {

// The bf16 bits h with a subnormal flushed to zero of its sign (vdpbf16ps's DAZ).
uint16_t FlushSubnormal(uint16_t h) {
  return (h & 0x7f80u) == 0 ? static_cast<uint16_t>(h & 0x8000u) : h;
}

// Packs rows [p * 32, p * 32 + 32) of w into `out` (one panel, already zeroed).
template <typename T>
void PackPanelKMajor(const MatrixRef& w, int64_t p, T* out) {
  const auto* src = static_cast<const uint8_t*>(w.data);
  const int64_t r0 = p * PackedMatrix::kPanelRows;
  const int64_t n = std::min(PackedMatrix::kPanelRows, w.rows - r0);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = src + (r0 + i) * w.row_stride * static_cast<int64_t>(sizeof(T));
    for (int64_t k = 0; k < w.cols; ++k)
      std::memcpy(&out[k * PackedMatrix::kPanelRows + i], row + k * sizeof(T), sizeof(T));
  }
}

void PackPanelPairs(const MatrixRef& w, int64_t p, uint16_t* out) {
  const auto* src = static_cast<const uint8_t*>(w.data);
  const int64_t r0 = p * PackedMatrix::kPanelRows;
  const int64_t n = std::min(PackedMatrix::kPanelRows, w.rows - r0);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = src + (r0 + i) * w.row_stride * 2;
    for (int64_t k = 0; k < w.cols; ++k) {
      uint16_t h;
      std::memcpy(&h, row + k * 2, 2);
      out[(k / 2) * 2 * PackedMatrix::kPanelRows + i * 2 + (k % 2)] = FlushSubnormal(h);
    }
  }
}

}  // namespace

PackedMatrix PackedMatrix::Pack(const MatrixRef& w, ActivationPrecision precision,
                                const RowsDone& done) {
  WC_CHECK(w.rows >= 0 && w.cols >= 0 && w.row_stride >= w.cols, "bad matrix shape");
  WC_CHECK(precision == ActivationPrecision::kF32 || w.dtype == DType::kBF16,
           "bf16 activations need a BF16 matrix");
  PackedMatrix m;
  m.dtype_ = w.dtype;
  m.precision_ = precision;
  m.rows_ = w.rows;
  m.cols_ = w.cols;
  m.padded_cols_ = w.dtype == DType::kBF16 ? (w.cols + 1) / 2 * 2 : w.cols;
  const int64_t panels = m.panels(), elems = m.panel_elems();
  const int64_t esize = DTypeSize(w.dtype);
  m.data_ = PageBuffer(static_cast<size_t>(std::max<int64_t>(1, panels * elems * esize)));
  uint8_t* base = m.data_.data();
  // Blocks of about 8 MiB of source, so `done` can release a large matrix while it is packed.
  const int64_t row_bytes = std::max<int64_t>(1, w.row_stride * esize);
  const int64_t block = std::max<int64_t>(1, (int64_t{8} << 20) / (kPanelRows * row_bytes));
  for (int64_t p0 = 0; p0 < panels; p0 += block) {
    const int64_t p1 = std::min(panels, p0 + block);
#pragma omp parallel for schedule(static)
    for (int64_t p = p0; p < p1; ++p) {
      uint8_t* out = base + p * elems * esize;
      switch (w.dtype) {
        case DType::kF32:
          PackPanelKMajor(w, p, reinterpret_cast<float*>(out));
          break;
        case DType::kF16:
          PackPanelKMajor(w, p, reinterpret_cast<uint16_t*>(out));
          break;
        case DType::kBF16:
          PackPanelPairs(w, p, reinterpret_cast<uint16_t*>(out));
          break;
      }
    }
    if (done) done(p0 * kPanelRows, std::min(w.rows, p1 * kPanelRows));
  }
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
  return dtype_ == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
}

void PackedMatrix::Row(int64_t r, float* out) const {
  WC_CHECK(r >= 0 && r < rows_, "row out of range");
  for (int64_t k = 0; k < cols_; ++k) out[k] = ValueAt(Index(r, k));
}

float PackedMatrix::At(int64_t r, int64_t k) const {
  WC_CHECK(r >= 0 && r < rows_ && k >= 0 && k < cols_, "element out of range");
  return ValueAt(Index(r, k));
}

}  // namespace wc
