#include "kernels/gemm/weight_format.h"

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
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kF16, WeightFormat::kBF16,
                         WeightFormat::kBfp8, WeightFormat::kBfp4})
    if (name == WeightFormatName(f)) return f;
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
