// The int8 KV format (int8.h): the rounding of the query and of the P.V weights (portable and
// AVX-512) and the entries the kernel table runs, which round their operand and call the kernels
// proper - portable (int8_portable.cpp) or AVX-512 VNNI (int8_vnni.cpp). The row codec is inline
// in int8.h.
#include "kernels/attention/int8.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/attention/decode_attention.h"
#include "kernels/attention/decode_attention_f32.h"
#include "kernels/attention/x86_avx512.h"

namespace wc {
namespace {

// The AVX-512 roundings run where the VNNI kernels do (the same results either way).
bool VnniOn() {
  return KernelsOn(CpuKernels::kAvx512Vnni);
}

// The largest |x[i]|, i < n, as its f32 bits (an integer max: the bits of non-negative floats
// order as their values; >= 0x7f800000 means a NaN or Inf is there).
inline uint32_t MaxAbsBits(const float* x, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, 4);
    m = std::max(m, bits & 0x7fffffffu);
  }
  return m;
}
inline float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
constexpr uint32_t kNonFinite = 0x7f800000u;
constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: (x + kRound) - kRound rounds x to even

// out[i] = round-to-nearest-even(x[i] / step) with step = max |x| / limit, the portable rounding
// of the query (int8) and of the P.V weights (int16); returns step (0 when all x are 0, NaN when
// one is NaN or Inf - then out is all 0). The AVX-512 versions below do the same operations.
// The all-zero and non-finite cases of a rounding whose largest |x| has f32 bits max_bits: out
// all 0 and *step 0 or NaN; false when max_bits is an ordinary number.
template <class T>
bool ZeroOrNonFinite(uint32_t max_bits, int64_t n, T* out, float* step) {
  if (max_bits != 0 && max_bits < kNonFinite) return false;
  for (int64_t i = 0; i < n; ++i) out[i] = 0;
  *step = max_bits == 0 ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  return true;
}

template <class T>
float RoundToSteps(const float* x, int64_t n, float limit, T* out) {
  const uint32_t max_bits = MaxAbsBits(x, n);
  float step;
  if (ZeroOrNonFinite(max_bits, n, out, &step)) return step;
  const float xmax = FromBits(max_bits), inv = limit / xmax;
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>((x[i] * inv + kRound) - kRound);
  return xmax / limit;
}

// GCC 12 reports the "undefined" source operand inside its own AVX-512 intrinsics
// (_mm512_undefined_*), wherever they inline into the two roundings below.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// QuantizeQueryInt8 in AVX-512: the same f32 bit max, one product by inv, rounding to nearest even
// by the conversion, so the same q8 and head_scale. Requires cols % 16 == 0.
WC_VNNI void QuantizeQueryAvx512(const float* q, int n_heads, int64_t cols, float scale, int8_t* q8,
                                 float* head_scale) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  for (int h = 0; h < n_heads; ++h) {
    const float* qh = q + h * cols;
    int8_t* out = q8 + h * cols;
    __m512i max_bits = _mm512_setzero_si512();
    for (int64_t c = 0; c < cols; c += 16)
      max_bits = _mm512_max_epu32(
          max_bits, _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(qh + c)), magnitude));
    const uint32_t mb = static_cast<uint32_t>(_mm512_reduce_max_epu32(max_bits));
    if (ZeroOrNonFinite(mb, cols, out, &head_scale[h])) continue;
    const float qmax = FromBits(mb);
    const __m512 inv = _mm512_set1_ps(127.0f / qmax);
    for (int64_t c = 0; c < cols; c += 16)
      _mm_storeu_si128(
          reinterpret_cast<__m128i*>(out + c),
          _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(qh + c), inv))));
    head_scale[h] = scale * (qmax / 127.0f);
  }
}

