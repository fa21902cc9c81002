// What bfp_int8_avx2.cpp's tiles share, and bfp8's tiles that read the codes in place: the
// contract's float step, the prefetch of the half tiles ahead, the sign pass (|q| and q's sign
// mask made once a segment into L1), the 4-token vpsignb tile and the 8-token assembly tiles with
// and without the sign pass. Included by bfp_int8_avx2.cpp alone, inside its
// `#pragma GCC target("avx2,fma,f16c")` region and anonymous namespace, after its constants
// (kPrefetchTiles) and quant_avx2-inl.h's helpers (Load, Bcast4).
#pragma once

// The contract's float step of block b for tokens [t0, t0 + NT): acc[t] = fma(dW dx[t, b],
// float(isum[t]), acc[t]), d = dW in every lane.
template <int NT>
inline void ContractStep(__m256 d, const QuantInput& x, int64_t t0, int64_t b,
                         const __m256i (&isum)[NT], __m256 (&acc)[NT]) {
  for (int t = 0; t < NT; ++t)
    acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x.Dx(t0 + t)[b])),
                             _mm256_cvtepi32_ps(isum[t]), acc[t]);
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
// Calls of this many tokens or more make the sign pass (DirectTile8); 8-15 take its kSigned form:
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

// int7's correction of one block of a quarter (`q8`: its 8 code vectors, 64 bytes apart): lane r =
// -64 sum over the block's 32 k of q[r, k], what the int7 tiles' sums start at, so that adding
// (x + 64) q over the block leaves sum_k q x. Byte pairs by vpmaddubsw against ones (at most 254
// in magnitude, 8 vectors' at most 2032 in 16 bits), then one vpmaddwd by -64 (at most 260,096).
inline __m256i Int7Correction(const uint8_t* q8) {
  const __m256i ones8 = _mm256_set1_epi8(1);
  __m256i pairs = _mm256_setzero_si256();
  for (int v = 0; v < 8; ++v)
    pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(ones8, Load(q8 + 64 * v)));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(-64));
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

