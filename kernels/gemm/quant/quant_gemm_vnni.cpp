// The quantized GEMM on AVX-512 VNNI (quant_gemm_x86.h): vpdpbusd multiplies 4 unsigned code bytes
// by 4 signed activation bytes and adds the 4 products into a 32-bit lane in one instruction, where
// AVX2 takes vpmaddubsw + vpmaddwd + vpaddd (quant_gemm_avx2.cpp), and a 512-bit register holds
// two row groups: lanes 0-7 are group g's rows, lanes 8-15 group g + 1's, each lane 4 consecutive
// codes of its row (quant_panels.h), so one broadcast of 4 activation bytes feeds 16 rows. Like
// the AVX2 many-token kernel (quant_gemm_avx2_expanded.cpp), each pair of group blocks is expanded
// once per chunk of tokens into unsigned 8-bit codes in L1 and multiplied by every token of the
// chunk from there.
//
// Exactness. Every integer sum is the contract's (quant_gemm.h) and computed without overflow:
//  - Q8_0's signed codes w become unsigned bytes w + 128 (one xor), and sum (w + 128) x - 128
//    sum x = sum w x, with sum x the activation block's code sum the quantizer keeps: exact for
//    every byte, -128 included.
//  - The 4- to 6-bit codes are unsigned already; a K type's sub-block sums are 32-bit
//    (vpdpbusd never saturates, unlike vpmaddubsw's 16-bit pairs) and are multiplied by their
//    scale with vpmulld.
// Integer addition is associative, so the sums equal the AVX2 and portable kernels' in any order,
// and the float steps are the contract's in its order: the bits are the other kernels', on every
// token count, row range, thread count and CPU.
//
// Loop order, per thread (its row groups, in pairs): token chunks, then group pairs, then segments
// of blocks in k order (each block pair expanded once), then token tiles of 8 over the segment's
// blocks with their 16-row accumulators in registers (in a small buffer between segments).
//
// The same loop runs block-float matrices with int8 activations (bfp_int8.h): a half tile (16
// rows x 32 k, one scale) is a Q8_0 block pair once expanded - bfp8's bytes as they lie, bfp4's
// nibbles sign-extended and shifted by their k's count - so its sums and float steps are Q8_0's
// with d = the half tile's scale in every lane.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/gemm/bfp/bfp_int8.h"
#include "kernels/gemm/bfp/gemm_bfp.h"
#include "kernels/gemm/gemm_schedule.h"
#include "kernels/gemm/quant/quant_gemm_x86.h"

// Not quant_avx2-inl.h: its inline helpers are compiled for AVX2 in the AVX2 kernels' files, and
// one compiled here for AVX-512 could be the copy the linker keeps for both.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")

namespace wc::x86 {
namespace {

constexpr int kR = QuantPanels::kGroupRows;  // rows a group holds; a register holds 2 groups
constexpr int kTile = 8;                     // tokens a tile holds in registers
// A chunk's activation codes (about 1 MiB) and a segment's expanded block pairs (about 16 KiB, in
// L1 while every tile of the chunk runs over them), as the AVX2 many-token kernel sizes them.
constexpr int64_t kChunkBytes = 1 << 20;
constexpr int64_t kSegmentBytes = 16 << 10;

// 32 bytes at a (group g) in lanes 0-7 and at b (group g + 1) in lanes 8-15.
inline __m512i Load2(const uint8_t* a, const uint8_t* b) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}

// 8 bytes at a then 8 at b: one byte per row of the pair.
inline __m128i Bytes2(const uint8_t* a, const uint8_t* b) {
  return _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)),
                            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
}

// The 8 f16 fields at a and the 8 at b, as the pair's 16 rows in f32 (exact).
inline __m512 Halves2(const uint8_t* a, const uint8_t* b) {
  return _mm512_cvtph_ps(_mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1));
}

// 4 activation bytes at p in every 32-bit lane.
inline __m512i Bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Each row's byte as a 32-bit lane holding it twice as 16-bit halves (vpmaddwd factors against two
// 16-bit activation sums), unsigned or signed.
inline __m512i PairsU8(__m128i bytes) {
  const __m512i s = _mm512_cvtepu8_epi32(bytes);
  return _mm512_or_si512(s, _mm512_slli_epi32(s, 16));
}

