// Block-float weights with int8 activations on AVX2 (bfp_int8.h's contract, quant_gemm_x86.h):
// vpmaddubsw multiplies unsigned weight bytes by signed activation bytes, so each weight enters as
// |q| with its sign moved onto the activation (vpsignb), as llama.cpp's Q8_0 AVX2 kernel does:
// a pair of products is at most 2 x 127 x 127 < 2^15, so the 16-bit sums never saturate, and
// vpmaddwd by ones widens them to exact int32 lanes. A register holds a quarter tile: 8 rows (one
// 32-bit lane each, 4 consecutive k) x 4 k, the half tile's layout (bfp_int8.h) read 32 bytes at a
// time. A bfp4 quarter tile is expanded once per chunk of tokens into |q| and a sign source in L1
// (nibbles looked up, then each byte multiplied by its k's 2^shift in 16-bit lanes), then
// multiplied by every token of the chunk, as quant_gemm_avx2_expanded.cpp runs the GGML types.
// A bfp8 quarter tile's codes are q already: each tile reads them in place and makes |q| with one
// vpabsb (DirectTileOverBlocks; 8 decoding rows +25%, 32 rows +9%, prefill level, against
// expanding them: docs/performance.md "bfp8 int8's signed tile unpinned"). In calls of 16 tokens
// or more, a segment's |q| and sign masks are made once into L1 and 8 tokens a tile take q's sign
// by vpxor, not vpsignb (DirectTile8; docs/performance.md "bfp8 int8 in 8-token tiles").
// bfp8's chunks are 512 tokens, its segments outer to a panel's quarters (Quarters).
// A bfp4 quarter tile whose q are all multiples of 4 is expanded as q / 4 instead, against the
// chunk's codes made unsigned (x + 128): no sign step, and two vpmaddubsw results add in 16 bits
// before each vpmaddwd (ExpandQuarter's comment; bfp4 prefill 160 -> 201 tok/s on B,
// docs/performance.md "bfp4 quarter tiles in 16-bit sums").
// One token (decode) expands nothing and reads each half tile once for both its quarters
// (OneToken).
// Integer sums are exact and the float steps the contract's, so the bits are the portable and
// VNNI kernels'.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/gemm/bfp/bfp_int8.h"
#include "kernels/gemm/bfp/gemm_bfp.h"
#include "kernels/gemm/gemm_schedule.h"
#include "kernels/gemm/quant/quant_gemm_x86.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "kernels/gemm/quant/quant_avx2-inl.h"

namespace wc::x86 {
namespace {

using namespace quant_avx2;  // NOLINT: the helpers the AVX2 integer kernels share
constexpr int kTile = 4;     // tokens a tile holds in registers
// A chunk's activation codes and a segment's expanded quarter tiles (in L1), as the GGML types'
// expanded kernel sizes them.
constexpr int64_t kChunkBytes = 1 << 20;
// bfp8's chunk (tokens), at any width: a segment's sign pass and its weights' reads then count
// once for 512 tokens, which outweighs the chunk's codes no longer fitting in L2 (at 18176 columns
// 56-token chunks ran 10% slower; docs/performance.md "bfp8 int8: signs made once a segment,
// chunks of 512").
constexpr int64_t kBfp8Chunk = 512;
constexpr int64_t kSegmentBytes = 16 << 10;
// The quarter tiles of a group lie a tile apart; the one this many tiles ahead is asked for (the
// VNNI loop's distance, quant_gemm_vnni.cpp).
constexpr int64_t kPrefetchTiles = 8;

// A bfp4 nibble's two's-complement value, and its magnitude, as vpshufb tables; 2^shift of a
// header's shift byte (0..4).
inline __m256i NibbleValues() {
  return _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5,
                          6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
}
inline __m256i NibbleMagnitudes() {
  return _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8,
                          7, 6, 5, 4, 3, 2, 1);
}
inline __m256i PowersOfTwo() {
  return _mm256_setr_epi8(1, 2, 4, 8, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 0, 0, 0,
                          0, 0, 0, 0, 0, 0, 0, 0);
}

// A bfp4 quarter tile's nibbles, vector u holding k 4 u .. 4 u + 3 (lane r = row r, byte j =
// k 4 u + j), given to f(u, nibbles, shifts) with byte j of every lane of `shifts` k 4 u + j's
// shift (the header's 4 counts broadcast), for u = 0, 4, 1, 5, ...: each 32 bytes read once for
// its low nibbles (k < 16) and its high ones.
template <class F>
inline void ForEachNibbleVector(const uint8_t* half, int64_t quarter_in_half, const F& f) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int v = 0; v < 4; ++v) {
    const __m256i raw = Load(half + 32 + 64 * v + 32 * quarter_in_half);
    f(v, _mm256_and_si256(raw, m4), Bcast4(half + 4 * v));
    f(v + 4, _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), Bcast4(half + 4 * (v + 4)));
  }
}