// QuantizeWeightsInt16 in AVX-512: the same operations lane by lane (one f32 product, the f32 bit
// max, one product by inv rounded to nearest even by the conversion), so the same wq and unit.
WC_VNNI void QuantizeWeightsAvx512(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                                   float* row_scale, int16_t* wq, int64_t wq_stride, float* unit) {
  const int64_t rows = v.rows;
  for (int64_t p = 0; p < rows; p += 16) {
    const __mmask16 lanes = x86::FirstLanes(rows - p);
    _mm512_mask_storeu_ps(row_scale + p, lanes, x86::RowScales16(v, p, 1.0f));
  }
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  for (int h = 0; h < n_heads; ++h) {
    const float* wh = w + h * w_stride;
    int16_t* qh = wq + h * wq_stride;
    __m512i max_bits = _mm512_setzero_si512();
    for (int64_t p = 0; p < rows; p += 16) {
      const __mmask16 lanes = x86::FirstLanes(rows - p);
      const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, wh + p),
                                     _mm512_maskz_loadu_ps(lanes, row_scale + p));
      max_bits = _mm512_max_epu32(max_bits, _mm512_and_si512(_mm512_castps_si512(x), magnitude));
    }
    const uint32_t mb = static_cast<uint32_t>(_mm512_reduce_max_epu32(max_bits));
    if (rows % 2 == 1) qh[rows] = 0;
    if (ZeroOrNonFinite(mb, rows, qh, &unit[h])) continue;
    const float wmax = FromBits(mb);
    const __m512 inv = _mm512_set1_ps(32767.0f / wmax);
    for (int64_t p = 0; p < rows; p += 16) {
      const __mmask16 lanes = x86::FirstLanes(rows - p);
      const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, wh + p),
                                     _mm512_maskz_loadu_ps(lanes, row_scale + p));
      const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(x, inv));  // MXCSR: nearest even
      _mm256_mask_storeu_epi16(qh + p, lanes, _mm512_cvtepi32_epi16(q));
    }
    unit[h] = wmax / 32767.0f;
  }
}
#pragma GCC diagnostic pop

}  // namespace

void QuantizeQueryInt8(const float* q, int n_heads, int64_t cols, float scale, int8_t* q8,
                       float* head_scale) {
  if (cols % 16 == 0 && VnniOn())
    return QuantizeQueryAvx512(q, n_heads, cols, scale, q8, head_scale);
  for (int h = 0; h < n_heads; ++h) {
    const float step = RoundToSteps(q + h * cols, cols, 127.0f, q8 + h * cols);
    head_scale[h] = step == step ? scale * step : step;  // NaN stays NaN
  }
}

void QuantizeWeightsInt16(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                          float* row_scale, int16_t* wq, int64_t wq_stride, float* unit) {
  if (VnniOn())
    return QuantizeWeightsAvx512(w, w_stride, n_heads, v, row_scale, wq, wq_stride, unit);
  const int64_t rows = v.rows;
  for (int64_t p = 0; p < rows; ++p) row_scale[p] = v.RowScale(p);
  thread_local std::vector<float> scaled;  // [rows]: w * row_scale of one head
  scaled.resize(static_cast<size_t>(rows));
  for (int h = 0; h < n_heads; ++h) {
    const float* wh = w + h * w_stride;
    int16_t* qh = wq + h * wq_stride;
    for (int64_t p = 0; p < rows; ++p) scaled[p] = wh[p] * row_scale[p];
    if (rows % 2 == 1) qh[rows] = 0;
    unit[h] = RoundToSteps(scaled.data(), rows, 32767.0f, qh);
  }
}