// Rows' bits as 0x10 in each byte where `bit` is set in h (a 5th code bit).
inline __m512i FifthBit(__m512i h, __m512i bit) {
  return _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(h, bit), _mm512_set1_epi8(0x10));
}

// Q5_0 / Q5_1: bits [shift, shift + 4) of each row's 32-bit qh word as byte b of the row's lane set
// to 0x10 when bit shift + b is (quant_avx2-inl.h's FifthBits, 512 bits wide).
inline __m512i FifthBits4(__m512i qh, int shift) {
  const __m512i spread =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12));
  const __m512i b = _mm512_shuffle_epi8(_mm512_srl_epi32(qh, _mm_cvtsi32_si128(shift)), spread);
  return FifthBit(b, _mm512_set1_epi32(0x08040201));
}

// One block pair expanded, as vectors at e (Layout<T>'s offsets). q[i]: lane r = row r's codes of
// the block's values 4 i .. 4 i + 3 as unsigned bytes (Q8_0: w + 128); sc[j]: sub-block j's scale
// as a 32-bit lane (K types); mins[j]: Q4_K / Q5_K lane r = (min_j, min_j), against the
// activations' 16-value sums 2 j, 2 j + 1; Q6_K lane r = (sc_2j, sc_2j+1) against the same; d, m:
// the f16 fields as f32.
template <GgmlQuant T>
struct Layout {
  static constexpr int kVectors = IsKQuant(T) ? 64 : 8;
  static constexpr int kSubs = T == GgmlQuant::kQ6_K ? 16 : IsKQuant(T) ? 8 : 0;
  static constexpr int kSc = kVectors;
  static constexpr int kMins = kSc + kSubs;
  static constexpr int kD = kMins + (IsKQuant(T) ? 8 : 0);
  static constexpr int kM = kD + 1;
  static constexpr int kStride = kM + 1;  // vectors a block pair takes
};

template <GgmlQuant T>
void Expand(const uint8_t* a, const uint8_t* b, __m512i* e) {
  using L = Layout<T>;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i* q = e;
  auto d = reinterpret_cast<__m512*>(e + L::kD);
  auto m = reinterpret_cast<__m512*>(e + L::kM);
  *d = Halves2(a, b);
  *m = _mm512_setzero_ps();
  if constexpr (T == GgmlQuant::kQ8_0) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int v = 0; v < 8; ++v)
      q[v] = _mm512_xor_si512(Load2(a + 16 + 32 * v, b + 16 + 32 * v), flip);
  } else if constexpr (!IsKQuant(T)) {
    constexpr bool kQ5 = T == GgmlQuant::kQ5_0 || T == GgmlQuant::kQ5_1;
    constexpr bool kMin = T == GgmlQuant::kQ4_1 || T == GgmlQuant::kQ5_1;
    constexpr int kCodes = QuantGroupCodesOffset(T);
    if constexpr (kMin) *m = Halves2(a + 16, b + 16);
    __m512i qh = _mm512_setzero_si512();
    if constexpr (kQ5) qh = Load2(a + (kMin ? 32 : 16), b + (kMin ? 32 : 16));
    for (int v = 0; v < 4; ++v) {
      const __m512i raw = Load2(a + kCodes + 32 * v, b + kCodes + 32 * v);
      q[v] = _mm512_and_si512(raw, m4);
      q[4 + v] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
      if constexpr (kQ5) {
        q[v] = _mm512_or_si512(q[v], FifthBits4(qh, 4 * v));
        q[4 + v] = _mm512_or_si512(q[4 + v], FifthBits4(qh, 16 + 4 * v));
      }
    }
  } else if constexpr (T == GgmlQuant::kQ4_K || T == GgmlQuant::kQ5_K) {
    constexpr bool kQ5 = T == GgmlQuant::kQ5_K;
    *m = Halves2(a + 16, b + 16);
    for (int j = 0; j < 8; ++j) {
      e[L::kSc + j] = _mm512_cvtepu8_epi32(Bytes2(a + 32 + 8 * j, b + 32 + 8 * j));
      e[L::kMins + j] = PairsU8(Bytes2(a + 96 + 8 * j, b + 96 + 8 * j));
    }
    const int codes = kQ5 ? 416 : 160;
    for (int c = 0; c < 4; ++c)
      for (int v = 0; v < 8; ++v) {
        const int o = codes + 32 * (8 * c + v);
        const __m512i raw = Load2(a + o, b + o);
        __m512i lo = _mm512_and_si512(raw, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        if constexpr (kQ5) {
          const __m512i h = Load2(a + 160 + 32 * v, b + 160 + 32 * v);
          lo = _mm512_or_si512(lo, FifthBit(h, _mm512_set1_epi8(static_cast<char>(1 << (2 * c)))));
          hi = _mm512_or_si512(hi,
                               FifthBit(h, _mm512_set1_epi8(static_cast<char>(1 << (2 * c + 1)))));
        }
        q[16 * c + v] = lo;
        q[16 * c + 8 + v] = hi;
      }
  } else {  // Q6_K
    const __m512i m3 = _mm512_set1_epi8(0x03);
    for (int j = 0; j < 16; ++j)
      e[L::kSc + j] = _mm512_cvtepi8_epi32(Bytes2(a + 16 + 8 * j, b + 16 + 8 * j));
    for (int i = 0; i < 8; ++i) {  // (sc_2i, sc_2i+1) as 16-bit halves
      const __m512i lo = _mm512_cvtepi8_epi32(Bytes2(a + 16 + 16 * i, b + 16 + 16 * i));
      const __m512i hi = _mm512_cvtepi8_epi32(Bytes2(a + 24 + 16 * i, b + 24 + 16 * i));
      e[L::kMins + i] = _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(0xFFFF)),
                                        _mm512_slli_epi32(hi, 16));
    }
    for (int n = 0; n < 2; ++n)
      for (int v = 0; v < 16; ++v) {
        const int ol = 144 + 32 * (16 * n + v), oh = 144 + 1024 + 32 * (8 * n + v % 8);
        const __m512i raw = Load2(a + ol, b + ol);
        const __m512i h = Load2(a + oh, b + oh);
        const int s = 2 * (v / 8);  // the low nibble's 2 high bits in its qh byte; the high's s + 4
        const __m512i h_lo = _mm512_and_si512(_mm512_srl_epi16(h, _mm_cvtsi32_si128(s)), m3);
        const __m512i h_hi = _mm512_and_si512(_mm512_srl_epi16(h, _mm_cvtsi32_si128(s + 4)), m3);
        q[32 * n + v] = _mm512_or_si512(_mm512_and_si512(raw, m4), _mm512_slli_epi16(h_lo, 4));
        q[32 * n + 16 + v] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(raw, 4), m4),
                                             _mm512_slli_epi16(h_hi, 4));
      }
  }
}

