// The fp8 KV formats' codec (OCP 8-bit floats, issue 5): the element conversions and the row of
// codes that the KV cache writes. Layout of a row: kv_rows.h; the scale (per row or per tensor,
// amax / the format's max) is chosen by kvcache/kv_formats.cpp, which calls these.
//
//   E4M3 (E4M3FN)  sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, 0x7f / 0xff
//                  NaN; largest finite 448; subnormals down to 2^-9.
//   E5M2           sign, 5 exponent bits (bias 15), 2 mantissa bits; IEEE-like (infinities,
//                  NaNs); largest finite 57344; subnormals down to 2^-16.
// Encoding rounds to nearest even and saturates: a finite value beyond the largest finite one
// becomes it (never Inf or NaN); NaN encodes as 0x7f. Every finite code is exactly a float32 (and
// a bf16), which the attention kernels rely on: they read the codes in place, widened to f32
// (row_sources-inl.h) or to bf16 by table (x86_bf16_widen.h, decode_attention_bf16dot.cpp).
#pragma once

#include <cstdint>

#include "kernels/attention/kv_rows.h"

namespace wc {

constexpr float kFp8E4M3Max = 448.0f;
constexpr float kFp8E5M2Max = 57344.0f;

// Element conversions: round to nearest even, saturating.
uint8_t F32ToFP8E4M3(float x);
uint8_t F32ToFP8E5M2(float x);
float FP8E4M3ToF32(uint8_t b);
float FP8E5M2ToF32(uint8_t b);

// A row of codes in `format` (RowFormat::kFP8E4M3 or kFP8E5M2): codes[i] = fp8(x[i] * inv_scale)
// for i < n, inv_scale = 1 / scale (0 for an all-zero row: all codes +0).
void EncodeFp8Codes(RowFormat format, const float* x, int n, float inv_scale, uint8_t* codes);
// out[i] = value(codes[i]) * scale, i < n (a table lookup per code): the scalar decoder, the
// oracle the kernels are tested against.
void DecodeFp8Codes(RowFormat format, const uint8_t* codes, int n, float scale, float* out);

}  // namespace wc
