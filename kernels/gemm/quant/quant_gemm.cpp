// The quantized GEMM (quant_gemm.h): activation quantization, the portable kernels, the choice of
// kernel and the threading. The AVX2 kernels are quant_gemm_avx2.cpp.
#include "kernels/gemm/quant/quant_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu_kernels.h"
#include "kernels/gemm/format_table.h"
#include "kernels/gemm/gemm_schedule.h"
#include "kernels/gemm/ieee_subnormals.h"
#include "kernels/gemm/quant/quant_gemm_x86.h"
#include "util/error.h"

namespace wc {
namespace {

constexpr int kQuantRows = QuantPanels::kGroupRows;

// The contract's block quantization of x[0:n] into q[0:n] (n = 32 or 256) with codes of at most
// code_max (127, or 63 for 7-bit blocks); returns dx.
float QuantizeBlock(const float* x, int n, int8_t* q, int code_max) {
  if (n != 32 && n != 256) __builtin_unreachable();  // (GCC 12 otherwise fears a huge memset)
  float amax = 0.0f;
  bool nan = false, inf = false;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (std::isnan(a))
      nan = true;
    else if (std::isinf(a))
      inf = true;
    else if (a > amax)
      amax = a;
  }
  if (nan || inf || amax == 0.0f) {
    std::fill(q, q + n, 0);
    return nan   ? std::numeric_limits<float>::quiet_NaN()
           : inf ? std::numeric_limits<float>::infinity()
                 : 0.0f;
  }
  const float m = static_cast<float>(code_max);
  const float id = m / amax;
  if (std::isinf(id)) {  // amax below m / FLT_MAX: the block counts as zero (quant_gemm.h)
    std::fill(q, q + n, 0);
    return 0.0f;
  }
  for (int i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
  return amax / m;
}

// The portable kernel: rows [g * 8, g * 8 + 8) of group g for tokens [t0, t1), accumulators in
// acc[t - t0][r] (zeroed here). Any t1 - t0 <= kQuantTile.
constexpr int kQuantTile = 8;

void PortableGroup(const QuantInput& x, const QuantPanels& w, int64_t g, int64_t t0, int64_t t1,
                   float (&acc)[kQuantTile][kQuantRows]) {
  const GgmlQuant type = w.type();
  const int values = GgmlQuantBlockValues(type);
  const int nt = static_cast<int>(t1 - t0);
  for (int t = 0; t < nt; ++t)
    for (int r = 0; r < kQuantRows; ++r) acc[t][r] = 0.0f;
  UnpackedGroupBlock u;
  for (int64_t b = 0; b < w.blocks(); ++b) {
    UnpackGroupBlock(type, w.group(g) + b * w.group_block_bytes(), &u);
    for (int t = 0; t < nt; ++t) {
      const int8_t* xq = x.Codes(t0 + t) + b * values;
      const float dx = x.Dx(t0 + t)[b];
      const int16_t* sums = x.Sums(t0 + t) + b * (values == 256 ? 16 : 1);
      for (int r = 0; r < kQuantRows; ++r) {
        const int16_t* q = u.codes[r];
        float a = acc[t][r];
        switch (type) {
          case GgmlQuant::kQ8_0:
          case GgmlQuant::kQ4_0:
          case GgmlQuant::kQ5_0:
          case GgmlQuant::kQ4_1:
          case GgmlQuant::kQ5_1: {
            int32_t s = 0;
            for (int i = 0; i < 32; ++i) s += q[i] * xq[i];
            if (type == GgmlQuant::kQ4_0) s -= 8 * sums[0];
            if (type == GgmlQuant::kQ5_0) s -= 16 * sums[0];
            a = std::fma(u.d[r] * dx, static_cast<float>(s), a);
            if (type == GgmlQuant::kQ4_1 || type == GgmlQuant::kQ5_1)
              a = std::fma(u.m[r], dx * static_cast<float>(sums[0]), a);
            break;
          }
          case GgmlQuant::kQ4_K:
          case GgmlQuant::kQ5_K: {
            int32_t big = 0, mins = 0;
            for (int j = 0; j < 8; ++j) {
              int32_t s = 0;
              for (int i = 32 * j; i < 32 * j + 32; ++i) s += q[i] * xq[i];
              big += u.sc[r][j] * s;
              mins += u.mins[r][j] * (sums[2 * j] + sums[2 * j + 1]);
            }
            a = std::fma(u.d[r] * dx, static_cast<float>(big), a);
            a = std::fma(-(u.m[r] * dx), static_cast<float>(mins), a);
            break;
          }
          case GgmlQuant::kQ6_K: {
            int32_t big = 0;
            for (int j = 0; j < 16; ++j) {
              int32_t s = 0;
              for (int i = 16 * j; i < 16 * j + 16; ++i) s += q[i] * xq[i];
              big += u.sc[r][j] * (s - 32 * sums[j]);
            }
            a = std::fma(u.d[r] * dx, static_cast<float>(big), a);
            break;
          }
        }
        acc[t][r] = a;
      }
    }
  }
}

// Writes a group's accumulators for tokens [t0, t0 + nt): rows [max(g * 8, row_begin),
// min(g * 8 + 8, row_end)), plus the bias.
void QuantStoreGroup(const float (&acc)[kQuantTile][kQuantRows], int nt, int64_t t0, int64_t g,
                     const float* bias, float* y, int64_t y_stride, int64_t row_begin,
                     int64_t row_end) {
  const int64_t r0 = std::max(g * kQuantRows, row_begin),
                r1 = std::min(g * kQuantRows + kQuantRows, row_end);
  for (int t = 0; t < nt; ++t)
    for (int64_t r = r0; r < r1; ++r) {
      const float v = acc[t][r - g * kQuantRows];
      y[(t0 + t) * y_stride + (r - row_begin)] = bias ? v + bias[r] : v;
    }
}

// The format table's kernel for a call of x's tokens (format_table.h).
GemmKernel QuantKernel(const QuantInput& x, const QuantPanels& w) {
  return ChooseGemmKernel(FormatOf(w.type()), ActivationPrecision::kF32, x.n_tokens).kernel;
}

// Groups [g0, g1) for every token.
void QuantRunGroups(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
                    int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t g0, int64_t g1) {
  if (g0 >= g1) return;
  const IeeeSubnormals ieee;
  switch (QuantKernel(x, w)) {
    case GemmKernel::kQuantInt8Avx2:
      return x86::QuantGemmAvx2(x, w, bias, y, y_stride, row_begin, row_end, g0, g1);
    case GemmKernel::kQuantInt8Avx2Expanded:
      return x86::QuantGemmAvx2Expanded(x, w, bias, y, y_stride, row_begin, row_end, g0, g1);
    case GemmKernel::kQuantInt8Vnni:
      return x86::QuantGemmVnni(x, w, bias, y, y_stride, row_begin, row_end, g0, g1);
    default:
      break;
  }
  float acc[kQuantTile][kQuantRows];
  for (int64_t g = g0; g < g1; ++g)
    for (int64_t t0 = 0; t0 < x.n_tokens; t0 += kQuantTile) {
      const int64_t t1 = std::min<int64_t>(x.n_tokens, t0 + kQuantTile);
      PortableGroup(x, w, g, t0, t1, acc);
      QuantStoreGroup(acc, static_cast<int>(t1 - t0), t0, g, bias, y, y_stride, row_begin, row_end);
    }
}

void QuantCheckCall(const QuantInput& x, const QuantPanels& w, int64_t row_begin, int64_t row_end) {
  WC_CHECK(x.kind == ActivationOf(w.type()) && x.cols == w.cols(), "QuantGemm: activations of ",
           x.cols, " columns for a ", GgmlQuantName(w.type()), " matrix of ", w.cols());
  WC_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= w.rows(), "QuantGemm: rows [",
           row_begin, ", ", row_end, ") of ", w.rows());
}

}  // namespace