// The block's exact int32 sums for tokens [t0, t0 + NT) (the contract's integer part), at block b
// expanded at e.
template <GgmlQuant T, int NT>
inline void BlockSums(const __m512i* e, const QuantInput& x, int64_t t0, int64_t b,
                      __m512i (&isum)[NT]) {
  using L = Layout<T>;
  constexpr int kValues = IsKQuant(T) ? 256 : 32;
  const int8_t* xq[NT];
  for (int t = 0; t < NT; ++t) {
    xq[t] = x.Codes(t0 + t) + kValues * b;
    isum[t] = _mm512_setzero_si512();
  }
  if constexpr (!IsKQuant(T)) {
    for (int v = 0; v < 8; ++v)
      for (int t = 0; t < NT; ++t)
        isum[t] = _mm512_dpbusd_epi32(isum[t], e[v], Bcast4(xq[t] + 4 * v));
    constexpr int kOffset = T == GgmlQuant::kQ8_0   ? 128
                            : T == GgmlQuant::kQ4_0 ? 8
                            : T == GgmlQuant::kQ5_0 ? 16
                                                    : 0;
    if constexpr (kOffset != 0)
      for (int t = 0; t < NT; ++t)
        isum[t] = _mm512_sub_epi32(isum[t], _mm512_set1_epi32(kOffset * x.Sums(t0 + t)[b]));
  } else {
    constexpr int kSub = L::kVectors / L::kSubs;  // vectors a sub-block takes (8 or 4)
    for (int j = 0; j < L::kSubs; ++j) {
      __m512i p[NT];
      for (int t = 0; t < NT; ++t)
        p[t] =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), e[kSub * j], Bcast4(xq[t] + 4 * kSub * j));
      for (int v = kSub * j + 1; v < kSub * j + kSub; ++v)
        for (int t = 0; t < NT; ++t) p[t] = _mm512_dpbusd_epi32(p[t], e[v], Bcast4(xq[t] + 4 * v));
      for (int t = 0; t < NT; ++t)
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(p[t], e[L::kSc + j]));
    }
    if constexpr (T == GgmlQuant::kQ6_K) {  // - 32 sum_j sc_j bsum_j
      for (int t = 0; t < NT; ++t) {
        const int16_t* bs = x.Sums(t0 + t) + 16 * b;
        __m512i s = _mm512_madd_epi16(e[L::kMins], Bcast4(bs));
        for (int i = 1; i < 8; ++i)
          s = _mm512_add_epi32(s, _mm512_madd_epi16(e[L::kMins + i], Bcast4(bs + 2 * i)));
        isum[t] = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(s, 5));
      }
    }
  }
}

