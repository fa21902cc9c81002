// The KV cache's BFP8_B codec (bfp_kv.h).
#include "kernels/attention/bfp_kv.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace wc {

void EncodeBfp8Block(const float* x, uint8_t* exp, uint8_t* mant) {
  int shared = 0;  // largest float32 biased exponent in the block
  for (int i = 0; i < 16; ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    shared = std::max(shared, static_cast<int>((u >> 23) & 0xff));
  }
  *exp = static_cast<uint8_t>(shared);
  // Magnitude m in [0, 127] with value m * 2^(shared - 127 - 6).
  const float quantum = std::ldexp(1.0f, shared - 127 - 6);
  for (int i = 0; i < 16; ++i) {
    const uint8_t sign = std::signbit(x[i]) ? 0x80 : 0x00;
    float m = shared == 0 ? 0.0f : std::nearbyint(std::fabs(x[i]) / quantum);
    if (m > 127.0f) m = 127.0f;  // rounding up past the shared exponent saturates
    mant[i] = static_cast<uint8_t>(sign | static_cast<uint8_t>(m));
  }
}

void DecodeBfp8Block(uint8_t exp, const uint8_t* mant, float* out) {
  const float quantum = exp == 0 ? 0.0f : std::ldexp(1.0f, static_cast<int>(exp) - 127 - 6);
  for (int i = 0; i < 16; ++i) {
    const float v = static_cast<float>(mant[i] & 0x7f) * quantum;
    out[i] = (mant[i] & 0x80) ? -v : v;
  }
}

void EncodeBfp8Row(const float* x, int n, uint8_t* dst) {
  const int blocks = n / kBfp8KvBlock;
  for (int b = 0; b < blocks; ++b)
    EncodeBfp8Block(x + kBfp8KvBlock * b, dst + b, dst + blocks + kBfp8KvBlock * b);
}

void DecodeBfp8Row(const uint8_t* src, int n, float* out) {
  const int blocks = n / kBfp8KvBlock;
  for (int b = 0; b < blocks; ++b)
    DecodeBfp8Block(src[b], src + blocks + kBfp8KvBlock * b, out + kBfp8KvBlock * b);
}

}  // namespace wc
