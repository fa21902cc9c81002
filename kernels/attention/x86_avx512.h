// Shared pieces of the hand-written AVX-512 kernels (int8_vnni.cpp,
// decode_attention_bf16dot.cpp), for the instructions Highway 1.0.3 (Debian 12) has no op for.
// Everything here is compiled for base AVX-512 and inlines into the kernels' wider targets; the
// kernels run only where the kernel table (kernel_table.h) found their family on (cpu_kernels.h).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/attention/kv_rows.h"
#include "kernels/attention/prefetch_stream.h"

#define WC_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#define WC_AVX512_INLINE WC_AVX512 inline __attribute__((always_inline))
// The int8 family's target (cpu_kernels.h's kAvx512Vnni): its kernels and its AVX-512 roundings.
#define WC_VNNI __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))

namespace wc {
namespace x86 {

// Rows ahead of the current one whose cache lines the kernels prefetch: one-byte rows are short,
// so further ahead than the f32 kernels' kChunkPrefetchRows to keep as many bytes in flight.
constexpr int64_t kAheadRows = 64;

// Lane j of the result: the sum of the 16 lanes of v[j], in a fixed pairing (so a lane's sum
// depends only on its own vector).
WC_AVX512_INLINE __m512 Sum16Ps(const __m512* v) {
  __m512 t[8], u[4];
  for (int i = 0; i < 8; ++i)
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {
    const __m512i a = _mm512_castps_si512(t[2 * i]), b = _mm512_castps_si512(t[2 * i + 1]);
    u[i] = _mm512_add_ps(_mm512_castsi512_ps(_mm512_unpacklo_epi64(a, b)),
                         _mm512_castsi512_ps(_mm512_unpackhi_epi64(a, b)));
  }
  const __m512 w01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 w23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w01, w23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(w01, w23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// In place: r[i] (row i, 16 32-bit lanes) becomes column i (lane j = row j's lane i), for the
// kernels that hold 16 rows in the lanes of one vector. 64 shuffles.
WC_AVX512_INLINE void Transpose16x16Epi32(__m512i* r) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {  // per 128-bit block: rows i, i + 1 interleaved by lane
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // r[4g + m], block b: lane 4b + m of rows 4g .. 4g + 3
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int m = 0; m < 4; ++m) {  // a 4 x 4 transpose of 128-bit blocks
    const __m512i a = _mm512_shuffle_i32x4(r[m], r[4 + m], 0x44);
    const __m512i b = _mm512_shuffle_i32x4(r[m], r[4 + m], 0xee);
    const __m512i c = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0x44);
    const __m512i d = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0xee);
    t[m] = _mm512_shuffle_i32x4(a, c, 0x88);
    t[4 + m] = _mm512_shuffle_i32x4(a, c, 0xdd);
    t[8 + m] = _mm512_shuffle_i32x4(b, d, 0x88);
    t[12 + m] = _mm512_shuffle_i32x4(b, d, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// Lanes [0, n) of a 16-lane mask (none for n <= 0, all for n >= 16).
WC_AVX512_INLINE __mmask16 FirstLanes(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1);
}

// oh[0 : 64] += acc in column order, where accumulator m holds columns 16j + 4m + i of 128-bit
// block j (i < 4), the pairwise-row P.V kernels' layout: a 4 x 4 transpose of 128-bit blocks.
WC_AVX512_INLINE void AddBlockTransposed(const __m512* acc, float* oh) {
  const __m512 t0 = _mm512_shuffle_f32x4(acc[0], acc[1], 0x44);
  const __m512 t1 = _mm512_shuffle_f32x4(acc[0], acc[1], 0xee);
  const __m512 t2 = _mm512_shuffle_f32x4(acc[2], acc[3], 0x44);
  const __m512 t3 = _mm512_shuffle_f32x4(acc[2], acc[3], 0xee);
  const __m512 out[4] = {_mm512_shuffle_f32x4(t0, t2, 0x88), _mm512_shuffle_f32x4(t0, t2, 0xdd),
                         _mm512_shuffle_f32x4(t1, t3, 0x88), _mm512_shuffle_f32x4(t1, t3, 0xdd)};
  for (int m = 0; m < 4; ++m)
    _mm512_storeu_ps(oh + 16 * m, _mm512_add_ps(_mm512_loadu_ps(oh + 16 * m), out[m]));
}

// The scales of rows [p, p + 16) of scaled one-byte rows (lanes past m.rows: 0) times
// code_factor: the bf16 leading each row gathered, or the tensor scale.
WC_AVX512_INLINE __m512 RowScales16(const RowsRef& m, int64_t p, float code_factor) {
  const __mmask16 lanes = FirstLanes(m.rows - p);
  if (!m.row_scale) return _mm512_maskz_mov_ps(lanes, _mm512_set1_ps(m.tensor_scale * code_factor));
  // 16 scalar loads (integer ports, idle in these kernels) instead of a vpgatherdd, which Zen 4
  // runs as a long microcoded sequence on the vector side.
  alignas(32) uint16_t bits[16] = {};
  const int64_t n = std::min<int64_t>(16, m.rows - p);
  const uint8_t* row = m.data + p * m.row_bytes;
  for (int64_t i = 0; i < n; ++i) std::memcpy(&bits[i], row + i * m.row_bytes, 2);
  const __m512i wide =
      _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(bits)));
  return _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)),
                       _mm512_set1_ps(code_factor));
}

