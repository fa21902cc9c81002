// Rows of cached K or V exactly as they are stored, in any KV-cache format: what the decode-
// attention kernels (decode_attention.h) read in place, dequantizing inside their dot products,
// so no decoded copy of a cache is ever made. The codecs that write them: int8.h, fp8.h, bfp_kv.h
// (called by kvcache/kv_formats.cpp).
//
// Byte layout of one row of `cols` values (row r starts at data + r * row_bytes):
//   kF32, kBF16, kF16      cols values.
//   kInt8, kFP8E4M3,       with row_scale: a bf16 scale s, then cols one-byte codes, value =
//   kFP8E5M2               code * s ("token-head" scales); without: cols codes, value = code *
//                          tensor_scale. Codes: int8 two's complement; OCP FP8 E4M3FN / E5M2.
//   kBFP8                  Tenstorrent BFP8_B: cols / 16 shared exponents e (biased like
//                          float32), then cols bytes sign << 7 | m, value = +-m * 2^(e - 133)
//                          (e = 0: zeros). Needs cols % 16 == 0.
#pragma once

#include <cstdint>

#include <cstring>

#include "kernels/matmul.h"
#include "util/bf16.h"

namespace wc {

enum class RowFormat : uint8_t { kF32, kBF16, kF16, kInt8, kFP8E4M3, kFP8E5M2, kBFP8 };

const char* RowFormatName(RowFormat format);
// int8 and fp8: one-byte codes times a row or tensor scale.
inline bool IsScaledCode(RowFormat f) {
  return f == RowFormat::kInt8 || f == RowFormat::kFP8E4M3 || f == RowFormat::kFP8E5M2;
}

struct RowsRef {
  RowFormat format = RowFormat::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes = 0;  // stride from one row to the next, in bytes
  const uint8_t* data = nullptr;
  bool row_scale = false;     // scaled codes: a bf16 scale leads each row
  float tensor_scale = 1.0f;  // scaled codes without row_scale

  RowsRef() = default;
  // Plain F32 / BF16 / F16 rows (implicit: any MatrixRef is a RowsRef).
  RowsRef(const MatrixRef& m)  // NOLINT(google-explicit-constructor)
      : format(m.dtype == DType::kF32    ? RowFormat::kF32
               : m.dtype == DType::kBF16 ? RowFormat::kBF16
                                         : RowFormat::kF16),
        rows(m.rows),
        cols(m.cols),
        row_bytes(m.row_stride * DTypeSize(m.dtype)),
        data(static_cast<const uint8_t*>(m.data)) {}

  bool empty() const { return data == nullptr; }
  // Scaled codes: the scale of row r, the bf16 leading it (row_scale) or tensor_scale.
  float RowScale(int64_t r) const {
    if (!row_scale) return tensor_scale;
    uint16_t half;
    std::memcpy(&half, data + r * row_bytes, 2);
    return BF16ToF32(half);
  }
  // Bytes of one row's payload (values, scales, exponents): what reading it from memory moves.
  int64_t PayloadBytes() const;
};

// The bytes one stored row of `cols` values takes in `format` (row_scale as in RowsRef).
int64_t RowPayloadBytes(RowFormat format, int64_t cols, bool row_scale);

}  // namespace wc
