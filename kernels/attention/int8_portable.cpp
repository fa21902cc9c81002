// int8's portable integer kernels (int8.h): the VNNI kernels' arithmetic - exact int32 sums of
// the rounded query or weights times the codes, then the contract's scaling - on any CPU, through
// Highway (compiled once per SIMD target, chosen at run time). Bit for bit what int8_vnni.cpp
// computes; int8.cpp rounds the operands and calls these.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/attention/int8.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/int8_portable.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace wc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

// int8 rows with int16 weights, one head at a time, for groups too small
// to share the widened pairs: exact int32 sums per column, then o = fma(float(sum), unit[h], o) -
// the VNNI kernel's arithmetic, portably.
void WeightedInt16Impl(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                       const RowsRef& v, float* o) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int8_t, DF> d8;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(di)), cols = v.cols;
  const uint8_t* codes = v.data + (v.row_scale ? 2 : 0);
  for (int h = 0; h < n_heads; ++h) {
    const int16_t* wh = wq + h * wq_stride;
    float* oh = o + h * cols;
    int64_t c = 0;
    for (; c + nl <= cols; c += nl) {
      auto acc = hn::Zero(di);
      for (int64_t p = 0; p < v.rows; ++p) {
        const auto code = hn::PromoteTo(
            di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(codes + p * v.row_bytes + c)));
        acc = hn::Add(acc, hn::Mul(code, hn::Set(di, wh[p])));
      }
      // A fused multiply-add on every target (MulAdd is two roundings without FMA).
      HWY_ALIGN int32_t sums[HWY_MAX_BYTES / sizeof(int32_t)];
      hn::Store(acc, di, sums);
      for (int64_t l = 0; l < nl; ++l)
        oh[c + l] = std::fma(static_cast<float>(sums[l]), unit[h], oh[c + l]);
    }
    for (; c < cols; ++c) {
      int32_t acc = 0;
      for (int64_t p = 0; p < v.rows; ++p)
        acc += wh[p] * static_cast<int8_t>(codes[p * v.row_bytes + c]);
      oh[c] = std::fma(static_cast<float>(acc), unit[h], oh[c]);
    }
  }
}