// One 64-byte vector's storage, for scratch buffers of vectors (a std::vector of __m512i would drop
// its alignment attribute).
struct alignas(64) Block64 {
  union {
    int32_t i32[16];
    float f32[16];
  };
};

// Per-thread scratch of the P.V kernels that widen V once for every head of a group: `sums`, the
// heads' accumulators between blocks (zeroed), and `widened`, one block of widened row pairs.
struct WidenScratch {
  Block64* sums;
  __m512i* widened;
  WidenScratch(int64_t n_sums, int64_t n_widened) {
    thread_local std::vector<Block64> s, w;
    s.assign(static_cast<size_t>(n_sums), Block64{});
    w.resize(static_cast<size_t>(n_widened));
    sums = s.data();
    widened = reinterpret_cast<__m512i*>(w.data());
  }
};

// The rows of m in blocks of 16, for the kernels that hold a block's rows in the lanes of a vector:
//   for (RowBlocks b(m, along); b.Next();) ... rows [b.p, b.p + b.valid)
// Each Next prefetches m's rows kAheadRows ahead and `along`'s (the V of the chunk) at the same
// pace.
struct RowBlocks {
  PrefetchStream ahead, along;
  int64_t rows, p = -16, valid = 0;
  RowBlocks(const RowsRef& m, const RowsRef& along_m) : ahead(m), along(along_m), rows(m.rows) {}
  bool Next() {
    p += 16;
    if (p >= rows) return false;
    valid = std::min<int64_t>(16, rows - p);
    ahead.Rows(p + kAheadRows, p + kAheadRows + 16);
    along.Rows(p, p + 16);
    return true;
  }
};

// The row pairs of v (an odd last row pairs with itself) in blocks of at most block_pairs:
//   for (PairBlocks b(v, along, n); b.Next();) ... pairs [b.pair0, b.pair0 + b.n_pairs)
// Each Next prefetches v's rows kAheadRows ahead and `along`'s (the next chunk's K) at the same
// pace.
struct PairBlocks {
  PrefetchStream ahead, along;
  int64_t block_pairs, total_pairs, pair0 = 0, n_pairs = 0;
  PairBlocks(const RowsRef& v, const RowsRef& along_m, int64_t block)
      : ahead(v), along(along_m), block_pairs(block), total_pairs((v.rows + 1) / 2) {}
  bool Next() {
    pair0 += n_pairs;
    if (pair0 >= total_pairs) return false;
    n_pairs = std::min(block_pairs, total_pairs - pair0);
    const int64_t p0 = 2 * pair0;
    ahead.Rows(p0 + kAheadRows, p0 + kAheadRows + 2 * n_pairs);
    along.Rows(p0, p0 + 2 * n_pairs);
    return true;
  }
};

// fn(integral_constant NH, integral_constant KC) for a group of nh in {1, 2, 4} heads and rows of
// cols values: KC = cols / 64 for the widths the kernels unroll (64, 128, 256), 0 for any other.
template <class Fn>
void WithGroupAndWidth(int nh, int64_t cols, const Fn& fn) {
  auto with_nh = [&](auto kc) {
    if (nh == 1) return fn(std::integral_constant<int, 1>(), kc);
    if (nh == 2) return fn(std::integral_constant<int, 2>(), kc);
    return fn(std::integral_constant<int, 4>(), kc);
  };
  if (cols == 64) return with_nh(std::integral_constant<int, 1>());
  if (cols == 128) return with_nh(std::integral_constant<int, 2>());
  if (cols == 256) return with_nh(std::integral_constant<int, 4>());
  return with_nh(std::integral_constant<int, 0>());
}

}  // namespace x86
}  // namespace wc
