// The fp8 and BFP8 codes widened to bf16 in AVX-512 registers, for the kernels of
// decode_attention_bf16dot.cpp: the formats' decoders on the bf16 dot-product path (their
// encoders are fp8.h and bfp_kv.h). Include it inside that file's target region (AVX-512 BF16
// and VBMI): everything here is compiled for it.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/attention/kv_rows.h"
#include "kernels/attention/x86_avx512.h"
#include "util/bf16.h"

namespace wc {
namespace x86 {

// The kernels read E4M3 through its f16 bit pattern (its value times 2^-8), as the f32 kernels
// do; the row scale carries the 2^8 back.
inline float CodeFactor(RowFormat f) {
  return f == RowFormat::kFP8E4M3 ? 256.0f : 1.0f;
}

// The scales of rows [p, p + 16) (lanes past m.rows: 0): the row or tensor scale times the code
// factor, or 1 for BFP8 (its exponents are widened into the values).
inline __m512 RowScales(const RowsRef& m, int64_t p) {
  if (m.format == RowFormat::kBFP8)
    return _mm512_maskz_mov_ps(FirstLanes(m.rows - p), _mm512_set1_ps(1.0f));
  return RowScales16(m, p, CodeFactor(m.format));
}

// The bf16 of every magnitude code m < 128 of one fp8 format (E4M3 as its f16 bit pattern), or of
// the integer m (BFP8's magnitudes), split into high and low bytes: two 128-entry tables, one
// vpermi2b each; the lookup ignores the sign bit, which is ORed into the high byte.
struct CodeTables {
  alignas(64) uint8_t hi[128];
  alignas(64) uint8_t lo[128];
};
struct AllTables {
  CodeTables e4m3, e5m2, integers;
  AllTables() {
    for (int m = 0; m < 128; ++m) {
      const uint16_t i = F32ToBF16(static_cast<float>(m));  // exact: 7 bits
      integers.hi[m] = static_cast<uint8_t>(i >> 8);
      integers.lo[m] = static_cast<uint8_t>(i & 0xff);
      const uint16_t a = F32ToBF16(F16ToF32(static_cast<uint16_t>(m << 7)));  // exact
      const uint16_t b = F32ToBF16(F16ToF32(static_cast<uint16_t>(m << 8)));
      e4m3.hi[m] = static_cast<uint8_t>(a >> 8);
      e4m3.lo[m] = static_cast<uint8_t>(a & 0xff);
      e5m2.hi[m] = static_cast<uint8_t>(b >> 8);
      e5m2.lo[m] = static_cast<uint8_t>(b & 0xff);
    }
  }
};
inline const CodeTables& TablesFor(RowFormat f) {
  static const AllTables tables;
  return f == RowFormat::kFP8E4M3   ? tables.e4m3
         : f == RowFormat::kFP8E5M2 ? tables.e5m2
                                    : tables.integers;
}

// 64 values of a row as 64 bf16 in two vectors: w0 holds columns 16j + i and w1 columns
// 16j + 8 + i of 128-bit block j, i < 8 (the in-block order of the byte unpacks).
//   fp8: the codes by table. Exact.
//   BFP8: the magnitudes m by table (bf16 of the integer), the sign ORed, then the block's shared
//   exponent e added to the exponent field: bf16(+-m * 2^(e - 133)), BFP8_B's value. 128-bit
//   block j of the vectors is BFP8 block c / 16 + j. Exact where the value is a normal bf16;
//   below 2^-126 (e < 7 only) it is 0, as vdpbf16ps reads every subnormal, and above the bf16
//   range (e = 255: Inf and NaN's exponent, which the encoder never writes) +-Inf.
struct Widen {
  __m512i hi0, hi1, lo0, lo1, sign;
  int64_t code_offset = 0;  // fp8: bytes before a row's codes (its bf16 scale)
  int64_t blocks = 0;       // BFP8: cols / 16 (the exponents lead the row); 0 for fp8
  explicit Widen(const RowsRef& m) {
    const CodeTables& t = TablesFor(m.format);
    hi0 = _mm512_load_si512(t.hi);
    hi1 = _mm512_load_si512(t.hi + 64);
    lo0 = _mm512_load_si512(t.lo);
    lo1 = _mm512_load_si512(t.lo + 64);
    sign = _mm512_set1_epi8(static_cast<char>(0x80));
    if (m.format == RowFormat::kBFP8) {
      blocks = m.cols / 16;
    } else {
      code_offset = m.row_scale ? 2 : 0;
    }
  }
  // The high and low bytes of the 64 codes' bf16.
  inline __attribute__((always_inline)) void Bytes(__m512i codes, __m512i* hi, __m512i* lo) const {
    // hi | (codes & 0x80)
    *hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, codes, hi1), codes, sign, 0xf8);
    *lo = _mm512_permutex2var_epi8(lo0, codes, lo1);
  }
  inline __attribute__((always_inline)) void Words(const uint8_t* p, __m512i* w0,
                                                   __m512i* w1) const {
    __m512i hi, lo;
    Bytes(_mm512_loadu_si512(p), &hi, &lo);
    *w0 = _mm512_unpacklo_epi8(lo, hi);
    *w1 = _mm512_unpackhi_epi8(lo, hi);
  }
  // Columns [c, c + 64) of the row starting at `row`.
  inline __attribute__((always_inline)) void Row(const uint8_t* row, int64_t c, __m512i* w0,
                                                 __m512i* w1) const {
    if (blocks == 0) return Words(row + code_offset + c, w0, w1);
    Words(row + blocks + c, w0, w1);
    int32_t four;  // the exponents of blocks c / 16 .. c / 16 + 3
    std::memcpy(&four, row + c / 16, 4);
    // e: 16-bit lanes of 128-bit block j = exponent byte j.
    const __m512i spread = _mm512_set_epi64(
        0x8003800380038003LL, 0x8003800380038003LL, 0x8002800280028002LL, 0x8002800280028002LL,
        0x8001800180018001LL, 0x8001800180018001LL, 0x8000800080008000LL, 0x8000800080008000LL);
    const __m512i e = _mm512_shuffle_epi8(_mm512_set1_epi32(four), spread);
    const __m512i delta = _mm512_slli_epi16(_mm512_sub_epi16(e, _mm512_set1_epi16(133)), 7);
    const __m512i magnitude = _mm512_set1_epi16(0x7fff);
    if (_mm512_cmplt_epu16_mask(_mm512_sub_epi16(e, _mm512_set1_epi16(7)),
                                _mm512_set1_epi16(248)) == 0xffffffffu) {
      // Every e in [7, 254]: the new exponent field, 127..133 + e - 133, stays in [1, 254].
      *w0 = _mm512_mask_add_epi16(*w0, _mm512_test_epi16_mask(*w0, magnitude), *w0, delta);
      *w1 = _mm512_mask_add_epi16(*w1, _mm512_test_epi16_mask(*w1, magnitude), *w1, delta);
      return;
    }
    Rare(w0, e, delta);
    Rare(w1, e, delta);
  }
  // Exponents outside [7, 254]: lane by lane, a field below 1 gives +-0 and above 254 +-Inf.
  inline void Rare(__m512i* w, __m512i e, __m512i delta) const {
    const __mmask32 nonzero = _mm512_test_epi16_mask(*w, _mm512_set1_epi16(0x7fff));
    const __m512i field =
        _mm512_add_epi16(_mm512_and_si512(_mm512_srli_epi16(*w, 7), _mm512_set1_epi16(0xff)),
                         _mm512_sub_epi16(e, _mm512_set1_epi16(133)));  // signed, in [-133, 255]
    const __m512i signs = _mm512_and_si512(*w, _mm512_set1_epi16(static_cast<int16_t>(0x8000)));
    const __mmask32 under = _mm512_cmplt_epi16_mask(field, _mm512_set1_epi16(1));
    const __mmask32 over = _mm512_cmpgt_epi16_mask(field, _mm512_set1_epi16(254));
    __m512i out = _mm512_add_epi16(*w, delta);
    out = _mm512_mask_mov_epi16(out, nonzero & under, signs);
    out = _mm512_mask_mov_epi16(out, nonzero & over,
                                _mm512_or_si512(signs, _mm512_set1_epi16(0x7f80)));
    *w = _mm512_mask_mov_epi16(out, ~nonzero, *w);
  }
};

}  // namespace x86
}  // namespace wc
