// The quantized GEMM (kernels/gemm/quant/quant_gemm.h) and its panels (quant_panels.h): the packed
// layout gives ggml's dequantized values for all eight types; the GEMM gives its contract's bits,
// checked against a reference written here from the GGML blocks as the file holds them (not through
// the panels), for odd shapes, 1..13 tokens, row ranges and bias; bits independent of tokens per
// call, threads and the AVX2 kernels; close to the float product of the dequantized weights.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_kernels.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/quant/ggml_quants.h"
#include "kernels/gemm/quant/quant_gemm.h"
#include "kernels/gemm/quant/quant_panels.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/rng.h"

namespace wc {
namespace {

// A random f16 of magnitude in [2^lo, 2^hi), sign positive unless `sign`.
uint16_t RandomHalf(Rng& rng, int lo, int hi, bool sign) {
  const float e = lo + (hi - lo) * rng.Uniform();
  float v = std::exp2(e);
  if (sign && rng.Uniform() < 0.5f) v = -v;
  return F32ToF16(v);
}

// rows x cols of `type`: random codes, sane scales (fields at their GGML offsets).
std::vector<uint8_t> RandomRows(GgmlQuant type, int64_t rows, int64_t cols, Rng& rng) {
  const int values = GgmlQuantBlockValues(type), bytes = GgmlQuantBlockBytes(type);
  const int64_t nb = cols / values;
  std::vector<uint8_t> data(static_cast<size_t>(rows * nb * bytes));
  for (auto& b : data) b = static_cast<uint8_t>(rng.Next() & 0xFF);
  for (int64_t i = 0; i < rows * nb; ++i) {
    uint8_t* blk = data.data() + i * bytes;
    auto put = [&](int offset, uint16_t h) { std::memcpy(blk + offset, &h, 2); };
    switch (type) {
      case GgmlQuant::kQ8_0:
      case GgmlQuant::kQ4_0:
      case GgmlQuant::kQ5_0:
        put(0, RandomHalf(rng, -12, -4, true));
        break;
      case GgmlQuant::kQ4_1:
      case GgmlQuant::kQ5_1:
        put(0, RandomHalf(rng, -12, -4, true));
        put(2, RandomHalf(rng, -10, -2, true));
        break;
      case GgmlQuant::kQ4_K:
      case GgmlQuant::kQ5_K:
        put(0, RandomHalf(rng, -14, -8, false));
        put(2, RandomHalf(rng, -14, -8, false));
        break;
      case GgmlQuant::kQ6_K:
        put(208, RandomHalf(rng, -14, -8, false));
        break;
    }
  }
  return data;
}

float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// Block i's integer codes as the contract reads them, straight from the GGML block (ggml's own
// formulas, docs/gguf.md section 3), and its scales.
struct RefBlock {
  int q[256];
  float d = 0, m = 0;
  int sc[16] = {}, mins[8] = {};
};

RefBlock DecodeBlock(GgmlQuant type, const uint8_t* blk) {
  RefBlock r;
  auto nib32 = [&](const uint8_t* qs, uint32_t qh) {
    for (int j = 0; j < 16; ++j) {
      r.q[j] = (qs[j] & 15) | (((qh >> j) & 1) << 4);
      r.q[j + 16] = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    }
  };
  uint32_t qh = 0;
  switch (type) {
    case GgmlQuant::kQ8_0:
      r.d = Half(blk);
      for (int j = 0; j < 32; ++j) r.q[j] = static_cast<int8_t>(blk[2 + j]);
      break;
    case GgmlQuant::kQ4_0:
      r.d = Half(blk);
      nib32(blk + 2, 0);
      break;
    case GgmlQuant::kQ4_1:
      r.d = Half(blk);
      r.m = Half(blk + 2);
      nib32(blk + 4, 0);
      break;
    case GgmlQuant::kQ5_0:
      r.d = Half(blk);
      std::memcpy(&qh, blk + 2, 4);
      nib32(blk + 6, qh);
      break;
    case GgmlQuant::kQ5_1:
      r.d = Half(blk);
      r.m = Half(blk + 2);
      std::memcpy(&qh, blk + 4, 4);
      nib32(blk + 8, qh);
      break;
    case GgmlQuant::kQ4_K:
    case GgmlQuant::kQ5_K: {
      r.d = Half(blk);
      r.m = Half(blk + 2);
      const uint8_t* s = blk + 4;
      for (int j = 0; j < 8; ++j) {
        if (j < 4) {
          r.sc[j] = s[j] & 63;
          r.mins[j] = s[j + 4] & 63;
        } else {
          r.sc[j] = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
          r.mins[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        }
      }
      const bool q5 = type == GgmlQuant::kQ5_K;
      const uint8_t* h = blk + 16;
      const uint8_t* qs = blk + (q5 ? 48 : 16);
      for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
          r.q[64 * c + l] = (qs[32 * c + l] & 15) | (q5 ? ((h[l] >> (2 * c)) & 1) << 4 : 0);
          r.q[64 * c + 32 + l] =
              (qs[32 * c + l] >> 4) | (q5 ? ((h[l] >> (2 * c + 1)) & 1) << 4 : 0);
        }
      break;
    }
    case GgmlQuant::kQ6_K: {
      const uint8_t* ql = blk;
      const uint8_t* h = blk + 128;
      r.d = Half(blk + 208);
      for (int s = 0; s < 16; ++s) r.sc[s] = static_cast<int8_t>(blk[192 + s]);
      for (int n = 0; n < 2; ++n)
        for (int l = 0; l < 32; ++l) {
          const uint8_t* L = ql + 64 * n;
          const uint8_t H = h[32 * n + l];
          r.q[128 * n + l] = (L[l] & 15) | ((H & 3) << 4);
          r.q[128 * n + l + 32] = (L[l + 32] & 15) | (((H >> 2) & 3) << 4);
          r.q[128 * n + l + 64] = (L[l] >> 4) | (((H >> 4) & 3) << 4);
          r.q[128 * n + l + 96] = (L[l + 32] >> 4) | (((H >> 6) & 3) << 4);
        }
      break;
    }
  }
  return r;
}

// The contract's y[t, r] (quant_gemm.h), from the GGML rows.
float Reference(GgmlQuant type, const uint8_t* row, const QuantInput& x, int64_t t) {
  const int values = GgmlQuantBlockValues(type);
  float acc = 0.0f;
  for (int64_t b = 0; b < x.blocks; ++b) {
    const RefBlock w = DecodeBlock(type, row + b * GgmlQuantBlockBytes(type));
    const int8_t* xq = x.Codes(t) + b * values;
    const float dx = x.Dx(t)[b];
    const int16_t* sums = x.Sums(t) + b * (values == 256 ? 16 : 1);
    auto dot = [&](int from, int n, int offset) {
      int s = 0;
      for (int i = from; i < from + n; ++i) s += (w.q[i] - offset) * xq[i];
      return s;
    };
    switch (type) {
      case GgmlQuant::kQ8_0:
      case GgmlQuant::kQ4_0:
      case GgmlQuant::kQ5_0: {
        const int off = type == GgmlQuant::kQ4_0 ? 8 : type == GgmlQuant::kQ5_0 ? 16 : 0;
        acc = std::fma(w.d * dx, static_cast<float>(dot(0, 32, off)), acc);
        break;
      }
      case GgmlQuant::kQ4_1:
      case GgmlQuant::kQ5_1:
        acc = std::fma(w.d * dx, static_cast<float>(dot(0, 32, 0)), acc);
        acc = std::fma(w.m, dx * static_cast<float>(sums[0]), acc);
        break;
      case GgmlQuant::kQ4_K:
      case GgmlQuant::kQ5_K: {
        int big = 0, mins = 0;
        for (int j = 0; j < 8; ++j) {
          big += w.sc[j] * dot(32 * j, 32, 0);
          mins += w.mins[j] * (sums[2 * j] + sums[2 * j + 1]);
        }
        acc = std::fma(w.d * dx, static_cast<float>(big), acc);
        acc = std::fma(-(w.m * dx), static_cast<float>(mins), acc);
        break;
      }
      case GgmlQuant::kQ6_K: {
        int big = 0;
        for (int j = 0; j < 16; ++j) big += w.sc[j] * dot(16 * j, 16, 32);
        acc = std::fma(w.d * dx, static_cast<float>(big), acc);
        break;
      }
    }
  }
  return acc;
}

std::vector<float> RandomActivations(int64_t n, int64_t cols, Rng& rng) {
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& v : x) v = 2.0f * rng.Uniform() - 1.0f;
  // A zero block and a block of one large value among tiny ones.
  if (cols >= 64) {
    std::fill(x.begin(), x.begin() + 32, 0.0f);
    x[40] = 300.0f;
  }
  return x;
}

class QuantGemmTest : public ::testing::TestWithParam<GgmlQuant> {};

TEST_P(QuantGemmTest, PanelsHoldGgmlsValues) {
  const GgmlQuant type = GetParam();
  Rng rng(11);
  const int64_t rows = 13, cols = 2 * GgmlQuantBlockValues(type) * 2;
  const auto data = RandomRows(type, rows, cols, rng);
  const int64_t row_bytes = cols / GgmlQuantBlockValues(type) * GgmlQuantBlockBytes(type);
  const QuantPanels p = QuantPanels::FromRows(type, data.data(), rows, cols, row_bytes, "w");
  EXPECT_EQ(p.rows(), rows);
  EXPECT_EQ(p.groups(), 2);
  std::vector<float> want(cols), got(cols);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeGgmlRow(type, data.data() + r * row_bytes, want.data(), cols);
    p.Row(r, got.data());
    for (int64_t k = 0; k < cols; ++k)
      ASSERT_EQ(std::memcmp(&want[k], &got[k], 4), 0)
          << GgmlQuantName(type) << " r " << r << " k " << k << ": " << want[k] << " vs " << got[k];
  }
}