// A bfp4 quarter tile expanded (kStride vectors), in one of two forms.
// Signed: e[v] = |q| of k 4 v .. 4 v + 3 (lane r = row r), e[8 + v] a byte of q's sign (the
// vpsignb source), multiplied by the token's signed codes, where some k's shift is below 2.
// Quartered (bfp4, where every k's shift is at least 2, so every q is a multiple of 4: a half tile
// whose exponents span at most 2 powers of two, 98-99.8% of a checkpoint's; docs/performance.md):
// e[v] = q / 4 as signed bytes
// (|q / 4| <= 28), e[8] lane r = 512 sum_k q[r, k] / 4. The token's codes enter as unsigned bytes
// x + 128 (x ^ 0x80, QuantInput::unsigned_codes), so vpmaddubsw needs no sign step, and two of its
// pair sums (4 products, at most 4 x 255 x 28 < 2^15) add in 16 bits before one vpmaddwd by 4:
//   sum_k q x = 4 sum_k (q / 4)(x + 128) - 512 sum_k q / 4,
// exact in int32 either way, so the bits are the contract's.
// e[16]: the half tile's scale dW in every lane.
constexpr int kStride = 17;
constexpr int kCorrection = 8;  // a quartered tile's e[kCorrection]

// Writes the expanded quarter tile to e and returns whether it took the quartered form.
// (bfp4 only: bfp8 is read in place, DirectTileOverBlocks.)
bool ExpandQuarter(const BfpPanels& w, int64_t p, int64_t quarter, int64_t b, __m256i* e) {
  constexpr BfpFormat F = BfpFormat::kBfp4;
  const int64_t h = quarter / 2, s = quarter % 2;
  const int64_t half_bytes = BfpInt8HalfBytes(F);
  const uint8_t* half = w.data() + p * w.panel_bytes() + BfpInt8HalfOffset(F, w.k_tiles(), b, h);
  if (b + kPrefetchTiles < w.k_tiles())
    for (int64_t o = 0; o < half_bytes; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(half + kPrefetchTiles * half_bytes + o),
                   _MM_HINT_T0);
  reinterpret_cast<__m256*>(e + 16)[0] = _mm256_set1_ps(w.Int8Scale(p, b, h));
  const uint8_t* shifts = half;
  const __m256i value = NibbleValues();
  // Quartered when every k's shift is at least 2 (a k of zero codes is stored with 4,
  // bfp_int8.h), the half tile's exponents then spanning at most 2: q / 4 = c 2^(shift - 2),
  // the nibble's value doubled once or twice, chosen per byte by its k's shift.
  const __m256i shift_below_2 = _mm256_cmpgt_epi8(_mm256_set1_epi8(2), Load(shifts));
  if (_mm256_testz_si256(shift_below_2, shift_below_2)) {
    const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256i row_sums = _mm256_setzero_si256();
    ForEachNibbleVector(half, s, [&](int u, __m256i nib, __m256i k_shift) {
      const __m256i c = _mm256_shuffle_epi8(value, nib);
      const __m256i c2 = _mm256_add_epi8(c, c), c4 = _mm256_add_epi8(c2, c2);
      e[u] = _mm256_blendv_epi8(_mm256_blendv_epi8(c, c2, _mm256_cmpeq_epi8(k_shift, three)), c4,
                                _mm256_cmpeq_epi8(k_shift, four));
      row_sums =
          _mm256_add_epi32(row_sums, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, e[u]), ones16));
    });
    e[kCorrection] = _mm256_slli_epi32(row_sums, 9);
    return true;
  }
  const __m256i low = _mm256_set1_epi16(0x00FF);
  const __m256i magnitude = NibbleMagnitudes(), pow2 = PowersOfTwo();
  ForEachNibbleVector(half, s, [&](int u, __m256i nib, __m256i k_shift) {
    const __m256i a = _mm256_shuffle_epi8(magnitude, nib);
    // |c| << shift of its k (at most 7 << 4 = 112): the even bytes (k 4 u, 4 u + 2) and the odd
    // ones multiplied in 16-bit lanes by 2^shift (looked up by the shift), then put back
    // together.
    const __m256i m = _mm256_shuffle_epi8(pow2, k_shift);
    const __m256i even = _mm256_mullo_epi16(_mm256_and_si256(a, low), _mm256_and_si256(m, low));
    const __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(m, 8));
    e[u] = _mm256_or_si256(_mm256_and_si256(even, low), _mm256_slli_epi16(odd, 8));
    e[8 + u] = _mm256_shuffle_epi8(value, nib);
  });
  return false;
}