#if HWY_TARGET != HWY_SCALAR
// int8 Q.K^T without the VNNI kernel (the contract in int8.h, bit for bit): the
// heads in the lanes of a vector, the query transposed once per call into words of two int16 (qt:
// [groups][cols / 2][lanes]), each row's codes widened to int16 once and its words broadcast, so
// one int16 multiply-add pair (vpmaddwd) per word and 4 rows at a time give every head's partial
// sums with no horizontal reduction; exact int32, then float(dot) * (head_scale * row_scale).
// An odd last column pairs with a zero.
void Int8ScoresHeadsInLanesImpl(const int8_t* q8, int n_heads, const float* head_scale,
                                const RowsRef& k, float* scores) {
  const hn::ScalableTag<int32_t> di;
  const hn::Repartition<int16_t, decltype(di)> d16;
  const hn::Rebind<float, decltype(di)> df;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(di)), cols = k.cols, n2 = (cols + 1) / 2;
  const int64_t rows = k.rows, groups = (n_heads + nl - 1) / nl;
  const int64_t n16 = static_cast<int64_t>(hn::Lanes(d16));
  thread_local std::vector<int32_t> qt;    // [groups, n2, nl]; heads past n_heads: 0
  thread_local std::vector<int16_t> krow;  // [4, cols + n16]: rows widened
  thread_local std::vector<float> hs;      // [groups * nl] head scales
  qt.assign(static_cast<size_t>(groups * n2 * nl), 0);
  krow.resize(static_cast<size_t>(4 * (cols + n16)));
  hs.assign(static_cast<size_t>(groups * nl), 0.0f);
  for (int h = 0; h < n_heads; ++h) {
    hs[h] = head_scale[h];
    for (int64_t w = 0; w < n2; ++w) {
      const uint32_t lo = static_cast<uint16_t>(q8[h * cols + 2 * w]);
      const uint32_t hi = 2 * w + 1 < cols ? static_cast<uint16_t>(q8[h * cols + 2 * w + 1]) : 0;
      qt[((h / nl) * n2 + w) * nl + h % nl] = static_cast<int32_t>(lo | hi << 16);
    }
  }
  const int64_t code0 = k.row_scale ? 2 : 0, kstride = cols + n16;
  HWY_ALIGN float out[HWY_MAX_BYTES / sizeof(float)];
  for (int64_t p0 = 0; p0 < rows; p0 += 4) {
    const int nr = static_cast<int>(std::min<int64_t>(4, rows - p0));
    for (int r = 0; r < 4; ++r) {  // a tail repeats its last row (not stored)
      const int8_t* codes = reinterpret_cast<const int8_t*>(
          k.data + (p0 + std::min(r, nr - 1)) * k.row_bytes + code0);
      int16_t* dst = krow.data() + r * kstride;
      int64_t c = 0;
      for (; c + n16 <= cols; c += n16)
        hn::StoreU(hn::PromoteTo(d16, hn::LoadU(d8, codes + c)), d16, dst + c);
      for (; c < cols; ++c) dst[c] = codes[c];
      dst[cols] = 0;  // an odd last column's partner
    }
    float row_scale[4];
    for (int r = 0; r < nr; ++r) row_scale[r] = k.RowScale(p0 + r);
    for (int64_t g = 0; g < groups; ++g) {
      const int32_t* qg = qt.data() + g * n2 * nl;
      auto a0 = hn::Zero(di), a1 = hn::Zero(di), a2 = hn::Zero(di), a3 = hn::Zero(di);
      auto b0 = hn::Zero(di), b1 = hn::Zero(di), b2 = hn::Zero(di), b3 = hn::Zero(di);
      for (int64_t w = 0; w < n2; ++w) {
        const auto qw = hn::BitCast(d16, hn::LoadU(di, qg + w * nl));
        int32_t kw[4];
        for (int r = 0; r < 4; ++r) std::memcpy(&kw[r], krow.data() + r * kstride + 2 * w, 4);
        a0 = hn::ReorderWidenMulAccumulate(di, qw, hn::BitCast(d16, hn::Set(di, kw[0])), a0, b0);
        a1 = hn::ReorderWidenMulAccumulate(di, qw, hn::BitCast(d16, hn::Set(di, kw[1])), a1, b1);
        a2 = hn::ReorderWidenMulAccumulate(di, qw, hn::BitCast(d16, hn::Set(di, kw[2])), a2, b2);
        a3 = hn::ReorderWidenMulAccumulate(di, qw, hn::BitCast(d16, hn::Set(di, kw[3])), a3, b3);
      }
      const decltype(a0) acc[4] = {
          hn::RearrangeToOddPlusEven(a0, b0), hn::RearrangeToOddPlusEven(a1, b1),
          hn::RearrangeToOddPlusEven(a2, b2), hn::RearrangeToOddPlusEven(a3, b3)};
      const auto vhs = hn::LoadU(df, hs.data() + g * nl);
      const int valid = static_cast<int>(std::min<int64_t>(nl, n_heads - g * nl));
      for (int r = 0; r < nr; ++r) {
        // float(dot) * (head_scale * row_scale), the contract's two products.
        const auto factor = hn::Mul(vhs, hn::Set(df, row_scale[r]));
        hn::Store(hn::Mul(hn::ConvertTo(df, acc[r]), factor), df, out);
        for (int j = 0; j < valid; ++j) scores[(g * nl + j) * rows + p0 + r] = out[j];
      }
    }
  }
}