TEST_P(QuantGemmTest, TheContractsBits) {
  const GgmlQuant type = GetParam();
  Rng rng(12);
  const int64_t rows = 21, cols = 3 * GgmlQuantBlockValues(type);
  const int64_t row_bytes = cols / GgmlQuantBlockValues(type) * GgmlQuantBlockBytes(type);
  const auto data = RandomRows(type, rows, cols, rng);
  const QuantPanels w = QuantPanels::FromRows(type, data.data(), rows, cols, row_bytes, "w");
  const int64_t n = 13;
  const auto xf = RandomActivations(n, cols, rng);
  const QuantInput x = QuantizeActivations(xf.data(), n, cols, cols, ActivationOf(type));
  std::vector<float> bias(rows);
  for (auto& b : bias) b = rng.Uniform();
  // Every kernel family this CPU has: VNNI (where it has it), AVX2, portable.
  for (const char* kernels : {"vnni", "avx2", "portable"}) {
    const bool avx2 = std::strcmp(kernels, "portable") != 0;
    SetKernelsEnabled(CpuKernels::kAvx512Vnni, std::strcmp(kernels, "vnni") == 0);
    SetKernelsEnabled(CpuKernels::kAvx2Int8, avx2);
    for (const float* bp : std::vector<const float*>{nullptr, bias.data()}) {
      std::vector<float> y(static_cast<size_t>(n * rows), -7.0f);
      QuantGemm(x, w, bp, y.data(), rows, 0, rows);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t r = 0; r < rows; ++r) {
          float want = Reference(type, data.data() + r * row_bytes, x, t);
          if (bp) want = want + bp[r];
          ASSERT_EQ(std::memcmp(&want, &y[t * rows + r], 4), 0)
              << GgmlQuantName(type) << " " << kernels << " t " << t << " r " << r << ": " << want
              << " vs " << y[t * rows + r];
        }
    }
  }
  SetKernelsEnabled(CpuKernels::kAvx2Int8, true);
  SetKernelsEnabled(CpuKernels::kAvx512Vnni, true);
}