// The contract's float step of block b for tokens [t0, t0 + NT): acc[t] = fma(dW dx[t, b],
// float(isum[t]), acc[t]), d = dW in every lane.
template <int NT>
inline void ContractStep(__m256 d, const QuantInput& x, int64_t t0, int64_t b,
                         const __m256i (&isum)[NT], __m256 (&acc)[NT]) {
  for (int t = 0; t < NT; ++t)
    acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x.Dx(t0 + t)[b])),
                             _mm256_cvtepi32_ps(isum[t]), acc[t]);
}

// Tokens [t0, t0 + NT) over blocks [b0, b1) of a quarter tile expanded from ex (block b0, its
// form in quartered[b - b0]; a quartered one reads x.unsigned_codes): acc[t] (8 rows) carried on
// with the contract's float step.
template <int NT>
void TileOverBlocks(const __m256i* ex, const bool* quartered, int64_t b0, int64_t b1,
                    const QuantInput& x, int64_t t0, __m256 (&acc)[NT]) {
  const __m256i ones = _mm256_set1_epi16(1), fours = _mm256_set1_epi16(4);
  for (int64_t b = b0; b < b1; ++b) {
    const __m256i* e = ex + (b - b0) * kStride;
    __m256i isum[NT];
    if (quartered[b - b0]) {
      const uint8_t* xu[NT];
      for (int t = 0; t < NT; ++t) xu[t] = x.UnsignedCodes(t0 + t) + 32 * b;
      for (int v = 0; v < 8; v += 2) {
        __m256i pair[NT];
        for (int t = 0; t < NT; ++t) pair[t] = _mm256_maddubs_epi16(Bcast4(xu[t] + 4 * v), e[v]);
        PinSums(pair);
        for (int t = 0; t < NT; ++t)
          pair[t] =
              _mm256_add_epi16(pair[t], _mm256_maddubs_epi16(Bcast4(xu[t] + 4 * v + 4), e[v + 1]));
        PinSums(pair);
        for (int t = 0; t < NT; ++t)
          isum[t] = v == 0 ? _mm256_madd_epi16(pair[t], fours)
                           : _mm256_add_epi32(isum[t], _mm256_madd_epi16(pair[t], fours));
        PinSums(isum);
      }
      for (int t = 0; t < NT; ++t) isum[t] = _mm256_sub_epi32(isum[t], e[kCorrection]);
    } else {
      const int8_t* xq[NT];
      for (int t = 0; t < NT; ++t) {
        xq[t] = x.Codes(t0 + t) + 32 * b;
        isum[t] = _mm256_setzero_si256();
      }
      // No PinSums here: GCC 12 keeps these four sums in registers by itself, and the pin made it
      // copy them between registers at every step of the unrolled loop (7 moves a pair of v,
      // about an eighth of the loop's operations; bfp8 prefill +7.5% without,
      // docs/performance.md "The same bits on AVX2 and AVX-512").
#pragma GCC unroll 2
      for (int v = 0; v < 8; ++v) {
        for (int t = 0; t < NT; ++t) {
          const __m256i xs = _mm256_sign_epi8(Bcast4(xq[t] + 4 * v), e[8 + v]);
          isum[t] =
              _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(e[v], xs), ones));
        }
      }
    }
    ContractStep<NT>(_mm256_castsi256_ps(e[16]), x, t0, b, isum, acc);
  }
}

// bfp8's prefetch: the lines of the half tile kPrefetchTiles ahead of block b's (`q8`: its codes
// of one quarter, 32 bytes into the half tile), when there is one (nb blocks).
inline void PrefetchHalfAhead(const uint8_t* q8, int64_t b, int64_t nb) {
  constexpr int64_t kHalf = BfpInt8HalfBytes(BfpFormat::kBfp8);
  if (b + kPrefetchTiles >= nb) return;
  for (int64_t o = -32; o < kHalf - 32; o += 64)
    _mm_prefetch(reinterpret_cast<const char*>(q8 + kPrefetchTiles * kHalf + o), _MM_HINT_T0);
}

