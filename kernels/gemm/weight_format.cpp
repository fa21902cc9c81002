#include "kernels/gemm/weight_format.h"

#include "kernels/gemm/format_table.h"

namespace wc {

const char* WeightFormatName(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32:
      return "f32";
    case WeightFormat::kF16:
      return "f16";
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kBfp8:
      return "bfp8";
    case WeightFormat::kBfp4:
      return "bfp4";
    default:
      return GgmlQuantName(QuantOf(f));
  }
}

std::optional<WeightFormat> WeightFormatFromName(std::string_view name) {
  int n = 0;
  const WeightFormatRow* rows = FormatTable(&n);
  for (int i = 0; i < n; ++i)
    if (rows[i].convertible && name == WeightFormatName(rows[i].format)) return rows[i].format;
  return std::nullopt;
}

int64_t WeightFormatBytes(WeightFormat f, int64_t rows, int64_t cols) {
  if (IsBfp(f)) return BfpLayout{BfpOf(f), rows, cols}.bytes();
  if (IsGgmlQuant(f)) {
    const GgmlQuant q = QuantOf(f);
    return (rows + QuantPanels::kGroupRows - 1) / QuantPanels::kGroupRows *
           (cols / GgmlQuantBlockValues(q)) * QuantGroupBlockBytes(q);
  }
  const int64_t panel_rows = (rows + 31) / 32 * 32;
  switch (f) {
    case WeightFormat::kF32:
      return panel_rows * cols * 4;
    case WeightFormat::kF16:
      return panel_rows * cols * 2;
    default:  // bf16: columns padded to 32 (gemm.h's order runs blocks of 32 k)
      return panel_rows * ((cols + 31) / 32 * 32) * 2;
  }
}

}  // namespace wc
