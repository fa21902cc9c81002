// The KV cache's block-float format, Tenstorrent BFP8_B on K and V rows (issue 5): the codec that
// writes a row and the scalar decoder the attention kernels are tested against. The kernels read
// the rows in place (row_sources-inl.h; x86_bf16_widen.h and decode_attention_bf16dot.cpp add a
// block's exponent to its magnitudes widened to bf16).
//
// Row layout (kv_rows.h): a row of n values (n % 16 == 0) is n / 16 blocks of 16 consecutive
// values; first the n / 16 shared exponents E (biased like float32), then the n codes, block by
// block, code = sign << 7 | m, value = (-1)^sign * m * 2^(E - 127 - 6). No scale.
//
// Encoding a block: E = the largest float32 exponent field of its 16 values; each value's
// magnitude m = round-to-nearest-even(|x| / 2^(E - 133)), computed exactly on the float value,
// saturating at 127 (nothing carries into E); E = 0 (an all-zero or all-denormal block) gives
// m = 0. The sign is kept even when m = 0 (a negative value too small for the block decodes to
// -0.0). Callers pass finite values (kvcache's EncodeRow refuses NaN and Inf first).
//
// Why not the weight codec (bfp_weights.h)? That one reproduces tt-metal's host packer byte for
// byte, so that packed weights match what tt-metal uploads: it shifts the 24-bit significand
// right to the block's exponent, truncating, and rounds what is left (a value that lay above a
// tie but lost those bits rounds to even), encodes float32 denormals as 0 (here, in a block whose
// E is small, a denormal keeps its magnitude), clears the sign of a zero code, and lays blocks
// out in 32x32 tiles of 16x16 faces rather than along one row. The two agree on most values but
// not on every bit, and the KV rows are pinned bit for bit (tests/kvcache/, the committed
// transcripts tests/transcripts/kv_bfp8_*.txt), so this codec stays as it is; the decoders
// compute the same value, apart from the sign of zero.
#pragma once

#include <cstdint>

namespace wc {

constexpr int kBfp8KvBlock = 16;  // values sharing one exponent

// One block of 16 values: *exp = E, mant[16] = sign << 7 | m.
void EncodeBfp8Block(const float* x, uint8_t* exp, uint8_t* mant);
void DecodeBfp8Block(uint8_t exp, const uint8_t* mant, float* out);

// A row of n values (n % 16 == 0) in the layout above: dst[0, n / 16) exponents, then n codes.
void EncodeBfp8Row(const float* x, int n, uint8_t* dst);
void DecodeBfp8Row(const uint8_t* src, int n, float* out);

}  // namespace wc