// bfp8's signs and magnitudes of one block of a quarter (`q8`: its 8 code vectors, 64 bytes
// apart), what DirectTile8 multiplies by: sm [8 v][2][32] bytes, vector v's sign mask (0xFF where
// q < 0) then its |q|. Returns the block's correction, lane r = -sum over its 32 k of min(q, 0)
// for row r, what DirectTile8's sign step adds to every token's sum, and so where each block's
// sum starts. Pair sums are at least -254, eight at least -2032.
constexpr int64_t kSignBytes = 512;  // one block's sm
// Calls of this many tokens or more make the sign pass (DirectTile8); 8-15 take DirectTile8<false>:
// for one group the pass costs more than it saves (8 rows 85 against 91 tok/s,
// docs/performance.md "bfp8 int8 in 8-token tiles").
constexpr int64_t kSignPassTokens = 16;
inline __m256i SignsAndMagnitudes(const uint8_t* q8, uint8_t* sm) {
  const __m256i ones8 = _mm256_set1_epi8(1), zero = _mm256_setzero_si256();
  __m256i pairs = zero;
  for (int v = 0; v < 8; ++v) {
    const __m256i q = Load(q8 + 64 * v);
    _mm256_store_si256(reinterpret_cast<__m256i*>(sm + 64 * v), _mm256_cmpgt_epi8(zero, q));
    _mm256_store_si256(reinterpret_cast<__m256i*>(sm + 64 * v + 32), _mm256_abs_epi8(q));
    pairs = _mm256_sub_epi16(pairs, _mm256_maddubs_epi16(ones8, _mm256_min_epi8(q, zero)));
  }
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

// The contract's float step of block b for 8 tokens whose float sums lie in L1: acc[t] =
// fma(dW dx[t, b], float(isum[t]), acc[t]) (acc: [8][8] f32, 32-byte aligned), dW dx one vmulps
// of dW and dx broadcast from memory.
inline void ContractStep8InMemory(const float* dw, const float* const (&dx)[8], int64_t b,
                                  const __m256i (&isum)[8], float* __restrict acc) {
  __m256 d = _mm256_broadcast_ss(dw);
  __asm__("" : "+x"(d));  // or GCC multiplies in a scalar and broadcasts the product
  for (int t = 0; t < 8; ++t)
    _mm256_store_ps(acc + 8 * t,
                    _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_broadcast_ss(dx[t] + b)),
                                    _mm256_cvtepi32_ps(isum[t]), _mm256_load_ps(acc + 8 * t)));
}

// bfp8's tile read in place: tokens [t0, t0 + NT) over blocks [b0, b1) of one quarter, its codes
// q straight from the half tiles (`codes`: block b0's 8 vectors of this quarter, a half tile
// apart from block to block; `scales`: block b0's dW, two floats apart), |q| made by one vpabsb
// per vector and tile and q's sign put on the token's code by vpsignb. The same integer sums and
// float step as the expanded signed form (so the same bits), without the expansion's 17 stores a
// block: at 8 tokens a chunk they were a third of the GEMM's time. Calls of under 16 tokens and
// the tokens past a call's last 8-token group (DirectTile8 takes the groups). `prefetch`: the
// first tile of a segment asks for the half tiles kPrefetchTiles ahead.
template <int NT>
void DirectTileOverBlocks(const uint8_t* codes, const float* scales, int64_t b0, int64_t b1,
                          const QuantInput& x, int64_t t0, bool prefetch, __m256 (&acc)[NT]) {
  constexpr int64_t kHalf = BfpInt8HalfBytes(BfpFormat::kBfp8);
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* xq[NT];
  for (int t = 0; t < NT; ++t) xq[t] = x.Codes(t0 + t);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* q8 = codes + (b - b0) * kHalf;
    if (prefetch) PrefetchHalfAhead(q8, b, x.blocks);
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int v = 0; v < 8; ++v) {
      const __m256i q = Load(q8 + 64 * v);
      const __m256i a = _mm256_abs_epi8(q);
      for (int t = 0; t < NT; ++t) {
        const __m256i xs = _mm256_sign_epi8(Bcast4(xq[t] + 32 * b + 4 * v), q);
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(a, xs), ones));
      }
    }
    ContractStep<NT>(_mm256_set1_ps(scales[2 * (b - b0)]), x, t0, b, isum, acc);
  }
}

// One token of an 8-token tile: its code group at byte XO, q's sign put on it by SIGN (vpxor with
// the sign mask, or vpsignb by q; either in ymm12), times |q| (ymm13), pairs widened by vpmaddwd
// into its sum %T.
// clang-format off
#define WC_BFP8_TOKEN(SIGN, XO, T, TMP)                        \
  "vpbroadcastd " #XO "(%9), %%ymm" #TMP "\n\t"                \
  #SIGN " %%ymm12, %%ymm" #TMP ", %%ymm" #TMP "\n\t"            \
  "vpmaddubsw %%ymm" #TMP ", %%ymm13, %%ymm" #TMP "\n\t"       \
  "vpmaddwd %10, %%ymm" #TMP ", %%ymm" #TMP "\n\t"             \
  "vpaddd %%ymm" #TMP ", %" #T ", %" #T "\n\t"
// The 8 tokens of code vector v (their codes at 32 v + 4 t).
#define WC_BFP8_TOKENS(SIGN, XO)                                             \
  WC_BFP8_TOKEN(SIGN, XO + 0, 0, 14) WC_BFP8_TOKEN(SIGN, XO + 4, 1, 15)      \
  WC_BFP8_TOKEN(SIGN, XO + 8, 2, 14) WC_BFP8_TOKEN(SIGN, XO + 12, 3, 15)     \
  WC_BFP8_TOKEN(SIGN, XO + 16, 4, 14) WC_BFP8_TOKEN(SIGN, XO + 20, 5, 15)    \
  WC_BFP8_TOKEN(SIGN, XO + 24, 6, 14) WC_BFP8_TOKEN(SIGN, XO + 28, 7, 15)
