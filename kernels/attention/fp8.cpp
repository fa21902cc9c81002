// The fp8 codec (fp8.h): a generic small-float rounding for both formats, their decoders and
// decoding tables.
#include "kernels/attention/fp8.h"

#include <cmath>

namespace wc {
namespace {

// Round-to-nearest-even, saturating float -> a sign/exponent/mantissa byte with `man_bits`
// mantissa bits and exponent `bias`; finite magnitudes above `max_value` become `max_value`.
// Handles subnormals.
uint8_t ToSmallFloat(float x, int man_bits, int bias, float max_value) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  float a = std::fabs(x);
  if (a >= max_value) a = max_value;  // saturate (finite inputs only)
  if (a == 0.0f) return sign;
  int e;
  std::frexp(a, &e);             // a = f * 2^e, f in [0.5, 1)
  int exp_field = e - 1 + bias;  // unbiased exponent e - 1 for 1.xxx form
  const int min_normal_exp = 1;
  // Quantum (spacing) at this exponent, subnormals share the minimum exponent's spacing.
  const int q_exp = (exp_field < min_normal_exp ? min_normal_exp : exp_field) - bias - man_bits;
  const float quantum = std::ldexp(1.0f, q_exp);
  const float steps = std::nearbyint(a / quantum);  // ties to even (default rounding mode)
  float r = steps * quantum;
  if (r > max_value) r = max_value;
  // Re-encode r exactly.
  std::frexp(r, &e);
  exp_field = e - 1 + bias;
  uint32_t mant;
  if (exp_field < min_normal_exp) {  // subnormal
    exp_field = 0;
    mant = static_cast<uint32_t>(
        std::nearbyint(r / std::ldexp(1.0f, min_normal_exp - bias - man_bits)));
  } else {
    mant = static_cast<uint32_t>(
        std::nearbyint((r / std::ldexp(1.0f, exp_field - bias) - 1.0f) * (1 << man_bits)));
  }
  return static_cast<uint8_t>(sign | exp_field << man_bits | mant);
}

float FromSmallFloat(uint8_t b, int man_bits, int bias) {
  const int exp_field = (b & 0x7f) >> man_bits;
  const int mant = b & ((1 << man_bits) - 1);
  float v = exp_field == 0
                ? std::ldexp(static_cast<float>(mant), 1 - bias - man_bits)
                : std::ldexp(1.0f + static_cast<float>(mant) / (1 << man_bits), exp_field - bias);
  return (b & 0x80) ? -v : v;
}

// The 256 values of an fp8 format, built once: decoding is a table lookup.
struct Fp8Tables {
  float e4m3[256], e5m2[256];
  Fp8Tables() {
    for (int b = 0; b < 256; ++b) {
      e4m3[b] = FP8E4M3ToF32(static_cast<uint8_t>(b));
      e5m2[b] = FP8E5M2ToF32(static_cast<uint8_t>(b));
    }
  }
};
const Fp8Tables& Tables() {
  static const Fp8Tables tables;
  return tables;
}

}  // namespace

uint8_t F32ToFP8E4M3(float x) {
  if (std::isnan(x)) return 0x7f;
  return ToSmallFloat(x, 3, 7, kFp8E4M3Max);
}

uint8_t F32ToFP8E5M2(float x) {
  if (std::isnan(x)) return 0x7f;
  return ToSmallFloat(x, 2, 15, kFp8E5M2Max);
}

float FP8E4M3ToF32(uint8_t b) {
  if ((b & 0x7f) == 0x7f) return NAN;
  return FromSmallFloat(b, 3, 7);
}

float FP8E5M2ToF32(uint8_t b) {
  const int exp_field = (b & 0x7f) >> 2;
  if (exp_field == 31) return (b & 3) ? NAN : ((b & 0x80) ? -INFINITY : INFINITY);
  return FromSmallFloat(b, 2, 15);
}

void EncodeFp8Codes(RowFormat format, const float* x, int n, float inv_scale, uint8_t* codes) {
  uint8_t (*const encode)(float) = format == RowFormat::kFP8E4M3 ? F32ToFP8E4M3 : F32ToFP8E5M2;
  for (int i = 0; i < n; ++i) codes[i] = encode(x[i] * inv_scale);
}

void DecodeFp8Codes(RowFormat format, const uint8_t* codes, int n, float scale, float* out) {
  const float* table = format == RowFormat::kFP8E4M3 ? Tables().e4m3 : Tables().e5m2;
  for (int i = 0; i < n; ++i) out[i] = table[codes[i]] * scale;
}

}  // namespace wc