// int8 P.V without the VNNI kernel (its contract, bit for bit): rows taken in pairs, each pair's
// codes widened to int16 and interleaved once per segment for every head (vw), a pair's two
// int16 weights one broadcast word, one int16 multiply-add pair per 2 * lanes products; exact
// int32 sums, then o = fma(float(sum), unit[h], o). Columns past the last whole vector: scalar.
void WeightedInt16PairsImpl(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                            const RowsRef& v, float* o) {
  const hn::ScalableTag<int32_t> di;
  const hn::Repartition<int16_t, decltype(di)> d16;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(di)), n16 = 2 * nl;
  const int64_t rows = v.rows, cols = v.cols, n_pairs = (rows + 1) / 2, blocks = cols / n16;
  const uint8_t* codes = v.data + (v.row_scale ? 2 : 0);
  // vw: [n_pairs, blocks, 2 (interleaved low / high halves), n16] int16.
  thread_local std::vector<int16_t> vw;
  vw.resize(static_cast<size_t>(n_pairs * blocks * 2 * n16));
  for (int64_t i = 0; i < n_pairs; ++i) {
    const int8_t* ra = reinterpret_cast<const int8_t*>(codes + 2 * i * v.row_bytes);
    const int8_t* rb = 2 * i + 1 < rows ? ra + v.row_bytes : ra;  // odd last row: weight 0
    for (int64_t j = 0; j < blocks; ++j) {
      const auto a = hn::PromoteTo(d16, hn::LoadU(d8, ra + j * n16));
      const auto b = hn::PromoteTo(d16, hn::LoadU(d8, rb + j * n16));
      int16_t* dst = vw.data() + ((i * blocks + j) * 2) * n16;
      hn::StoreU(hn::InterleaveLower(d16, a, b), d16, dst);
      hn::StoreU(hn::InterleaveUpper(d16, a, b), d16, dst + n16);
    }
  }
  // The column of each 32-bit lane of the low / high vectors: the same interleave of indices.
  HWY_ALIGN int32_t lane_col[2][HWY_MAX_BYTES / sizeof(int32_t)];
  {
    const auto idx = hn::Iota(d16, 0);
    const auto mask = hn::Set(di, 0xffff);
    hn::Store(hn::And(hn::BitCast(di, hn::InterleaveLower(d16, idx, idx)), mask), di, lane_col[0]);
    hn::Store(hn::And(hn::BitCast(di, hn::InterleaveUpper(d16, idx, idx)), mask), di, lane_col[1]);
  }
  HWY_ALIGN int32_t sums[2][HWY_MAX_BYTES / sizeof(int32_t)];
  for (int h = 0; h < n_heads; ++h) {
    const int16_t* wh = wq + h * wq_stride;
    for (int64_t j = 0; j < blocks; ++j) {
      auto lo0 = hn::Zero(di), lo1 = hn::Zero(di), hi0 = hn::Zero(di), hi1 = hn::Zero(di);
      for (int64_t i = 0; i < n_pairs; ++i) {
        int32_t pair;
        std::memcpy(&pair, wh + 2 * i, 4);
        const auto wp = hn::BitCast(d16, hn::Set(di, pair));
        const int16_t* src = vw.data() + ((i * blocks + j) * 2) * n16;
        lo0 = hn::ReorderWidenMulAccumulate(di, hn::LoadU(d16, src), wp, lo0, lo1);
        hi0 = hn::ReorderWidenMulAccumulate(di, hn::LoadU(d16, src + n16), wp, hi0, hi1);
      }
      hn::Store(hn::RearrangeToOddPlusEven(lo0, lo1), di, sums[0]);
      hn::Store(hn::RearrangeToOddPlusEven(hi0, hi1), di, sums[1]);
      float* oh = o + h * cols + j * n16;
      for (int m = 0; m < 2; ++m)
        for (int64_t l = 0; l < nl; ++l) {
          float& out = oh[lane_col[m][l]];
          out = std::fma(static_cast<float>(sums[m][l]), unit[h], out);
        }
    }
    for (int64_t c = blocks * n16; c < cols; ++c) {
      int32_t acc = 0;
      for (int64_t p = 0; p < rows; ++p)
        acc += wh[p] * static_cast<int8_t>(codes[p * v.row_bytes + c]);
      o[h * cols + c] = std::fma(static_cast<float>(acc), unit[h], o[h * cols + c]);
    }
  }
}
#else
// HWY_SCALAR (no lanes to share): the same integers one at a time, and the per-head P.V kernel.
void Int8ScoresHeadsInLanesImpl(const int8_t* q8, int n_heads, const float* head_scale,
                                const RowsRef& k, float* scores) {
  const int64_t cols = k.cols, code0 = k.row_scale ? 2 : 0;
  for (int64_t p = 0; p < k.rows; ++p) {
    const int8_t* codes = reinterpret_cast<const int8_t*>(k.data + p * k.row_bytes + code0);
    const float row_scale = k.RowScale(p);
    for (int h = 0; h < n_heads; ++h) {
      int32_t dot = 0;
      for (int64_t c = 0; c < cols; ++c) dot += q8[h * cols + c] * codes[c];
      scores[h * k.rows + p] = static_cast<float>(dot) * (head_scale[h] * row_scale);
    }
  }
}
void WeightedInt16PairsImpl(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                            const RowsRef& v, float* o) {
  WeightedInt16Impl(wq, wq_stride, unit, n_heads, v, o);
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace wc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wc {

HWY_EXPORT(WeightedInt16Impl);
HWY_EXPORT(Int8ScoresHeadsInLanesImpl);
HWY_EXPORT(WeightedInt16PairsImpl);

void Int8ScoresHeadsInLanesKernel(const int8_t* q8, int n_heads, const float* head_scale,
                                  const RowsRef& k, float* scores) {
  HWY_DYNAMIC_DISPATCH(Int8ScoresHeadsInLanesImpl)(q8, n_heads, head_scale, k, scores);
}

void Int8WeightedPairsKernel(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                             const RowsRef& v, float* o) {
  HWY_DYNAMIC_DISPATCH(WeightedInt16PairsImpl)(wq, wq_stride, unit, n_heads, v, o);
}

void Int8WeightedPerHeadKernel(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                               const RowsRef& v, float* o) {
  HWY_DYNAMIC_DISPATCH(WeightedInt16Impl)(wq, wq_stride, unit, n_heads, v, o);
}

}  // namespace wc
#endif  // HWY_ONCE