TEST_P(QuantGemmTest, BitsIndependentOfTokensRowsAndThreads) {
  const GgmlQuant type = GetParam();
  Rng rng(13);
  const int64_t rows = 37, cols = 2 * GgmlQuantBlockValues(type);
  const int64_t row_bytes = cols / GgmlQuantBlockValues(type) * GgmlQuantBlockBytes(type);
  const auto data = RandomRows(type, rows, cols, rng);
  const QuantPanels w = QuantPanels::FromRows(type, data.data(), rows, cols, row_bytes, "w");
  const int64_t n = 11;
  const auto xf = RandomActivations(n, cols, rng);
  const QuantInput all = QuantizeActivations(xf.data(), n, cols, cols, ActivationOf(type));
  std::vector<float> y(static_cast<size_t>(n * rows));
  omp_set_num_threads(1);
  QuantGemm(all, w, nullptr, y.data(), rows, 0, rows);
  for (int threads : {2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> y2(y.size());
    QuantGemm(all, w, nullptr, y2.data(), rows, 0, rows);
    EXPECT_EQ(std::memcmp(y.data(), y2.data(), y.size() * 4), 0) << threads << " threads";
  }
  omp_set_num_threads(2);
  // Each token alone, and a row range [5, 30) cut inside groups.
  for (int64_t t = 0; t < n; ++t) {
    const QuantInput one =
        QuantizeActivations(xf.data() + t * cols, 1, cols, cols, ActivationOf(type));
    std::vector<float> y1(static_cast<size_t>(rows));
    QuantGemm(one, w, nullptr, y1.data(), rows, 0, rows);
    EXPECT_EQ(std::memcmp(y1.data(), y.data() + t * rows, rows * 4), 0) << "token " << t;
    std::vector<float> part(25);
    QuantGemmSerial(one, w, nullptr, part.data(), 25, 5, 30);
    EXPECT_EQ(std::memcmp(part.data(), y.data() + t * rows + 5, 25 * 4), 0) << "token " << t;
  }
  // Every token at once over a row range cut inside groups (the many-token kernel's stores).
  std::vector<float> part(static_cast<size_t>(n * 25));
  QuantGemmSerial(all, w, nullptr, part.data(), 25, 5, 30);
  for (int64_t t = 0; t < n; ++t)
    EXPECT_EQ(std::memcmp(part.data() + t * 25, y.data() + t * rows + 5, 25 * 4), 0) << t;
}

// Wide rows split a long call into token chunks (quant_gemm_avx2_expanded.cpp sizes them to keep
// the activations in L2): the bits are each token's alone.
TEST_P(QuantGemmTest, ChunksOfTokensGiveEachTokensBits) {
  const GgmlQuant type = GetParam();
  Rng rng(14);
  const int64_t rows = 9, cols = 32 * GgmlQuantBlockValues(type) * (IsKQuant(type) ? 1 : 8);
  const int64_t row_bytes = cols / GgmlQuantBlockValues(type) * GgmlQuantBlockBytes(type);
  const auto data = RandomRows(type, rows, cols, rng);
  const QuantPanels w = QuantPanels::FromRows(type, data.data(), rows, cols, row_bytes, "w");
  const int64_t n = 43;  // > 192 KiB / cols tokens: several chunks, and a part tile
  const auto xf = RandomActivations(n, cols, rng);
  const QuantInput all = QuantizeActivations(xf.data(), n, cols, cols, ActivationOf(type));
  std::vector<float> y(static_cast<size_t>(n * rows));
  QuantGemm(all, w, nullptr, y.data(), rows, 0, rows);
  for (int64_t t = 0; t < n; ++t) {
    const QuantInput one =
        QuantizeActivations(xf.data() + t * cols, 1, cols, cols, ActivationOf(type));
    std::vector<float> y1(static_cast<size_t>(rows));
    QuantGemm(one, w, nullptr, y1.data(), rows, 0, rows);
    ASSERT_EQ(std::memcmp(y1.data(), y.data() + t * rows, rows * 4), 0)
        << GgmlQuantName(type) << " token " << t;
  }
}

TEST_P(QuantGemmTest, CloseToTheDequantizedProduct) {
  const GgmlQuant type = GetParam();
  Rng rng(14);
  const int64_t rows = 16, cols = 4 * 256;
  const int64_t row_bytes = cols / GgmlQuantBlockValues(type) * GgmlQuantBlockBytes(type);
  const auto data = RandomRows(type, rows, cols, rng);
  const QuantPanels w = QuantPanels::FromRows(type, data.data(), rows, cols, row_bytes, "w");
  std::vector<float> xf(static_cast<size_t>(cols));
  for (auto& v : xf) v = 2.0f * rng.Uniform() - 1.0f;
  const QuantInput x = QuantizeActivations(xf.data(), 1, cols, cols, ActivationOf(type));
  std::vector<float> y(rows), row(cols);
  QuantGemm(x, w, nullptr, y.data(), rows, 0, rows);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeGgmlRow(type, data.data() + r * row_bytes, row.data(), cols);
    double exact = 0, scale = 0;
    for (int64_t k = 0; k < cols; ++k) {
      exact += static_cast<double>(row[k]) * xf[k];
      scale += std::fabs(static_cast<double>(row[k]) * xf[k]);
    }
    // 8-bit activations: each product off by at most half a step of its block's scale.
    EXPECT_NEAR(y[r], exact, 0.02 * scale) << GgmlQuantName(type) << " row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantGemmTest, ::testing::ValuesIn(kGgmlQuants),
                         [](const auto& info) { return std::string(GgmlQuantName(info.param)); });

TEST(QuantActivations, BlocksAsTheContractSays) {
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;
  x[1] = -0.5f;
  x[2] = 0.25f / 127.0f;  // exactly half a step: rounds to even (0)
  x[3] = 3.0f / 254.0f;   // 1.5 steps: rounds to 2
  const QuantInput q = QuantizeActivations(x.data(), 1, 32, 32, QuantActivation::kA32);
  EXPECT_EQ(q.Dx(0)[0], 1.0f / 127.0f);
  EXPECT_EQ(q.Codes(0)[0], 127);
  EXPECT_EQ(q.Codes(0)[1], -64);  // -63.5 to even
  EXPECT_EQ(q.Codes(0)[2], 0);
  EXPECT_EQ(q.Codes(0)[3], 2);
  EXPECT_EQ(q.Sums(0)[0], 127 - 64 + 2);
  x[5] = NAN;
  const QuantInput n = QuantizeActivations(x.data(), 1, 32, 32, QuantActivation::kA32);
  EXPECT_TRUE(std::isnan(n.Dx(0)[0]));
  EXPECT_THROW(QuantizeActivations(x.data(), 1, 32, 32, QuantActivation::kA256), InternalError);
}

// 7-bit blocks (--matmul-precision int7): 63 in place of 127, half steps to even, |code| <= 63; the
// K types' blocks have no 7-bit form.
TEST(QuantActivations, SevenBitBlocksAsTheContractSays) {
  // amax 63 / 64, so 63 / amax is 64 exactly and multiples of 1 / 128 land on half steps.
  std::vector<float> x(256, 0.0f);
  x[0] = -0.984375f;    // -63
  x[1] = 0.5f;          // 32
  x[2] = 2.5f / 64.0f;  // 2.5 steps: to even (2)
  x[3] = 3.5f / 64.0f;  // 3.5 steps: to even (4)
  x[4] = 0.98f;         // 62.72: 63
  for (const bool avx2 : {false, true}) {
    SetKernelsEnabled(CpuKernels::kAvx2Int8, avx2 && CpuHas(CpuKernels::kAvx2Int8));
    const QuantInput q = QuantizeActivations(x.data(), 1, 32, 32, QuantActivation::kA32, 63);
    EXPECT_EQ(q.code_max, 63);
    EXPECT_EQ(q.Dx(0)[0], 1.0f / 64.0f);
    EXPECT_EQ(q.Codes(0)[0], -63);
    EXPECT_EQ(q.Codes(0)[1], 32);
    EXPECT_EQ(q.Codes(0)[2], 2);
    EXPECT_EQ(q.Codes(0)[3], 4);
    EXPECT_EQ(q.Codes(0)[4], 63);
    EXPECT_EQ(q.Sums(0)[0], -63 + 32 + 2 + 4 + 63);
  }
  SetKernelsEnabled(CpuKernels::kAvx2Int8, CpuHas(CpuKernels::kAvx2Int8));
  EXPECT_THROW(QuantizeActivations(x.data(), 1, 256, 256, QuantActivation::kA256, 63),
               InternalError);
  EXPECT_THROW(QuantizeActivations(x.data(), 1, 32, 32, QuantActivation::kA32, 100), InternalError);
}

// The AVX2 quantizer gives the portable one's bits: codes, dx and sums, for ordinary blocks, half
// steps, NaN, infinities, zero, subnormal and tiny blocks (127 / amax overflowing: zero), on 1 and
// several threads, 8-bit blocks and 7-bit.
TEST(QuantActivations, Avx2QuantizerIsThePortableOnesBits) {
  Rng rng(21);
  const int64_t n = 9, cols = 4 * 256;
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& v : x)
    v = (2.0f * rng.Uniform() - 1.0f) * std::ldexp(1.0f, static_cast<int>(rng.Next() % 40) - 20);
  for (int i = 0; i < 32; ++i) {
    x[32 + i] = 0.0f;                         // a zero block
    x[64 + i] = 1e-40f * (i - 16);            // subnormals only: 127 / amax overflows
    x[96 + i] = 1e-37f * (i % 3);             // tiny normals: overflows too
    x[128 + i] = (i - 16) * (0.5f / 127.0f);  // half steps of amax 1 (with x[128 + 31] below)
  }
  x[128 + 31] = 1.0f;
  x[160 + 7] = NAN;
  x[192 + 3] = INFINITY;
  x[224 + 9] = -INFINITY;
  x[300] = 1e-45f;  // a subnormal in a normal block
  for (const auto& [kind, code_max] : {std::pair{QuantActivation::kA32, 127},
                                       {QuantActivation::kA256, 127},
                                       {QuantActivation::kA32, 63}}) {
    SetKernelsEnabled(CpuKernels::kAvx2Int8, false);
    const QuantInput want = QuantizeActivations(x.data(), n, cols, cols, kind, code_max);
    SetKernelsEnabled(CpuKernels::kAvx2Int8, true);
    for (const int threads : {1, 2}) {
      omp_set_num_threads(threads);
      const QuantInput got = QuantizeActivations(x.data(), n, cols, cols, kind, code_max);
      EXPECT_EQ(got.codes, want.codes) << threads;
      EXPECT_EQ(got.sums, want.sums) << threads;
      ASSERT_EQ(got.dx.size(), want.dx.size());
      EXPECT_EQ(std::memcmp(got.dx.data(), want.dx.data(), got.dx.size() * 4), 0) << threads;
    }
    omp_set_num_threads(2);
  }
  const QuantInput a = QuantizeActivations(x.data(), 1, cols, cols, QuantActivation::kA32);
  EXPECT_EQ(a.Dx(0)[2], 0.0f);  // the subnormal block
  EXPECT_EQ(a.Dx(0)[3], 0.0f);  // the tiny one
  for (int i = 64; i < 128; ++i) EXPECT_EQ(a.Codes(0)[i], 0) << i;
  EXPECT_TRUE(std::isnan(a.Dx(0)[5]));
  EXPECT_TRUE(std::isinf(a.Dx(0)[6]));
}