// Tokens [t0, t0 + NT) over blocks [b0, b1) of the pair, expanded from ex (block b0): acc[t] (16
// rows) carried on with the float steps in the contract's order.
template <GgmlQuant T, int NT>
void TileOverBlocks(const __m512i* ex, int64_t b0, int64_t b1, const QuantInput& x, int64_t t0,
                    __m512 (&acc)[NT]) {
  using L = Layout<T>;
  for (int64_t b = b0; b < b1; ++b) {
    const __m512i* e = ex + (b - b0) * L::kStride;
    __m512i isum[NT];
    BlockSums<T, NT>(e, x, t0, b, isum);
    const __m512 d = _mm512_castsi512_ps(e[L::kD]);
    for (int t = 0; t < NT; ++t) {
      const float dx = x.Dx(t0 + t)[b];
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(dx)), _mm512_cvtepi32_ps(isum[t]),
                               acc[t]);
      if constexpr (T == GgmlQuant::kQ4_1 || T == GgmlQuant::kQ5_1) {
        const int sum = x.Sums(t0 + t)[b];
        acc[t] = _mm512_fmadd_ps(_mm512_castsi512_ps(e[L::kM]),
                                 _mm512_set1_ps(dx * static_cast<float>(sum)), acc[t]);
      }
      if constexpr (T == GgmlQuant::kQ4_K || T == GgmlQuant::kQ5_K) {
        const int16_t* bs = x.Sums(t0 + t) + 16 * b;
        __m512i ms = _mm512_madd_epi16(e[L::kMins], Bcast4(bs));
        for (int j = 1; j < 8; ++j)
          ms = _mm512_add_epi32(ms, _mm512_madd_epi16(e[L::kMins + j], Bcast4(bs + 2 * j)));
        const __m512 neg =
            _mm512_xor_ps(_mm512_mul_ps(_mm512_castsi512_ps(e[L::kM]), _mm512_set1_ps(dx)),
                          _mm512_set1_ps(-0.0f));
        acc[t] = _mm512_fmadd_ps(neg, _mm512_cvtepi32_ps(ms), acc[t]);
      }
    }
  }
}

// Tokens [t0, t0 + NT) of the pair's accumulators into y: group g's rows (lanes 0-7) and, when
// `both`, group g + 1's (lanes 8-15), each clipped to [row_begin, row_end), plus the bias.
template <int NT>
void StorePair(const __m512 (&acc)[NT], int64_t t0, int64_t g, bool both, const float* bias,
               float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t r0 = std::max(g * kR, row_begin),
                r1 = std::min(g * kR + (both ? 2 : 1) * kR, row_end);
  alignas(64) float v[2 * kR];
  for (int t = 0; t < NT; ++t) {
    _mm512_store_ps(v, acc[t]);
    float* yt = y + (t0 + t) * y_stride - row_begin;
    for (int64_t r = r0; r < r1; ++r) yt[r] = bias ? v[r - g * kR] + bias[r] : v[r - g * kR];
  }
}

// Tokens [t, t + NT) over the segment [s0, s1) of the pair at g: from zero at the first segment,
// else from acc_buf (the chunk's [token][16] accumulators from c0); stored into y at the last.
template <GgmlQuant T, int NT>
void SegmentTile(const __m512i* ex, int64_t s0, int64_t s1, int64_t nb, const QuantInput& x,
                 int64_t t, int64_t c0, float* acc_buf, int64_t g, bool both, const float* bias,
                 float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  __m512 acc[NT];
  for (int i = 0; i < NT; ++i)
    acc[i] = s0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(acc_buf + (t - c0 + i) * 2 * kR);
  TileOverBlocks<T, NT>(ex, s0, s1, x, t, acc);
  if (s1 == nb)
    StorePair<NT>(acc, t, g, both, bias, y, y_stride, row_begin, row_end);
  else
    for (int i = 0; i < NT; ++i) _mm512_store_ps(acc_buf + (t - c0 + i) * 2 * kR, acc[i]);
}

