// bfp_int8_avx2.cpp's bfp4 tiles: a quarter tile expanded once per chunk of tokens into L1, in
// its signed or its quartered form (ExpandQuarter), and the 4-token tile over a segment of them
// (TileOverBlocks), for calls of 7 tokens or more; calls of fewer multiply 16-bit words read in
// place (Bfp4WordTile). Included by bfp_int8_avx2.cpp alone, inside its
// `#pragma GCC target("avx2,fma,f16c")` region and anonymous namespace, after
// bfp8_int8_tiles_avx2-inl.h (ContractStep) and its constants (kPrefetchTiles).
#pragma once

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

// bfp4 in 16-bit products, for calls of up to kBfp4WordTokens tokens (decoding rows, short
// verify steps, one token): nothing expanded to memory and no table lookups. A nibble becomes a
// signed 16-bit word by two in-lane shifts (left to the word's top, arithmetic right by 12), the
// k's shift goes onto the token's code instead (x' = x 2^shift, at most 127 x 16, made once a
// half tile a token), and vpmaddwd multiplies (k, k + 2) or (k + 1, k + 3) pairs into each row's
// 32-bit lane. The lookups and widenings the expanded tile and the old one-token tile spent (two
// vpmovsxbw and a vextracti128 a vector: cross-lane operations, one port's work) were what bound
// them (docs/performance.md "bfp4 int8 in 16-bit words"). Each half tile is read once for both its
// quarters, so both quarters' reads stream at one pace. Integer sums exact, the float step
// ContractStep's: the same bits as every other kernel.
constexpr int kBfp4WordTokens = 6;
static_assert(kBfp4WordTokens <= gemm::kMaxTileTokens, "dispatched by gemm::WithTileHeight");

// x' of NT tokens over one half tile's 32 k (`half`: its header, byte k the shift of k): xs[t]
// 32 int16 in the order the tile's pairs read, vector v's 8 words (k 4v, 4v+2, 4v+1, 4v+3, then
// the same + 16) at word 16 (v & 1) + 8 (v >> 1).
template <int NT>
inline void Bfp4WordInputs(const uint8_t* half, const QuantInput& x, int64_t t0, int64_t b,
                           int16_t (*xs)[32]) {
  const __m256i m = _mm256_shuffle_epi8(PowersOfTwo(), Load(half));
  const __m256i m_lo = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(m));
  const __m256i m_hi = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(m, 1));
  // Within each 4 words: k, k + 2, k + 1, k + 3.
  const __m256i order = _mm256_setr_epi8(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15, 0, 1,
                                         4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15);
  for (int t = 0; t < NT; ++t) {
    const int8_t* xq = x.Codes(t0 + t) + 32 * b;
    const __m128i* p = reinterpret_cast<const __m128i*>(xq);
    const __m256i lo = _mm256_shuffle_epi8(
        _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(p)), m_lo), order);  // k 0-15
    const __m256i hi = _mm256_shuffle_epi8(
        _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(p + 1)), m_hi), order);  // 16-31
    // [v0 | v0 + 16 | v2 | v2 + 16] and [v1 | v1 + 16 | v3 | v3 + 16], 4 words each.
    _mm256_store_si256(reinterpret_cast<__m256i*>(xs[t]), _mm256_unpacklo_epi64(lo, hi));
    _mm256_store_si256(reinterpret_cast<__m256i*>(xs[t] + 16), _mm256_unpackhi_epi64(lo, hi));
  }
}