TEST(QuantPanels, RefusesPartialBlocks) {
  std::vector<uint8_t> data(1000);
  EXPECT_THROW(QuantPanels::FromRows(GgmlQuant::kQ4_K, data.data(), 1, 128, 144, "blk.0.w"), Error);
  EXPECT_THROW(QuantPanels::FromRows(GgmlQuant::kQ8_0, data.data(), 1, 64, 60, "blk.0.w"), Error);
  EXPECT_EQ(GgmlQuantNamed("Q6_K"), GgmlQuant::kQ6_K);
  EXPECT_FALSE(GgmlQuantNamed("Q2_K").has_value());
}

}  // namespace
}  // namespace wc

namespace wc {
namespace {

// Through the GEMM's front door: a PackedMatrix of GGML rows runs QuantGemm's bits, alone and in a
// group whose input serves both a Q4_0 and a Q8_0 matrix (one quantization of x).
TEST(QuantGemmThroughGemm, PackedMatrixAndGroups) {
  Rng rng(15);
  const int64_t cols = 256, n = 5;
  std::vector<float> xf(static_cast<size_t>(n * cols));
  for (auto& v : xf) v = 2.0f * static_cast<float>(rng.Uniform()) - 1.0f;
  for (GgmlQuant type : {GgmlQuant::kQ4_0, GgmlQuant::kQ8_0, GgmlQuant::kQ6_K}) {
    const int64_t rows = 40;
    const int64_t row_bytes = cols / GgmlQuantBlockValues(type) * GgmlQuantBlockBytes(type);
    const auto data = RandomRows(type, rows, cols, rng);
    const PackedMatrix p =
        PackedMatrix::FromGgmlRows(type, data.data(), rows, cols, row_bytes, "w");
    EXPECT_EQ(p.format(), FormatOf(type));
    EXPECT_EQ(static_cast<int64_t>(p.bytes()), WeightFormatBytes(FormatOf(type), rows, cols));
    std::vector<float> y(static_cast<size_t>(n * rows)), want(y.size());
    Gemm(xf.data(), n, p, nullptr, y.data());
    const QuantInput x = QuantizeActivations(xf.data(), n, cols, cols, ActivationOf(type));
    QuantGemm(x, p.quant(), nullptr, want.data(), rows, 0, rows);
    EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0) << GgmlQuantName(type);
    EXPECT_NE(std::string(GemmKernelName(p)).find(GgmlQuantName(type)), std::string::npos);
  }
  const auto a = RandomRows(GgmlQuant::kQ4_0, 16, cols, rng);
  const auto b = RandomRows(GgmlQuant::kQ8_0, 24, cols, rng);
  const PackedMatrix pa =
      PackedMatrix::FromGgmlRows(GgmlQuant::kQ4_0, a.data(), 16, cols, cols / 32 * 18, "a");
  const PackedMatrix pb =
      PackedMatrix::FromGgmlRows(GgmlQuant::kQ8_0, b.data(), 24, cols, cols / 32 * 34, "b");
  const GemmInput in = PackGemmInput(xf.data(), n, cols, pa);
  EXPECT_TRUE(in.Serves(pb));
  std::vector<float> ya(static_cast<size_t>(n * 16)), yb(static_cast<size_t>(n * 24));
  std::vector<float> wa(ya.size()), wb(yb.size());
  Gemm(in, pa, nullptr, ya.data(), 16, 0, 16);
  Gemm(in, pb, nullptr, yb.data(), 24, 0, 24);
  Gemm(xf.data(), n, pa, nullptr, wa.data());
  Gemm(xf.data(), n, pb, nullptr, wb.data());
  EXPECT_EQ(ya, wa);
  EXPECT_EQ(yb, wb);
}

}  // namespace
}  // namespace wc
