// BF16 weights in 16-bit integers (bf16_int16.h): the weights' and the activations' quantization,
// the portable kernel and the entry point that picks the format table's kernel.
#include "kernels/gemm/bf16/bf16_int16.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/gemm/format_table.h"
#include "kernels/gemm/gemm_schedule.h"
#include "kernels/gemm/ieee_subnormals.h"
#include "kernels/gemm/packed_matrix.h"
#include "util/bf16.h"
#include "util/error.h"

namespace wc {
// Named, not anonymous: unity builds put other files' file-local names beside these.
namespace bf16_int16 {

constexpr int kBlock = 32;           // k a scale covers
constexpr int kRows = 32;            // rows a panel (PackedMatrix::kPanelRows)
constexpr int kMinWeightExp = -111;  // dW = 2^(e - 15) >= 2^-126: a normal float
constexpr int kActMax = 2047;        // |xq| <= 2047: 32 products of at most 32640 x 2047 fit int32
const float kActMin = std::ldexp(1.0f, -100);  // below, a block's activations are zeros

// Element of row i, k j of block b in a panel's pair layout (PackedMatrix: [k / 2][32][2]).
int64_t PairIndex(int64_t b, int64_t i, int64_t j) {
  const int64_t k = b * kBlock + j;
  return (k / 2) * 2 * kRows + i * 2 + k % 2;
}

}  // namespace bf16_int16

void QuantizeInt16Panel(uint16_t* panel, int64_t blocks, int8_t* exps) {
  using namespace bf16_int16;  // NOLINT: this file's constants
  for (int64_t b = 0; b < blocks; ++b)
    for (int i = 0; i < kRows; ++i) {
      float m = 0;
      for (int j = 0; j < kBlock; ++j)
        m = std::max(m, std::fabs(BF16ToF32(panel[PairIndex(b, i, j)])));
      int e = kMinWeightExp;
      if (m > 0) {
        std::frexp(m, &e);
        e = std::max(e, kMinWeightExp);
      }
      exps[b * kRows + i] = static_cast<int8_t>(e - 15);
      for (int j = 0; j < kBlock; ++j) {
        uint16_t& h = panel[PairIndex(b, i, j)];
        // h / 2^(e - 15): exact scaling by a power of two (no overflow: |h| < 2^e), then rounded
        // half to even (the default rounding mode).
        h = static_cast<uint16_t>(
            static_cast<int16_t>(std::nearbyint(std::ldexp(BF16ToF32(h), 15 - e))));
      }
    }
}

Int16Input QuantizeInt16Activations(const float* x, int64_t n_tokens, int64_t x_stride,
                                    int64_t cols) {
  using namespace bf16_int16;  // NOLINT: this file's constants
  Int16Input in;
  in.n_tokens = n_tokens;
  in.cols = (cols + kBlock - 1) / kBlock * kBlock;
  in.blocks = in.cols / kBlock;
  in.codes.assign(static_cast<size_t>(n_tokens * in.cols), 0);
  in.dx.assign(static_cast<size_t>(n_tokens * in.blocks), 0.0f);
  const bool parallel = !omp_in_parallel() && n_tokens > 1 && n_tokens * cols >= (1 << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * x_stride;
    int16_t* q = in.codes.data() + t * in.cols;
    float* dx = in.dx.data() + t * in.blocks;
    for (int64_t b = 0; b < in.blocks; ++b) {
      const int64_t k0 = b * kBlock, k1 = std::min(cols, k0 + kBlock);
      float m = 0;
      bool finite = true;
      for (int64_t k = k0; k < k1; ++k) {
        finite = finite && std::isfinite(xt[k]);
        m = std::max(m, std::fabs(xt[k]));
      }
      if (!finite) {
        dx[b] = std::nanf("");
        continue;
      }
      if (!(m >= kActMin)) continue;  // zeros
      const float d = m / static_cast<float>(kActMax);
      dx[b] = d;
      for (int64_t k = k0; k < k1; ++k)
        q[k] = static_cast<int16_t>(std::nearbyint(xt[k] / d));  // |x / d| <= 2047 (1 + 2^-23)
    }
  }
  return in;
}

void Int16PortableRange(const Int16Input& x, const PackedMatrix& w, const float* bias, float* y,
                        int64_t y_stride, int64_t row_begin, int64_t row_end, int64_t pa,
                        int64_t pb) {
  using namespace bf16_int16;  // NOLINT: this file's constants
  const int64_t nb = w.padded_cols() / kBlock;
  WC_CHECK(x.cols == w.padded_cols(), "int16 gemm input shape");
  std::vector<float> acc(static_cast<size_t>(x.n_tokens * kRows));  // [token][32 rows]
  for (int64_t p = pa; p < pb; ++p) {
    const int16_t* codes = w.int16_codes() + p * w.panel_elems();
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t b = 0; b < nb; ++b) {
      const int8_t* e = w.int16_exps() + (p * nb + b) * kRows;
      for (int64_t t = 0; t < x.n_tokens; ++t) {
        const int16_t* xq = x.Codes(t) + b * kBlock;
        const float dx = x.Dx(t)[b];
        for (int i = 0; i < kRows; ++i) {
          int32_t s = 0;
          for (int j = 0; j < kBlock; ++j) s += codes[PairIndex(b, i, j)] * xq[j];
          float& a = acc[static_cast<size_t>(t * kRows + i)];
          a = std::fma(std::ldexp(1.0f, e[i]) * dx, static_cast<float>(s), a);
        }
      }
    }
    const int64_t r0 = std::max(p * kRows, row_begin), r1 = std::min(p * kRows + kRows, row_end);
    for (int64_t t = 0; t < x.n_tokens; ++t)
      for (int64_t r = r0; r < r1; ++r) {
        const float v = acc[static_cast<size_t>(t * kRows + r - p * kRows)];
        y[t * y_stride + (r - row_begin)] = bias ? v + bias[r] : v;
      }
  }
}

void Int16Gemm(const Int16Input& x, const PackedMatrix& w, const float* bias, float* y,
               int64_t y_stride, int64_t row_begin, int64_t row_end) {
  WC_CHECK(w.format() == WeightFormat::kBF16 && w.precision() == ActivationPrecision::kInt16,
           "int16 gemm of a matrix not packed for it");
  WC_CHECK(row_begin >= 0 && row_end <= w.rows() && row_begin <= row_end, "bad row range");
  if (x.n_tokens == 0 || row_begin == row_end) return;
  const GemmKernel k = ChooseGemmKernel(w.format(), w.precision(), x.n_tokens).kernel;
  const int64_t pa = row_begin / PackedMatrix::kPanelRows;
  const int64_t pb = (row_end + PackedMatrix::kPanelRows - 1) / PackedMatrix::kPanelRows;
  gemm::ForThreadPanels(pa, pb, [&](int64_t a, int64_t b) {
    const IeeeSubnormals ieee;  // the contract's float steps keep subnormals on every path
    if (k == GemmKernel::kBf16Int16Avx2)
      x86::Int16Avx2Range(x, w, bias, y, y_stride, row_begin, row_end, a, b);
    else
      Int16PortableRange(x, w, bias, y, y_stride, row_begin, row_end, a, b);
  });
}

}  // namespace wc
