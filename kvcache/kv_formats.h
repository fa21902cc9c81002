// The quantized KV-cache formats (issue 5) as the cache sees them: which exist, their scale modes,
// the bytes of a row, and the encoding and decoding of one row, dispatched to each format's codec
// in kernels/attention/ - beside the kernels that read its rows:
//
//   int8      int8.h    symmetric, q = round(x / s) in [-127, 127], x ~ q * s
//   fp8-e4m3  fp8.h     OCP E4M3FN (bias 7, no inf, max 448), x ~ fp8(x / s) * s
//   fp8-e5m2  fp8.h     OCP E5M2 (bias 15, IEEE-like, max 57344), x ~ fp8(x / s) * s
//   bfp8      bfp_kv.h  Tenstorrent BFP8_B: blocks of 16 values share one 8-bit exponent; each
//                       value keeps a sign and a 7-bit magnitude (1088 bytes per 32x32 tile). No
//                       scale needed.
// Each K or V row of head_dim values is encoded once, when its token is written, and read in
// place by attention. Encoded rows have the byte layouts of kernels/attention/kv_rows.h. Scales
// (int8/fp8) are per row ("token-head": one per token per KV head, amax / KVQuantMax, stored in the
// row as bf16 so 64 values cost 66 bytes) or one per tensor (calibrated, kept outside the rows).
// Values beyond a format's range saturate to its largest finite value; a zero row gets scale 0 and
// decodes to zeros; NaN/Inf inputs are refused (EncodeRow reports them).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/attention/kv_rows.h"

namespace wc {

enum class KVQuant : uint8_t { kInt8, kFP8E4M3, kFP8E5M2, kBFP8 };
enum class ScaleMode : uint8_t { kTokenHead, kTensor };

const char* KVQuantName(KVQuant q);
// The stored-row format (kernels/attention/kv_rows.h) the attention kernels read q's rows as.
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

}  // namespace wc
