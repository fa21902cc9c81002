#include "kvcache/kv_formats.h"

#include <cmath>
#include <cstring>

#include "util/bf16.h"
#include "util/error.h"

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

float RowAmax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

uint16_t ScaleToBF16(float amax, float qmax) {
  return F32ToBF16(amax / qmax);
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

const char* KVQuantName(KVQuant q) {
  switch (q) {
    case KVQuant::kInt8:
      return "int8";
    case KVQuant::kFP8E4M3:
      return "fp8-e4m3";
    case KVQuant::kFP8E5M2:
      return "fp8-e5m2";
    case KVQuant::kBFP8:
      return "bfp8";
  }
  return "?";
}

RowFormat RowFormatOf(KVQuant q) {
  switch (q) {
    case KVQuant::kInt8:
      return RowFormat::kInt8;
    case KVQuant::kFP8E4M3:
      return RowFormat::kFP8E4M3;
    case KVQuant::kFP8E5M2:
      return RowFormat::kFP8E5M2;
    case KVQuant::kBFP8:
      return RowFormat::kBFP8;
  }
  return RowFormat::kF32;
}

float KVQuantMax(KVQuant q) {
  switch (q) {
    case KVQuant::kInt8:
      return 127.0f;
    case KVQuant::kFP8E4M3:
      return 448.0f;
    case KVQuant::kFP8E5M2:
      return 57344.0f;
    case KVQuant::kBFP8:
      return 0.0f;  // block-scaled: no fixed maximum
  }
  return 0.0f;
}

uint8_t F32ToFP8E4M3(float x) {
  if (std::isnan(x)) return 0x7f;
  return ToSmallFloat(x, 3, 7, 448.0f);
}

uint8_t F32ToFP8E5M2(float x) {
  if (std::isnan(x)) return 0x7f;
  return ToSmallFloat(x, 2, 15, 57344.0f);
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

int64_t EncodedRowBytes(KVQuant q, ScaleMode mode, int head_dim) {
  if (q == KVQuant::kBFP8) {
    WC_CHECK(head_dim % 16 == 0, "bfp8 rows need head_dim % 16 == 0");
    return head_dim + head_dim / 16;
  }
  return head_dim + (mode == ScaleMode::kTokenHead ? 2 : 0);
}

bool EncodeRow(KVQuant q, ScaleMode mode, float tensor_scale, const float* x, int head_dim,
               uint8_t* dst) {
  for (int i = 0; i < head_dim; ++i)
    if (!std::isfinite(x[i])) return false;
  if (q == KVQuant::kBFP8) {
    const int blocks = head_dim / 16;
    for (int b = 0; b < blocks; ++b) EncodeBfp8Block(x + 16 * b, dst + b, dst + blocks + 16 * b);
    return true;
  }
  float scale = tensor_scale;
  uint8_t* values = dst;
  if (mode == ScaleMode::kTokenHead) {
    const uint16_t s16 = ScaleToBF16(RowAmax(x, head_dim), KVQuantMax(q));
    std::memcpy(dst, &s16, 2);
    scale = BF16ToF32(s16);  // quantize with exactly the scale decoding will use
    values = dst + 2;
  }
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;  // an all-zero row: scale 0, zeros
  for (int i = 0; i < head_dim; ++i) {
    const float y = x[i] * inv;
    switch (q) {
      case KVQuant::kInt8: {
        const float r = std::nearbyint(std::max(-127.0f, std::min(127.0f, y)));
        values[i] = static_cast<uint8_t>(static_cast<int8_t>(r));
        break;
      }
      case KVQuant::kFP8E4M3:
        values[i] = F32ToFP8E4M3(y);
        break;
      case KVQuant::kFP8E5M2:
        values[i] = F32ToFP8E5M2(y);
        break;
      case KVQuant::kBFP8:
        break;
    }
  }
  return true;
}

void DecodeRow(KVQuant q, ScaleMode mode, float tensor_scale, const uint8_t* src, int head_dim,
               float* out) {
  if (q == KVQuant::kBFP8) {
    const int blocks = head_dim / 16;
    for (int b = 0; b < blocks; ++b) DecodeBfp8Block(src[b], src + blocks + 16 * b, out + 16 * b);
    return;
  }
  float scale = tensor_scale;
  const uint8_t* values = src;
  if (mode == ScaleMode::kTokenHead) {
    uint16_t s16;
    std::memcpy(&s16, src, 2);
    scale = BF16ToF32(s16);
    values = src + 2;
  }
  switch (q) {
    case KVQuant::kInt8:
      for (int i = 0; i < head_dim; ++i)
        out[i] = static_cast<float>(static_cast<int8_t>(values[i])) * scale;
      break;
    case KVQuant::kFP8E4M3:
    case KVQuant::kFP8E5M2: {
      const float* table = q == KVQuant::kFP8E4M3 ? Tables().e4m3 : Tables().e5m2;
      for (int i = 0; i < head_dim; ++i) out[i] = table[values[i]] * scale;
      break;
    }
    case KVQuant::kBFP8:
      break;
  }
}

}  // namespace wc