// Code vector v of the block (k 4 v .. 4 v + 3 of 8 rows), %8 its block's first byte.
// With the sign pass: its sign mask and |q| (SignsAndMagnitudes, 64 bytes a vector), vpxor.
#define WC_BFP8_MASKED_VECTOR(QO, XO)                          \
  "vmovdqa " #QO "(%8), %%ymm12\n\t"                           \
  "vmovdqa 32+" #QO "(%8), %%ymm13\n\t"                        \
  WC_BFP8_TOKENS(vpxor, XO)
// Without: q read in place (a half tile's codes, 64 bytes a vector), its |q|, vpsignb.
#define WC_BFP8_SIGNED_VECTOR(QO, XO)                          \
  "vmovdqu " #QO "(%8), %%ymm12\n\t"                           \
  "vpabsb %%ymm12, %%ymm13\n\t"                                \
  WC_BFP8_TOKENS(vpsignb, XO)
#define WC_BFP8_BLOCK(VECTOR)                                                                \
  VECTOR(0, 0) VECTOR(64, 32) VECTOR(128, 64) VECTOR(192, 96) VECTOR(256, 128)               \
  VECTOR(320, 160) VECTOR(384, 192) VECTOR(448, 224)
// clang-format on

// bfp8's tile of 8 tokens, group `group` of x.codes_by8 (tokens 8 group .. 8 group + 7), over
// blocks [b0, b1) of one quarter. kSignPass: from the segment's signs and magnitudes (`block0`:
// block b0's SignsAndMagnitudes on, 512 bytes a block; `corrections`: block b0's on; `scales` as
// DirectTileOverBlocks'), the float sums carried on in acc ([8][8] f32, 32-byte aligned; 16
// registers hold the 8 integer sums and the step's operands, not 8 more).
// |q| and q's sign mask are made once a segment and shared by every 8 tokens of the chunk, and
// q's sign goes onto each token's code by xor with the mask instead of vpsignb: ~x = -x - 1, so
// a negative q adds |q| (-x - 1) = q x + q, and a block's sum, started at its correction, comes
// out sum_k q x (exact: the pair sums stay within 2 x 127 x 128 < 2^15). vpsignb and vpabsb
// compete with the multiplies for their pipes where vpxor and loads do not (docs/performance.md
// "bfp8 int8 in 8-token tiles", "bfp8 int8: signs made once a segment, chunks of 512"). The same
// integer sums and float step as the portable kernel, so the same bits.
// The integer loop is written out in assembly: as intrinsics, GCC 12 loaded all 8 tokens' codes
// ahead and kept three of the 8 sums on the stack, each step then waiting on a store (slower
// than the vpsignb tile it replaces; the same section). The 8 sums stay in registers, |q|, the
// sign mask and two temporaries in ymm12-15.
// Calls of 8-15 tokens (kSignPassTokens) make no sign pass, where it would serve one group only:
// kSignPass false reads q in place (`block0`: the quarter's codes at block b0, a half tile
// apart; `corrections` unused), makes |q| by one vpabsb shared by the 8 tokens and puts q's sign
// on each token's code by vpsignb, so its sums start at zero. Against that tile's 4 tokens twice:
// half the vpabsb, and the sums kept in registers. These calls stream their weights from memory
// once, so they run a whole panel's quarters together (`nq` of them, quarter i's block0[i],
// scales[i] and acc[i]), each block's in turn: both half streams are read at one steady pace, each
// asking for its lines kPrefetchTiles blocks ahead where prefetch[i] (the first quarter of its
// half). Run quarter by quarter over a segment, the memory sat idle while the second quarter of
// each half re-read the first's lines from L1 (docs/performance.md "bfp8 int8: 8 rows with the
// quarters inner"). The sign pass's tiles take one quarter (nq 1) and no prefetch.
template <bool kSignPass>
void DirectTile8(const uint8_t* const* block0, const float* const* scales,
                 const __m256i* corrections, int nq, int64_t b0, int64_t b1, const QuantInput& x,
                 int64_t group, const bool* prefetch, float* const* acc) {
  constexpr int64_t kBlockBytes = kSignPass ? kSignBytes : BfpInt8HalfBytes(BfpFormat::kBfp8);
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* xi = x.CodesBy8(group);  // [blocks][8 v][8 t][4]
  const float* dx[8];
  for (int t = 0; t < 8; ++t) dx[t] = x.Dx(8 * group + t);
  for (int64_t b = b0; b < b1; ++b)
    for (int i = 0; i < nq; ++i) {
      const uint8_t* wb = block0[i] + (b - b0) * kBlockBytes;
      if (!kSignPass && prefetch != nullptr && prefetch[i]) PrefetchHalfAhead(wb, b, x.blocks);
      const int8_t* xb = xi + b * 256;
      __m256i isum[8];
      for (int t = 0; t < 8; ++t)
        isum[t] = kSignPass ? corrections[b - b0] : _mm256_setzero_si256();
      // clang-format off
      if constexpr (kSignPass)
        __asm__(WC_BFP8_BLOCK(WC_BFP8_MASKED_VECTOR)
                : "+x"(isum[0]), "+x"(isum[1]), "+x"(isum[2]), "+x"(isum[3]), "+x"(isum[4]),
                  "+x"(isum[5]), "+x"(isum[6]), "+x"(isum[7])
                : "r"(wb), "r"(xb), "x"(ones)
                : "xmm12", "xmm13", "xmm14", "xmm15", "memory");
      else
        __asm__(WC_BFP8_BLOCK(WC_BFP8_SIGNED_VECTOR)
                : "+x"(isum[0]), "+x"(isum[1]), "+x"(isum[2]), "+x"(isum[3]), "+x"(isum[4]),
                  "+x"(isum[5]), "+x"(isum[6]), "+x"(isum[7])
                : "r"(wb), "r"(xb), "x"(ones)
                : "xmm12", "xmm13", "xmm14", "xmm15", "memory");
      // clang-format on
      ContractStep8InMemory(scales[i] + 2 * (b - b0), dx, b, isum, acc[i]);
    }
}
#undef WC_BFP8_BLOCK
#undef WC_BFP8_SIGNED_VECTOR
#undef WC_BFP8_MASKED_VECTOR
#undef WC_BFP8_TOKENS
#undef WC_BFP8_TOKEN

