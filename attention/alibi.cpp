#include "attention/alibi.h"

#include <cmath>

#include "util/bf16.h"
#include "util/error.h"

namespace wc {
namespace {

float RoundBF16(float x) {
  return BF16ToF32(F32ToBF16(x));
}

}  // namespace

float AlibiBias::At(int h, int64_t pos) const {
  const float p = static_cast<float>(pos);
  if (!bf16) return slopes[h] * p;
  // bf16 x bf16 is exact in f32 (8-bit significands), then rounded once, as PyTorch's bf16 mul.
  return RoundBF16(RoundBF16(slopes[h]) * RoundBF16(p));
}

std::vector<float> AlibiSlopes(int n_heads) {
  WC_CHECK(n_heads >= 1, "ALiBi needs a head, got ", n_heads);
  int closest = 1;
  while (closest * 2 <= n_heads) closest *= 2;
  // torch.tensor(2 ** (-(2 ** -(log2(c) - 3))), dtype=float32) ** arange(1, c + 1), in float32.
  auto powers = [](int c, int first, int step, int n, std::vector<float>* out) {
    const float base = static_cast<float>(std::pow(2.0, -std::pow(2.0, -(std::log2(c) - 3))));
    for (int i = 0; i < n; ++i)
      out->push_back(std::pow(base, static_cast<float>(first + i * step)));
  };
  std::vector<float> slopes;
  powers(closest, 1, 1, closest, &slopes);
  if (closest != n_heads)  // the extra heads: odd powers of the next power of two's base
    powers(2 * closest, 1, 2, std::min(closest, n_heads - closest), &slopes);
  return slopes;
}

}  // namespace wc