// The loop over pairs i in [0, n_pairs) of 16 rows for every token: src.Group(i) the first of
// the pair's two row groups (rows 8 g .. 8 g + 16), src.Both(i) whether the second is stored,
// src.ExpandBlock(i, b, e) its block b expanded as Layout<T> lays it out; nb blocks along k.
template <GgmlQuant T, class Source>
void VnniPairs(const QuantInput& x, const Source& src, int64_t n_pairs, int64_t nb,
               const float* bias, float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  using L = Layout<T>;
  const int64_t chunk = std::max<int64_t>(
      kTile, std::min<int64_t>(512, kChunkBytes / std::max<int64_t>(1, x.cols)) / kTile * kTile);
  const int64_t seg = std::max<int64_t>(1, kSegmentBytes / (L::kStride * 64));
  // [seg][kStride] expanded vectors and [chunk][16] accumulators, this thread's (64-byte aligned).
  auto* ex = static_cast<__m512i*>(
      gemm::ThreadBuffer<gemm::kQuantExpandedSlot>(static_cast<size_t>(seg * L::kStride * 64)));
  auto* acc_buf = static_cast<float*>(
      gemm::ThreadBuffer<gemm::kQuantAccSlot>(static_cast<size_t>(chunk * 2 * kR * 4)));
  for (int64_t c0 = 0; c0 < x.n_tokens; c0 += chunk) {
    const int64_t c1 = std::min(x.n_tokens, c0 + chunk);
    for (int64_t i = 0; i < n_pairs; ++i) {
      const int64_t g = src.Group(i);
      const bool both = src.Both(i);
      for (int64_t s0 = 0; s0 < nb; s0 += seg) {
        const int64_t s1 = std::min(nb, s0 + seg);
        for (int64_t b = s0; b < s1; ++b) src.ExpandBlock(i, b, ex + (b - s0) * L::kStride);
        const auto tile = [&](auto nt, int64_t t) {
          SegmentTile<T, decltype(nt)::value>(ex, s0, s1, nb, x, t, c0, acc_buf, g, both, bias, y,
                                              y_stride, row_begin, row_end);
        };
        int64_t t = c0;
        for (; t + kTile <= c1; t += kTile) tile(std::integral_constant<int, kTile>(), t);
        if (t + 4 <= c1) tile(std::integral_constant<int, 4>(), t), t += 4;
        if (t + 2 <= c1) tile(std::integral_constant<int, 2>(), t), t += 2;
        if (t < c1) tile(std::integral_constant<int, 1>(), t);
      }
    }
  }
}

// GGML groups [g0, g1) in pairs; an odd group at the end of the range runs with itself in the
// upper lanes, not stored.
template <GgmlQuant T>
struct GroupPairs {
  const QuantPanels& w;
  int64_t g0, g1;
  int64_t Group(int64_t i) const { return g0 + 2 * i; }
  bool Both(int64_t i) const { return g0 + 2 * i + 1 < g1; }
  void ExpandBlock(int64_t i, int64_t b, __m512i* e) const {
    const int64_t g = Group(i), gbytes = w.group_block_bytes();
    const uint8_t* ga = w.group(g);
    const uint8_t* gb = Both(i) ? w.group(g + 1) : ga;
    Expand<T>(ga + b * gbytes, gb + b * gbytes, e);
  }
};

// A block-float matrix in bfp_int8.h's layout, panels [pa, pb): pair i is half i % 2 of panel
// pa + i / 2 (rows 16 i' .. 16 i' + 16 for i' = 2 pa + i: groups 2 i', 2 i' + 1), its block b the
// half tile of k tile b, expanded as a Q8_0 block pair: the int8 weights q + 128 and dW in every
// lane.
constexpr int64_t kPrefetchTiles = 8;