// One token, nothing expanded to memory, each half tile read once for both its quarters (8 rows
// each). bfp4: the shift of each k goes onto the token's code instead of the weight (x' = x
// 2^shift, at most 127 x 16 in 16 bits, once a half tile), the nibbles become signed bytes by one
// lookup and 16-bit lanes, and vpmaddwd sums (k, k + 1) pairs of q x' into 32 bits. bfp8: the
// codes are bytes already, |q| and q's sign onto the activation as TileOverBlocks does. The
// integer sums are the expanded kernel's, so the bits are; decode reads each weight once and
// spends a fraction of the expanded path's instructions on it.
template <BfpFormat F>
void OneToken(const QuantInput& x, const BfpPanels& w, const float* bias, float* y,
              int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb) {
  const int64_t nb = w.k_tiles(), half_bytes = BfpInt8HalfBytes(F);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i value = NibbleValues(), pow2 = PowersOfTwo();
  // Row order after bfp4's pair sums are folded: [r0 r1 r4 r5 | r2 r3 r6 r7] -> r0 .. r7.
  const __m256i rows = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  const int8_t* codes = x.Codes(0);
  const float* dx = x.Dx(0);
  alignas(32) int16_t xs[32];  // bfp4: x' of the half tile's 32 k
  for (int64_t p = pa; p < pb; ++p)
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t g0 = 4 * p + 2 * h;  // quarter s: rows 8 (g0 + s) .. + 8
      if (8 * g0 >= row_end || 8 * g0 + 16 <= row_begin) continue;
      __m256 acc[2][1] = {{_mm256_setzero_ps()}, {_mm256_setzero_ps()}};
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* half = w.data() + p * w.panel_bytes() + BfpInt8HalfOffset(F, nb, b, h);
        if (b + kPrefetchTiles < nb)
          for (int64_t o = 0; o < half_bytes; o += 64)
            _mm_prefetch(reinterpret_cast<const char*>(half + kPrefetchTiles * half_bytes + o),
                         _MM_HINT_T0);
        const int8_t* xq = codes + 32 * b;
        if constexpr (F == BfpFormat::kBfp4) {
          const __m256i m = _mm256_shuffle_epi8(pow2, Load(half));
          const __m256i xv = Load(reinterpret_cast<const uint8_t*>(xq));
          _mm256_store_si256(reinterpret_cast<__m256i*>(xs),
                             _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(xv)),
                                                _mm256_cvtepu8_epi16(_mm256_castsi256_si128(m))));
          _mm256_store_si256(
              reinterpret_cast<__m256i*>(xs + 16),
              _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(xv, 1)),
                                 _mm256_cvtepu8_epi16(_mm256_extracti128_si256(m, 1))));
        }
        const __m256 scale = _mm256_set1_ps(w.Int8Scale(p, b, h) * dx[b]);
        for (int s = 0; s < 2; ++s) {
          __m256i isum;
          if constexpr (F == BfpFormat::kBfp4) {
            // Rows 0-3 and 4-7, a (k, k + 1) pair sum in each 32-bit lane.
            __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
            for (int v = 0; v < 4; ++v) {
              const __m256i raw = Load(half + 32 + 64 * v + 32 * s);
              for (int nib = 0; nib < 2; ++nib) {  // k 4 v + j (low nibbles), 16 + 4 v + j (high)
                const __m256i q = _mm256_shuffle_epi8(
                    value, _mm256_and_si256(nib ? _mm256_srli_epi16(raw, 4) : raw, m4));
                int64_t k4;
                std::memcpy(&k4, xs + 4 * v + 16 * nib, 8);
                const __m256i xk = _mm256_set1_epi64x(k4);
                lo = _mm256_add_epi32(
                    lo, _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)), xk));
                hi = _mm256_add_epi32(
                    hi,
                    _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)), xk));
              }
            }
            isum = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(lo, hi), rows);
          } else {
            isum = _mm256_setzero_si256();
            for (int v = 0; v < 8; ++v) {
              const __m256i q = Load(half + 32 + 64 * v + 32 * s);
              const __m256i xs8 = _mm256_sign_epi8(Bcast4(xq + 4 * v), q);
              isum = _mm256_add_epi32(
                  isum, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), xs8), ones));
            }
          }
          acc[s][0] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum), acc[s][0]);
        }
      }
      // StoreTile writes only the rows in [row_begin, row_end).
      for (int s = 0; s < 2; ++s)
        StoreTile<1>(acc[s], 0, g0 + s, bias, y, y_stride, row_begin, row_end);
    }
}