QuantInput QuantizeActivations(const float* x, int64_t n_tokens, int64_t x_stride, int64_t cols,
                               QuantActivation kind, int code_max) {
  const int n = kind == QuantActivation::kA256 ? 256 : 32;
  WC_CHECK(cols % n == 0, "QuantizeActivations: ", cols, " columns are not blocks of ", n);
  WC_CHECK(code_max == 127 || (code_max == 63 && kind == QuantActivation::kA32),
           "QuantizeActivations: codes of at most ", code_max);
  QuantInput in;
  in.kind = kind;
  in.code_max = code_max;
  in.n_tokens = n_tokens;
  in.cols = cols;
  in.blocks = cols / n;
  in.codes.resize(static_cast<size_t>(n_tokens * cols));
  in.dx.resize(static_cast<size_t>(n_tokens * in.blocks));
  const int sums_per_block = kind == QuantActivation::kA256 ? 16 : 1;
  in.sums.resize(static_cast<size_t>(n_tokens * in.blocks * sums_per_block));
  const int per_sum = n / sums_per_block;
  const bool avx2 = KernelsOn(CpuKernels::kAvx2Int8);
  // Tokens split over the threads for a long call (each token's blocks are its own).
  const bool parallel = !omp_in_parallel() && n_tokens > 1 && n_tokens * cols >= (1 << 16);
#pragma omp parallel if (parallel)
  {
    const IeeeSubnormals ieee;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t b = 0; b < in.blocks; ++b) {
        const float* xb = x + t * x_stride + b * n;
        int8_t* q = in.codes.data() + t * cols + b * n;
        float* dx = in.dx.data() + t * in.blocks + b;
        int16_t* sums = in.sums.data() + (t * in.blocks + b) * sums_per_block;
        if (avx2 && x86::QuantizeBlockAvx2(xb, n, q, sums, per_sum, code_max, dx)) continue;
        *dx = QuantizeBlock(xb, n, q, code_max);
        for (int s = 0; s < sums_per_block; ++s) {
          int sum = 0;
          for (int i = 0; i < per_sum; ++i) sum += q[s * per_sum + i];
          sums[s] = static_cast<int16_t>(sum);
        }
      }
  }
  return in;
}

void QuantGemmSerial(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
                     int64_t y_stride, int64_t row_begin, int64_t row_end) {
  QuantCheckCall(x, w, row_begin, row_end);
  if (row_begin == row_end || x.n_tokens == 0) return;
  QuantRunGroups(x, w, bias, y, y_stride, row_begin, row_end, row_begin / kQuantRows,
                 (row_end + kQuantRows - 1) / kQuantRows);
}

void QuantGemm(const QuantInput& x, const QuantPanels& w, const float* bias, float* y,
               int64_t y_stride, int64_t row_begin, int64_t row_end) {
  QuantCheckCall(x, w, row_begin, row_end);
  if (row_begin == row_end || x.n_tokens == 0) return;
  const int64_t g0 = row_begin / kQuantRows, g1 = (row_end + kQuantRows - 1) / kQuantRows;
  // Chunks of groups taken by the threads as the packed GEMMs' panels are; each group's rows are
  // one thread's.
  gemm::ForThreadPanels(g0, g1, [&](int64_t a, int64_t b) {
    QuantRunGroups(x, w, bias, y, y_stride, row_begin, row_end, a, b);
  });
}

}  // namespace wc
