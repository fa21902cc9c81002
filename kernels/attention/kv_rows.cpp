#include "kernels/attention/kv_rows.h"

#include "util/error.h"

namespace wc {

const char* RowFormatName(RowFormat format) {
  switch (format) {
    case RowFormat::kF32:
      return "f32";
    case RowFormat::kBF16:
      return "bf16";
    case RowFormat::kF16:
      return "f16";
    case RowFormat::kInt8:
      return "int8";
    case RowFormat::kFP8E4M3:
      return "fp8-e4m3";
    case RowFormat::kFP8E5M2:
      return "fp8-e5m2";
    case RowFormat::kBFP8:
      return "bfp8";
  }
  return "?";
}

int64_t RowPayloadBytes(RowFormat format, int64_t cols, bool row_scale) {
  switch (format) {
    case RowFormat::kF32:
      return 4 * cols;
    case RowFormat::kBF16:
    case RowFormat::kF16:
      return 2 * cols;
    case RowFormat::kInt8:
    case RowFormat::kFP8E4M3:
    case RowFormat::kFP8E5M2:
      return cols + (row_scale ? 2 : 0);
    case RowFormat::kBFP8:
      WC_CHECK(cols % 16 == 0, "bfp8 rows need cols % 16 == 0, got ", cols);
      return cols + cols / 16;
  }
  return 0;
}

int64_t RowsRef::PayloadBytes() const {
  return RowPayloadBytes(format, cols, row_scale);
}

}  // namespace wc