// bfp8's tile read in place: tokens [t0, t0 + NT) over blocks [b0, b1) of `nq` quarters, each
// block's quarters in turn (quarter i: `codes[i]` its block b0's 8 vectors, a half tile apart
// from block to block; `scales[i]` block b0's dW, two floats apart; `acc[i]` its float sums
// [NT][8] f32, 32-byte aligned, carried in L1), |q| made by one vpabsb per vector and tile and q's
// sign put on the token's code by vpsignb. The same integer sums and float step as the expanded
// signed form (so the same bits), without the expansion's 17 stores a block: at 8 tokens a chunk
// they were a third of the GEMM's time. Calls of under 16 tokens (a whole panel's quarters
// together, as DirectTile8's kSigned form: 2-7 tokens stream their weights from memory,
// docs/performance.md "bfp8 int8: 8 rows with the quarters inner") and the tokens past a call's
// last 8-token group (one quarter a segment). prefetch[i] (nullptr: none) asks for quarter i's half
// tiles kPrefetchTiles blocks ahead.
template <int NT>
void DirectTileOverBlocks(const uint8_t* const* codes, const float* const* scales, int nq,
                          int64_t b0, int64_t b1, const QuantInput& x, int64_t t0,
                          const bool* prefetch, float* const* acc) {
  constexpr int64_t kHalf = BfpInt8HalfBytes(BfpFormat::kBfp8);
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* xq[NT];
  for (int t = 0; t < NT; ++t) xq[t] = x.Codes(t0 + t);
  for (int64_t b = b0; b < b1; ++b)
    for (int i = 0; i < nq; ++i) {
      const uint8_t* q8 = codes[i] + (b - b0) * kHalf;
      if (prefetch != nullptr && prefetch[i]) PrefetchHalfAhead(q8, b, x.blocks);
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
      __m256 sums[NT];
      for (int t = 0; t < NT; ++t) sums[t] = _mm256_load_ps(acc[i] + 8 * t);
      ContractStep<NT>(_mm256_set1_ps(scales[i][2 * (b - b0)]), x, t0, b, isum, sums);
      for (int t = 0; t < NT; ++t) _mm256_store_ps(acc[i] + 8 * t, sums[t]);
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
// int7: q read in place into ymm13 and multiplied as the signed operand by each token's x + 64
// (unsigned): no sign step.
#define WC_BFP8_OFFSET_TOKEN(XO, T, TMP)                      \
  "vpbroadcastd " #XO "(%9), %%ymm" #TMP "\n\t"                \
  "vpmaddubsw %%ymm13, %%ymm" #TMP ", %%ymm" #TMP "\n\t"       \
  "vpmaddwd %10, %%ymm" #TMP ", %%ymm" #TMP "\n\t"             \
  "vpaddd %%ymm" #TMP ", %" #T ", %" #T "\n\t"
#define WC_BFP8_OFFSET_VECTOR(QO, XO)                                                     \
  "vmovdqu " #QO "(%8), %%ymm13\n\t"                                                     \
  WC_BFP8_OFFSET_TOKEN(XO + 0, 0, 14) WC_BFP8_OFFSET_TOKEN(XO + 4, 1, 15)                \
  WC_BFP8_OFFSET_TOKEN(XO + 8, 2, 14) WC_BFP8_OFFSET_TOKEN(XO + 12, 3, 15)               \
  WC_BFP8_OFFSET_TOKEN(XO + 16, 4, 14) WC_BFP8_OFFSET_TOKEN(XO + 20, 5, 15)              \
  WC_BFP8_OFFSET_TOKEN(XO + 24, 6, 14) WC_BFP8_OFFSET_TOKEN(XO + 28, 7, 15)
#define WC_BFP8_BLOCK(VECTOR)                                                                \
  VECTOR(0, 0) VECTOR(64, 32) VECTOR(128, 64) VECTOR(192, 96) VECTOR(256, 128)               \
  VECTOR(320, 160) VECTOR(384, 192) VECTOR(448, 224)
// clang-format on

// bfp8's tile of 8 tokens, group `group` of x.codes_by8 (tokens 8 group .. 8 group + 7), over
// blocks [b0, b1) of one quarter, in one of three forms (kForm); the float sums carried on in acc
// ([8][8] f32, 32-byte aligned; 16 registers hold the 8 integer sums and the step's operands, not
// 8 more), `scales` as DirectTileOverBlocks'.
//
// kSignPass: from the segment's signs and magnitudes (`block0`: block b0's SignsAndMagnitudes on,
// 512 bytes a block; `corrections`: block b0's on). |q| and q's sign mask are made once a segment
// and shared by every 8 tokens of the chunk, and q's sign goes onto each token's code by xor with
// the mask instead of vpsignb: ~x = -x - 1, so a negative q adds |q| (-x - 1) = q x + q, and a
// block's sum, started at its correction, comes out sum_k q x (exact: the pair sums stay within
// 2 x 127 x 128 < 2^15). vpsignb and vpabsb compete with the multiplies for their pipes where
// vpxor and loads do not (docs/performance.md "bfp8 int8 in 8-token tiles", "bfp8 int8: signs
// made once a segment, chunks of 512"). The same integer sums and float step as the portable
// kernel, so the same bits.
//
// The integer loop is written out in assembly: as intrinsics, GCC 12 loaded all 8 tokens' codes
// ahead and kept three of the 8 sums on the stack, each step then waiting on a store (slower than
// the vpsignb tile it replaces; the same section). The 8 sums stay in registers, |q|, the sign
// mask and two temporaries in ymm12-15.
//
// kSigned: calls of 8-15 tokens (kSignPassTokens) make no sign pass, where it would serve one
// group only. q is read in place (`block0`: the quarter's codes at block b0, a half tile apart;
// `corrections` unused), |q| made by one vpabsb shared by the 8 tokens and q's sign put on each
// token's code by vpsignb, so its sums start at zero. Against that tile's 4 tokens twice: half
// the vpabsb, and the sums kept in registers. These calls stream their weights from memory once,
// so they run a whole panel's quarters together (`nq` of them, quarter i's block0[i], scales[i]
// and acc[i]), each block's in turn: both half streams are read at one steady pace, each asking
// for its lines kPrefetchTiles blocks ahead where prefetch[i] (the first quarter of its half).
// Run quarter by quarter over a segment, the memory sat idle while the second quarter of each
// half re-read the first's lines from L1 (docs/performance.md "bfp8 int8: 8 rows with the
// quarters inner"). The sign pass's tiles take one quarter (nq 1) and no prefetch.
//
// kOffset (int7, x.codes_by8 holding x + 64): q read in place as kSigned reads it, multiplied as
// it lies by each token's x + 64 (WC_BFP8_OFFSET_VECTOR: 3 operations a token and vector against
// the sign pass's 4), each block's sums started at its Int7Correction: `corrections` (block b0's
// on, made by the segment pass) or, given none, made here for the 8 tokens (calls of 8-15).
enum class Tile8Form : uint8_t { kSignPass, kSigned, kOffset };
template <Tile8Form kForm>
void DirectTile8(const uint8_t* const* block0, const float* const* scales,
                 const __m256i* corrections, int nq, int64_t b0, int64_t b1, const QuantInput& x,
                 int64_t group, const bool* prefetch, float* const* acc) {
  constexpr bool kSignPass = kForm == Tile8Form::kSignPass;
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
      const __m256i start = kForm == Tile8Form::kSigned           ? _mm256_setzero_si256()
                            : kSignPass || corrections != nullptr ? corrections[b - b0]
                                                                  : Int7Correction(wb);
      for (int t = 0; t < 8; ++t) isum[t] = start;
      // clang-format off
      if constexpr (kForm == Tile8Form::kOffset)
        __asm__(WC_BFP8_BLOCK(WC_BFP8_OFFSET_VECTOR)
                : "+x"(isum[0]), "+x"(isum[1]), "+x"(isum[2]), "+x"(isum[3]), "+x"(isum[4]),
                  "+x"(isum[5]), "+x"(isum[6]), "+x"(isum[7])
                : "r"(wb), "r"(xb), "x"(ones)
                : "xmm13", "xmm14", "xmm15", "memory");
      else if constexpr (kSignPass)
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
#undef WC_BFP8_OFFSET_VECTOR
#undef WC_BFP8_OFFSET_TOKEN
#undef WC_BFP8_SIGNED_VECTOR
#undef WC_BFP8_MASKED_VECTOR
#undef WC_BFP8_TOKENS
#undef WC_BFP8_TOKEN