template <BfpFormat F>
void Quarters(const QuantInput& x, const BfpPanels& w, const float* bias, float* y,
              int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb) {
  // Tokens a chunk: bfp4's codes within kChunkBytes (in L2); bfp8's kBfp8Chunk whatever the width.
  const int64_t chunk =
      F == BfpFormat::kBfp8
          ? kBfp8Chunk
          : std::max<int64_t>(
                8, std::min<int64_t>(512, kChunkBytes / std::max<int64_t>(1, x.cols)) / 8 * 8);
  constexpr int64_t kSegmentBlocks = std::max<int64_t>(1, kSegmentBytes / (kStride * 32));
  // bfp4: [kSegmentBlocks][kStride] expanded vectors; bfp8: [kSegmentBlocks][kSignBytes] the
  // segment's signs and magnitudes. And [4 quarters][chunk][8] accumulators. This thread's
  // (64-byte aligned).
  auto* ex = static_cast<__m256i*>(gemm::ThreadBuffer<gemm::kQuantExpandedSlot>(
      static_cast<size_t>(kSegmentBlocks * std::max<int64_t>(kStride * 32, kSignBytes))));
  auto* signs = reinterpret_cast<uint8_t*>(ex);
  auto* acc_buf = static_cast<float*>(
      gemm::ThreadBuffer<gemm::kQuantAccSlot>(static_cast<size_t>(4 * chunk * kR * 4)));
  bool quartered[kSegmentBlocks];
  __m256i corrections[kSegmentBlocks];  // bfp8: the segment's Corrections, block s0 first
  const int64_t nb = w.k_tiles();
  for (int64_t c0 = 0; c0 < x.n_tokens; c0 += chunk) {
    const int64_t c1 = std::min(x.n_tokens, c0 + chunk);
    // A panel's segments in order, its 4 quarters a segment: the chunk's codes of a segment are
    // then read 4 times running (from L2, 480 KiB at 512 tokens), not once a quarter over the
    // whole chunk's (from L3 at 512 tokens).
    for (int64_t p = pa; p < pb; ++p) {
      // Calls of 8-15 tokens (bfp8): their first 8 over the whole panel, its quarters together
      // (DirectTile8<false>); the rest below.
      int64_t t_rest = c0;
      if constexpr (F == BfpFormat::kBfp8)
        if (x.n_tokens < kSignPassTokens && !x.codes_by8.empty() && c0 + 8 <= c1) {
          const uint8_t* codes[4];
          const float* scales[4];
          float* acc[4];
          bool prefetch[4];
          int64_t groups[4];
          int nq = 0;
          for (int64_t quarter = 0; quarter < 4; ++quarter) {
            const int64_t g = 4 * p + quarter;
            if (8 * g >= row_end || 8 * g + 8 <= row_begin) continue;
            codes[nq] = w.data() + p * w.panel_bytes() + BfpInt8HalfOffset(F, nb, 0, quarter / 2) +
                        32 + 32 * (quarter % 2);
            scales[nq] = w.int8_scales() + p * nb * 2 + quarter / 2;
            acc[nq] = acc_buf + quarter * chunk * kR;
            std::memset(acc[nq], 0, sizeof(float) * 8 * kR);
            prefetch[nq] = nq == 0 || groups[nq - 1] / 2 != g / 2;  // the half's first quarter
            groups[nq++] = g;
          }
          DirectTile8<false>(codes, scales, nullptr, nq, 0, nb, x, c0 / 8, prefetch, acc);
          for (int i = 0; i < nq; ++i) {
            __m256 sums[8];
            for (int r = 0; r < 8; ++r) sums[r] = _mm256_load_ps(acc[i] + r * kR);
            StoreTile<8>(sums, c0, groups[i], bias, y, y_stride, row_begin, row_end);
          }
          t_rest = c0 + 8;
        }
      if (t_rest == c1) continue;
      for (int64_t s0 = 0; s0 < nb; s0 += kSegmentBlocks) {
        const int64_t s1 = std::min(nb, s0 + kSegmentBlocks);
        for (int64_t quarter = 0; quarter < 4; ++quarter) {
          const int64_t g = 4 * p + quarter;  // rows 8 g .. 8 g + 8
          if (8 * g >= row_end || 8 * g + 8 <= row_begin) continue;
          float* const acc_q = acc_buf + quarter * chunk * kR;  // this quarter's [chunk][8]
          // bfp8's codes, from block s0 on (a half tile apart), and their corrections.
          const uint8_t* codes = w.data() + p * w.panel_bytes() +
                                 BfpInt8HalfOffset(F, nb, s0, quarter / 2) + 32 +
                                 32 * (quarter % 2);
          if constexpr (F == BfpFormat::kBfp4) {
            for (int64_t b = s0; b < s1; ++b)
              quartered[b - s0] = ExpandQuarter(w, p, quarter, b, ex + (b - s0) * kStride);
          } else if (x.n_tokens >= kSignPassTokens) {
            // The first read of the segment's codes, so the one that prefetches (the 8-token
            // tiles read only what it writes, in L1).
            for (int64_t b = s0; b < s1; ++b) {
              const uint8_t* q8 = codes + (b - s0) * BfpInt8HalfBytes(F);
              PrefetchHalfAhead(q8, b, nb);
              corrections[b - s0] = SignsAndMagnitudes(q8, signs + (b - s0) * kSignBytes);
            }
          }
          const bool first = s0 == 0, last = s1 == nb;
          const float* scales = w.int8_scales() + (p * nb + s0) * 2 + quarter / 2;
          int64_t t = t_rest;
          if constexpr (F == BfpFormat::kBfp8) {
            // 8-token groups, their float sums in L1 (acc_buf) between blocks as between
            // segments; DirectTileOverBlocks takes the rest below.
            if (!x.codes_by8.empty() && x.n_tokens >= kSignPassTokens)
              for (; t + 8 <= c1; t += 8) {
                float* acc = acc_q + (t - c0) * kR;
                if (first) std::memset(acc, 0, sizeof(float) * 8 * kR);
                const uint8_t* block0 = signs;
                DirectTile8<true>(&block0, &scales, corrections, 1, s0, s1, x, t / 8, nullptr,
                                  &acc);
                if (last) {
                  __m256 sums[8];
                  for (int i = 0; i < 8; ++i) sums[i] = _mm256_load_ps(acc + i * kR);
                  StoreTile<8>(sums, t, g, bias, y, y_stride, row_begin, row_end);
                }
              }
          }
          const auto tile = [&](auto nt, int64_t t) {
            constexpr int NT = decltype(nt)::value;
            __m256 acc[NT];
            for (int i = 0; i < NT; ++i)
              acc[i] = first ? _mm256_setzero_ps() : _mm256_load_ps(acc_q + (t - c0 + i) * kR);
            if constexpr (F == BfpFormat::kBfp8)
              DirectTileOverBlocks<NT>(codes, scales, s0, s1, x, t, t == t_rest, acc);
            else
              TileOverBlocks<NT>(ex, quartered, s0, s1, x, t, acc);
            if (last)
              StoreTile<NT>(acc, t, g, bias, y, y_stride, row_begin, row_end);
            else
              for (int i = 0; i < NT; ++i) _mm256_store_ps(acc_q + (t - c0 + i) * kR, acc[i]);
          };
          for (; t + kTile <= c1; t += kTile) tile(std::integral_constant<int, kTile>(), t);
          for (; t < c1; ++t) tile(std::integral_constant<int, 1>(), t);
        }
      }
    }
  }
}

}  // namespace

void BfpInt8Avx2(const QuantInput& x, const BfpPanels& w, const float* bias, float* y,
                 int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa, int64_t pb) {
  const bool bfp8 = w.format() == BfpFormat::kBfp8;
  if (x.n_tokens == 1)
    bfp8 ? OneToken<BfpFormat::kBfp8>(x, w, bias, y, y_stride, row_begin, row_end, pa, pb)
         : OneToken<BfpFormat::kBfp4>(x, w, bias, y, y_stride, row_begin, row_end, pa, pb);
  else if (bfp8)
    Quarters<BfpFormat::kBfp8>(x, w, bias, y, y_stride, row_begin, row_end, pa, pb);
  else
    Quarters<BfpFormat::kBfp4>(x, w, bias, y, y_stride, row_begin, row_end, pa, pb);
}

}  // namespace wc::x86

#pragma GCC pop_options
