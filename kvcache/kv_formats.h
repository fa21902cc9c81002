// Row codecs of the quantized KV-cache formats (issue 5): each K or V row of head_dim values is
// quantized once, when its token is written, and decoded chunk by chunk inside attention.
//
//   int8      symmetric, q = round(x / s) in [-127, 127], x ~ q * s
//   fp8-e4m3  OCP E4M3FN (bias 7, no inf, max 448), x ~ fp8(x / s) * s
//   fp8-e5m2  OCP E5M2 (bias 15, IEEE-like, max 57344), x ~ fp8(x / s) * s
//   bfp8      Tenstorrent BFP8_B: blocks of 16 values share one 8-bit exponent; each value keeps a
//             sign and a 7-bit magnitude (1088 bytes per 32x32 tile). No scale needed.
// Encoded rows have the byte layouts of kernels/kv_rows.h, which the attention kernels read in
// place. Scales (int8/fp8) are per row ("token-head": one per token per KV head, stored in the row
// as bf16 so 64 values cost 66 bytes) or one per tensor (calibrated, kept outside the rows). Values
// beyond a format's range saturate to its largest finite value; a zero row gets scale 0 and decodes
// to zeros; NaN/Inf inputs are refused by the caller (EncodeRow reports them).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/kv_rows.h"

namespace wc {

enum class KVQuant : uint8_t { kInt8, kFP8E4M3, kFP8E5M2, kBFP8 };
enum class ScaleMode : uint8_t { kTokenHead, kTensor };

const char* KVQuantName(KVQuant q);
// The stored-row format (kernels/kv_rows.h) the attention kernels read q's rows as.
RowFormat RowFormatOf(KVQuant q);
float KVQuantMax(KVQuant q);  // largest finite magnitude of the element format (127 for int8)

// Bytes one encoded row of `head_dim` values takes. bfp8 needs head_dim % 16 == 0.
int64_t EncodedRowBytes(KVQuant q, ScaleMode mode, int head_dim);

// Encodes x[0:head_dim] into dst[0:EncodedRowBytes). `tensor_scale` is used in kTensor mode (the
// dequantization multiplier, amax / KVQuantMax). Returns false, writing nothing meaningful, if x
// holds NaN or Inf.
bool EncodeRow(KVQuant q, ScaleMode mode, float tensor_scale, const float* x, int head_dim,
               uint8_t* dst);
// Decodes one row into out[0:head_dim] (f32).
void DecodeRow(KVQuant q, ScaleMode mode, float tensor_scale, const uint8_t* src, int head_dim,
               float* out);

// Element conversions (exposed for tests): round to nearest even, saturating.
uint8_t F32ToFP8E4M3(float x);
uint8_t F32ToFP8E5M2(float x);
float FP8E4M3ToF32(uint8_t b);
float FP8E5M2ToF32(uint8_t b);

// One BFP8_B block of 16 values: exp (shared, biased like float32), mant[16] = sign << 7 | mag.
void EncodeBfp8Block(const float* x, uint8_t* exp, uint8_t* mant);
void DecodeBfp8Block(uint8_t exp, const uint8_t* mant, float* out);

}  // namespace wc