template <BfpFormat F>
struct BfpInt8Halves {
  const BfpPanels& w;
  int64_t pa;
  int64_t Group(int64_t i) const { return 2 * (2 * pa + i); }
  bool Both(int64_t) const { return true; }
  void ExpandBlock(int64_t i, int64_t b, __m512i* e) const {
    using L = Layout<GgmlQuant::kQ8_0>;
    const int64_t p = pa + i / 2, h = i % 2;
    const int64_t half_bytes = BfpInt8HalfBytes(F);
    const uint8_t* half = w.data() + p * w.panel_bytes() + BfpInt8HalfOffset(F, w.k_tiles(), b, h);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    // One token's call is bound by the read of the half tiles, one stream a pair: the one
    // kPrefetchTiles ahead is asked for (docs/performance.md, "Block-float weights in 8-bit
    // integers").
    if (b + kPrefetchTiles < w.k_tiles())
      for (int64_t o = 0; o < half_bytes; o += 64)
        _mm_prefetch(reinterpret_cast<const char*>(half + kPrefetchTiles * half_bytes + o),
                     _MM_HINT_T0);
    if constexpr (F == BfpFormat::kBfp8) {
      const uint8_t* q = half + 32;
      for (int v = 0; v < 8; ++v) e[v] = _mm512_xor_si512(_mm512_loadu_si512(q + 64 * v), flip);
    } else {
      const uint8_t* q = half + 32;
      const uint8_t* shifts = half;
      const __m512i m4 = _mm512_set1_epi8(0x0F);
      // A nibble's two's-complement value as a signed byte, looked up (vpshufb) in one step.
      const __m512i sign_extend = _mm512_broadcast_i32x4(
          _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1));
      const __m512i byte_mask = _mm512_set1_epi32(0x00FF00FF);
      const __m512i lo_byte = _mm512_set1_epi16(0x00FF), hi_byte = _mm512_set1_epi16(-256);
      for (int v = 0; v < 4; ++v) {
        const __m512i raw = _mm512_loadu_si512(q + 64 * v);
        for (int half = 0; half < 2; ++half) {  // k 4 v + j (low nibbles), 16 + 4 v + j (high)
          const int u = v + 4 * half;
          const __m512i nib = _mm512_and_si512(half ? _mm512_srli_epi16(raw, 4) : raw, m4);
          const __m512i c = _mm512_shuffle_epi8(sign_extend, nib);
          // A 16-bit word holds k 4 u + 2 w' (low byte) and 4 u + 2 w' + 1 (high): each byte
          // shifted by its own k's count (the 4 counts broadcast from the header), neither
          // spilling into the other.
          const __m512i s4 = _mm512_set1_epi32(*reinterpret_cast<const int32_t*>(shifts + 4 * u));
          const __m512i lo =
              _mm512_and_si512(_mm512_sllv_epi16(c, _mm512_and_si512(s4, byte_mask)), lo_byte);
          const __m512i hi = _mm512_sllv_epi16(
              _mm512_and_si512(c, hi_byte), _mm512_and_si512(_mm512_srli_epi32(s4, 8), byte_mask));
          e[u] = _mm512_xor_si512(_mm512_or_si512(lo, hi), flip);
        }
      }
    }
    const float dw = w.Int8Scale(p, b, h);
    reinterpret_cast<__m512*>(e + L::kD)[0] = _mm512_set1_ps(dw);
    reinterpret_cast<__m512*>(e + L::kM)[0] = _mm512_setzero_ps();
  }
};

}  // namespace

void QuantGemmVnni(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
                   int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t g0, int64_t g1) {
  ForQuantType(w.type(), [&](auto type) {
    constexpr GgmlQuant T = decltype(type)::value;
    VnniPairs<T>(x, GroupPairs<T>{w, g0, g1}, (g1 - g0 + 1) / 2, w.blocks(), bias, y, y_stride,
                 row_begin, row_end);
  });
}

void BfpInt8Vnni(const QuantInput& x, const BfpPanels& w, const float* bias, float* y,
                 int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb) {
  constexpr GgmlQuant T = GgmlQuant::kQ8_0;
  if (w.format() == BfpFormat::kBfp8)
    VnniPairs<T>(x, BfpInt8Halves<BfpFormat::kBfp8>{w, pa}, 2 * (pb - pa), w.k_tiles(), bias, y,
                 y_stride, row_begin, row_end);
  else
    VnniPairs<T>(x, BfpInt8Halves<BfpFormat::kBfp4>{w, pa}, 2 * (pb - pa), w.k_tiles(), bias, y,
                 y_stride, row_begin, row_end);
}

}  // namespace wc::x86

#pragma GCC pop_options