namespace {

// The query rounded per head (QuantizeQueryInt8) into per-thread buffers.
struct Int8Query {
  const int8_t* q8;         // [n_heads, cols]
  const float* head_scale;  // [n_heads]
  Int8Query(const float* q, int n_heads, int64_t cols, float scale) {
    thread_local std::vector<int8_t> q8_buf;
    thread_local std::vector<float> hs_buf;
    q8_buf.resize(static_cast<size_t>(n_heads * cols));
    hs_buf.assign(static_cast<size_t>(n_heads), scale);
    QuantizeQueryInt8(q, n_heads, cols, scale, q8_buf.data(), hs_buf.data());
    q8 = q8_buf.data();
    head_scale = hs_buf.data();
  }
};

// P.V on int16 weights, segment by segment of kInt8WeightSegmentRows rows: run(wq, wq_stride,
// unit, n_heads, segment, o, along) with `along` for the last segment only.
template <class Kernel>
void ForWeightSegments(const float* w, int64_t w_stride, int n_heads, const RowsRef& v, float* o,
                       const RowsRef& along, const Kernel& run) {
  constexpr int64_t kSeg = kInt8WeightSegmentRows, kWqStride = kSeg + 2;
  thread_local std::vector<float> row_scale(kSeg);
  thread_local std::vector<int16_t> wq;  // [n_heads, kWqStride]
  thread_local std::vector<float> unit;  // [n_heads]
  wq.resize(static_cast<size_t>(n_heads * kWqStride));
  unit.resize(static_cast<size_t>(n_heads));
  for (int64_t s0 = 0; s0 < v.rows; s0 += kSeg) {
    RowsRef seg = v;
    seg.rows = std::min(kSeg, v.rows - s0);
    seg.data = v.data + s0 * v.row_bytes;
    QuantizeWeightsInt16(w + s0, w_stride, n_heads, seg, row_scale.data(), wq.data(), kWqStride,
                         unit.data());
    run(wq.data(), kWqStride, unit.data(), n_heads, seg, o,
        s0 + kSeg >= v.rows ? along : RowsRef{});
  }
}

// A portable P.V kernel (int8_portable.cpp) as ForWeightSegments runs it: it prefetches nothing.
template <void (*Kernel)(const int16_t*, int64_t, const float*, int, const RowsRef&, float*)>
void WithoutAlong(const int16_t* wq, int64_t wq_stride, const float* unit, int n_heads,
                  const RowsRef& v, float* o, const RowsRef&) {
  Kernel(wq, wq_stride, unit, n_heads, v, o);
}

}  // namespace

void Int8ScoresVnni(const float* q, int n_heads, const RowsRef& k, float scale, float* scores,
                    const RowsRef& along) {
  const Int8Query q8(q, n_heads, k.cols, scale);
  Int8ScoresVnniKernel(q8.q8, n_heads, q8.head_scale, k, scores, along);
}

void Int8ScoresHeadsInLanes(const float* q, int n_heads, const RowsRef& k, float scale,
                            float* scores, const RowsRef& along) {
  const Int8Query q8(q, n_heads, k.cols, scale);
  PrefetchRows(along, along.rows);  // V, while the scores are computed
  Int8ScoresHeadsInLanesKernel(q8.q8, n_heads, q8.head_scale, k, scores);
}

void Int8ScoresPerHead(const float* q, int n_heads, const RowsRef& k, float scale, float* scores,
                       const RowsRef& along) {
  const Int8Query q8(q, n_heads, k.cols, scale);
  thread_local std::vector<float> q8f;  // the same integers as f32, for the f32 kernels
  q8f.assign(q8.q8, q8.q8 + n_heads * k.cols);
  F32FmaScoresPerHead(q8f.data(), n_heads, k, q8.head_scale, scores, along);
}

void Int8WeightedVnniShared(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                            float* o, const RowsRef& along) {
  ForWeightSegments(w, w_stride, n_heads, v, o, along, Int8WeightedVnniSharedKernel);
}

void Int8WeightedVnniGroups(const float* w, int64_t w_stride, int n_heads, const RowsRef& v,
                            float* o, const RowsRef& along) {
  ForWeightSegments(w, w_stride, n_heads, v, o, along, Int8WeightedVnniGroupsKernel);
}

void Int8WeightedPairs(const float* w, int64_t w_stride, int n_heads, const RowsRef& v, float* o,
                       const RowsRef& along) {
  ForWeightSegments(w, w_stride, n_heads, v, o, along, WithoutAlong<Int8WeightedPairsKernel>);
}

void Int8WeightedPerHead(const float* w, int64_t w_stride, int n_heads, const RowsRef& v, float* o,
                         const RowsRef& along) {
  ForWeightSegments(w, w_stride, n_heads, v, o, along, WithoutAlong<Int8WeightedPerHeadKernel>);
}

}  // namespace wc