// The integer sums of G tokens (xs: their x', Bfp4WordInputs) over quarter s of one half tile:
// isum[t] lane r = sum_k q[r, k] x[t, k] for row 8 s + r of the half. The loop over the 4 vectors
// is not unrolled: GCC 12 otherwise makes every vector's words first and keeps them on the stack
// (4 tokens ran at half speed).
template <int G>
inline void Bfp4WordSums(const uint8_t* half, int s, const int16_t (*xs)[32], __m256i (&isum)[G]) {
  for (int t = 0; t < G; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 1
  for (int v = 0; v < 4; ++v) {
    // Row r's lane: 16-bit words (byte 0's, byte 2's) or (byte 1's, byte 3's) nibbles: low
    // nibbles k 4v + j, high ones k 16 + 4v + j.
    const __m256i raw = Load(half + 32 + 64 * v + 32 * s);
    const __m256i w02 = _mm256_srai_epi16(_mm256_slli_epi16(raw, 12), 12);
    const __m256i w13 = _mm256_srai_epi16(_mm256_slli_epi16(raw, 4), 12);
    const __m256i w02h = _mm256_srai_epi16(_mm256_slli_epi16(raw, 8), 12);
    const __m256i w13h = _mm256_srai_epi16(raw, 12);
    const int off = 16 * (v & 1) + 8 * (v >> 1);
    for (int t = 0; t < G; ++t) {
      const int16_t* xv = xs[t] + off;
      const __m256i a = _mm256_add_epi32(_mm256_madd_epi16(w02, Bcast4(xv)),
                                         _mm256_madd_epi16(w13, Bcast4(xv + 2)));
      const __m256i c = _mm256_add_epi32(_mm256_madd_epi16(w02h, Bcast4(xv + 4)),
                                         _mm256_madd_epi16(w13h, Bcast4(xv + 6)));
      isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(a, c));
    }
  }
}

// Tokens [t0, t0 + NT) over panel p's half h (rows 16 h .. 16 h + 16 of the panel, quarters 2 h and
// 2 h + 1), every block: acc[s][t] (8 rows) the contract's float sums, from zero. Tokens go 4 at a
// time over each quarter of a block (in L1 after the first), their sums in registers.
template <int NT>
void Bfp4WordTile(const BfpPanels& w, int64_t p, int64_t h, const QuantInput& x, int64_t t0,
                  __m256 (&acc)[2][NT]) {
  constexpr BfpFormat F = BfpFormat::kBfp4;
  constexpr int G1 = NT < 4 ? NT : 4, G2 = NT - G1;  // the groups: tokens [0, G1), [G1, NT)
  static_assert(G2 <= 4, "two groups of at most 4");
  const int64_t nb = w.k_tiles(), half_bytes = BfpInt8HalfBytes(F);
  // x' of block b in xs[b & 1], made a block ahead: its stores then reach L1 long before the
  // broadcasts read them back.
  alignas(32) int16_t xs[2][NT][32];
  for (int s = 0; s < 2; ++s)
    for (int t = 0; t < NT; ++t) acc[s][t] = _mm256_setzero_ps();
  const uint8_t* const half0 = w.data() + p * w.panel_bytes();
  Bfp4WordInputs<NT>(half0 + BfpInt8HalfOffset(F, nb, 0, h), x, t0, 0, xs[0]);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* half = half0 + BfpInt8HalfOffset(F, nb, b, h);
    if (b + kPrefetchTiles < nb)
      for (int64_t o = 0; o < half_bytes; o += 64)
        _mm_prefetch(reinterpret_cast<const char*>(half + kPrefetchTiles * half_bytes + o),
                     _MM_HINT_T0);
    if (b + 1 < nb)
      Bfp4WordInputs<NT>(half0 + BfpInt8HalfOffset(F, nb, b + 1, h), x, t0, b + 1, xs[(b + 1) & 1]);
    const __m256 d = _mm256_set1_ps(w.Int8Scale(p, b, h));
    for (int s = 0; s < 2; ++s) {
      __m256i isum1[G1];
      Bfp4WordSums<G1>(half, s, xs[b & 1], isum1);
      ContractStep<G1>(d, x, t0, b, isum1, *reinterpret_cast<__m256(*)[G1]>(acc[s]));
      if constexpr (G2 > 0) {
        __m256i isum2[G2];
        Bfp4WordSums<G2>(half, s, xs[b & 1] + G1, isum2);
        ContractStep<G2>(d, x, t0 + G1, b, isum2, *reinterpret_cast<__m256(*)[G2]>(acc[s] + G1));
      }
    }
  }
}
