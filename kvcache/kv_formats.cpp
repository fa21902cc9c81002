// The KV cache's side of its formats (kv_formats.h): names, row bytes, the choice of scale, and
// the dispatch to each format's codec in kernels/ (int8.h, fp8.h, bfp_kv.h).
#include "kvcache/kv_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention/bfp_kv.h"
#include "kernels/attention/fp8.h"
#include "kernels/attention/int8.h"
#include "util/bf16.h"
#include "util/error.h"

namespace wc {
namespace {

float RowAmax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

uint16_t ScaleToBF16(float amax, float qmax) {
  return F32ToBF16(amax / qmax);
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
      return kInt8CodeMax;
    case KVQuant::kFP8E4M3:
      return kFp8E4M3Max;
    case KVQuant::kFP8E5M2:
      return kFp8E5M2Max;
    case KVQuant::kBFP8:
      return 0.0f;  // block-scaled: no fixed maximum
  }
  return 0.0f;
}

int64_t EncodedRowBytes(KVQuant q, ScaleMode mode, int head_dim) {
  if (q == KVQuant::kBFP8) {
    WC_CHECK(head_dim % kBfp8KvBlock == 0, "bfp8 rows need head_dim % 16 == 0");
    return head_dim + head_dim / kBfp8KvBlock;
  }
  return head_dim + (mode == ScaleMode::kTokenHead ? 2 : 0);
}

bool EncodeRow(KVQuant q, ScaleMode mode, float tensor_scale, const float* x, int head_dim,
               uint8_t* dst) {
  for (int i = 0; i < head_dim; ++i)
    if (!std::isfinite(x[i])) return false;
  if (q == KVQuant::kBFP8) {
    EncodeBfp8Row(x, head_dim, dst);
    return true;
  }
  float scale = tensor_scale;
  uint8_t* codes = dst;
  if (mode == ScaleMode::kTokenHead) {
    const uint16_t s16 = ScaleToBF16(RowAmax(x, head_dim), KVQuantMax(q));
    std::memcpy(dst, &s16, 2);
    scale = BF16ToF32(s16);  // quantize with exactly the scale decoding will use
    codes = dst + 2;
  }
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;  // an all-zero row: scale 0, zeros
  if (q == KVQuant::kInt8)
    EncodeInt8Codes(x, head_dim, inv, codes);
  else
    EncodeFp8Codes(RowFormatOf(q), x, head_dim, inv, codes);
  return true;
}

void DecodeRow(KVQuant q, ScaleMode mode, float tensor_scale, const uint8_t* src, int head_dim,
               float* out) {
  if (q == KVQuant::kBFP8) return DecodeBfp8Row(src, head_dim, out);
  float scale = tensor_scale;
  const uint8_t* codes = src;
  if (mode == ScaleMode::kTokenHead) {
    uint16_t s16;
    std::memcpy(&s16, src, 2);
    scale = BF16ToF32(s16);
    codes = src + 2;
  }
  if (q == KVQuant::kInt8)
    DecodeInt8Codes(codes, head_dim, scale, out);
  else
    DecodeFp8Codes(RowFormatOf(q), codes, head_dim, scale, out);
}

}  // namespace wc
