// The BF16 GEMM's hand-written kernels in AMX's order - the AMX tiles
// (kernels/gemm/bf16/gemm_amx.h) and the vdpbf16ps tiles (gemm_bf16_dot.h) - each against a scalar
// chain written out from gemm_amx.h's order, bit for bit (memcmp): random shapes and token counts
// (every tile height), row ranges inside panels, bias or not, long k (many chunks), PackedMatrix's
// own panels, special values (subnormal activations, cancellation, wide exponents, overflow to inf,
// results at the edge of x86's flush), panel splits and threads. Each kernel runs where the CPU has
// it. A disabled benchmark prints GFLOP/s for a prefill shape.
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_kernels.h"
#include "kernels/gemm/bf16/gemm_amx.h"
#include "kernels/gemm/bf16/gemm_bf16_dot.h"
#include "kernels/gemm/packed_matrix.h"
#include "util/bf16.h"
#include "util/rng.h"

namespace wc {
namespace {

constexpr int64_t kPanel = gemm::kPanelRows;

// The kernels under test.
enum class OrderKernel { kAmx, kDot };

std::string KernelName(OrderKernel k) {
  return k == OrderKernel::kAmx ? "amx" : "vdpbf16ps";
}

bool Available(OrderKernel k) {
  return k == OrderKernel::kAmx ? AmxBf16GemmAvailable() : Bf16DotGemmAvailable();
}

class Bf16OrderKernel : public ::testing::TestWithParam<OrderKernel> {};

#define SKIP_WITHOUT_KERNEL() \
  if (!Available(GetParam())) \
  GTEST_SKIP() << "no " << KernelName(GetParam()) << " on this CPU / OS / WORMCHAT_SIMD"
#define SKIP_WITHOUT_AMX() \
  if (!AmxBf16GemmAvailable()) GTEST_SKIP() << "no AMX-BF16 on this CPU / OS / WORMCHAT_SIMD"

// ---- The reference: gemm_amx.h's order in scalar code, MXCSR untouched (IEEE, no FTZ) ----

// Zero of r's sign for |r| < 2^-126. For r = a + b with a, b normal or zero floats (multiples of
// 2^-149) this is x86's flush: a sum below 2^-126 is then exact, so IEEE's rounding and x86's
// (unbounded exponent) agree on which side of 2^-126 it falls.
float FlushTiny(float r) {
  return std::fabs(r) < 0x1p-126f ? std::copysign(0.0f, r) : r;
}

float AddFtz(float a, float b) {
  return FlushTiny(a + b);
}

// fma(a, b, c) flushed as x86 (and AMX) flush: tiny when the exact value rounded to 24 bits with
// unbounded exponent is below 2^-126. IEEE's result differs only when it is +-2^-126: the exact
// value may be in [2^-126 - 2^-150, 2^-126 - 2^-151), which IEEE rounds up on the subnormal grid
// but x86 sees as tiny. Decided exactly in double: a * b is exact there (two bf16, or two floats),
// and the two-sum of it and c is the exact value as hi + lo.
float FmaFtz(float a, float b, float c) {
  const float r = std::fma(a, b, c);
  const float ar = std::fabs(r);
  if (!(ar <= 0x1p-126f)) return r;  // normal, inf or NaN
  if (ar < 0x1p-126f) return std::copysign(0.0f, r);
  const double s = r < 0 ? -1.0 : 1.0;
  const double p = s * a * static_cast<double>(b), q = s * c;  // the exact value, made positive
  const double hi = p + q, bb = hi - p, lo = (p - (hi - bb)) + (q - bb);
  const double threshold = 0x1p-126 - 0x1p-151;                   // the tie: rounds to even, 2^-126
  return (hi - threshold) + lo < 0 ? std::copysign(0.0f, r) : r;  // hi - threshold is exact
}

// The activation as the contract rounds it: an f32 subnormal is zero of its sign, else RNE.
uint16_t ActivationBits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7f800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);
  return F32ToBF16(v);
}

// One output element: x row (f32, cols), W row (bf16 bits, padded with zeros to padded_cols).
float Chain(const float* x, int64_t cols, const uint16_t* w, int64_t padded_cols) {
  auto xv = [&](int64_t k) { return k < cols ? BF16ToF32(ActivationBits(x[k])) : 0.0f; };
  float c = 0.0f;
  for (int64_t k0 = 0; k0 < padded_cols; k0 += 32) {
    float e = 0.0f, o = 0.0f;
    for (int64_t j = 0; j < 16; ++j) {
      e = FmaFtz(xv(k0 + 2 * j), BF16ToF32(w[k0 + 2 * j]), e);
      o = FmaFtz(xv(k0 + 2 * j + 1), BF16ToF32(w[k0 + 2 * j + 1]), o);
    }
    c = AddFtz(c, AddFtz(e, o));
  }
  return c;
}

// ---- Weights as PackedMatrix lays out BF16 panels, padded to a multiple of 32 columns ----

struct Panels {
  int64_t rows = 0, cols = 0, padded_cols = 0;
  std::vector<uint16_t> w;  // [rows][padded_cols] bf16 bits, zero past cols
  // [panels][padded_cols / 2][32 rows][2] bf16, 64-byte aligned, zero rows past `rows`
  std::unique_ptr<uint16_t[], decltype(&std::free)> packed{nullptr, &std::free};
  int64_t panels() const { return (rows + kPanel - 1) / kPanel; }
  int64_t panel_bytes() const { return padded_cols * kPanel * 2; }
};

// w: [rows][cols] f32, rounded to bf16 (a bf16 subnormal flushed, as the packer does).
Panels MakePanels(const std::vector<float>& w, int64_t rows, int64_t cols) {
  Panels p;
  p.rows = rows;
  p.cols = cols;
  p.padded_cols = (cols + 31) / 32 * 32;
  p.w.assign(static_cast<size_t>(rows * p.padded_cols), 0);
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(1, p.panels()) * p.panel_bytes());
  p.packed.reset(static_cast<uint16_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  std::memset(p.packed.get(), 0, bytes);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) {
      uint16_t h = F32ToBF16(w[r * cols + k]);
      if ((h & 0x7f80u) == 0) h &= 0x8000u;
      p.w[r * p.padded_cols + k] = h;
      p.packed[(r / kPanel) * p.padded_cols * kPanel + (k / 2) * 2 * kPanel + (r % kPanel) * 2 +
               k % 2] = h;
    }
  }
  return p;
}

gemm::Task MakeTask(const void* w, int64_t panel_bytes, int64_t padded_cols, int64_t n,
                    const float* bias, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  gemm::Task task;
  task.n_tokens = n;
  task.w = static_cast<const uint8_t*>(w);
  task.panel_bytes = panel_bytes;
  task.k_steps = padded_cols / 2;
  task.bias = bias;
  task.y = y;
  task.y_stride = y_stride;
  task.row_begin = r0;
  task.row_end = r1;
  return task;
}

constexpr float kSentinel = -12345.0f;

// y = x W^T (+ bias) for rows [r0, r1) by kernel k from panels at `packed` (panel_bytes apart),
// panels split at `splits` (panel indices inside the range) or over `threads` OpenMP threads, into
// a y with 3 sentinel columns past the rows.
std::vector<float> RunPacked(OrderKernel k, const void* packed, int64_t panel_bytes, int64_t cols,
                             int64_t padded_cols, const float* x, int64_t n, int64_t x_stride,
                             const float* bias, int64_t r0, int64_t r1,
                             const std::vector<int64_t>& splits = {}, int threads = 1) {
  const int64_t y_stride = r1 - r0 + 3;
  std::vector<float> y(static_cast<size_t>(std::max<int64_t>(1, n * y_stride)), kSentinel);
  gemm::Task task = MakeTask(packed, panel_bytes, padded_cols, n, bias, y.data(), y_stride, r0, r1);
  AmxGemmInput amx;
  std::vector<float> dot;  // the vdpbf16ps tiles' packed input, tile by tile
  if (k == OrderKernel::kAmx) {
    amx = PackAmxGemmInput(x, n, x_stride, cols, padded_cols);
  } else {
    dot.assign(static_cast<size_t>(std::max<int64_t>(1, n * padded_cols / 2)), 0.0f);
    const gemm::TokenTiles tiles(n, kBf16DotTileTokens);
    for (int64_t i = 0; i < tiles.n_tiles; ++i)
      PackBf16DotTile(x + tiles.Begin(i) * x_stride, x_stride, cols, padded_cols, tiles.Height(i),
                      dot.data() + tiles.Begin(i) * padded_cols / 2);
    task.xp = dot.data();
    task.floats_per_token = padded_cols / 2;
    task.tile_tokens = kBf16DotTileTokens;
  }
  const auto range = [&](int64_t a, int64_t b) {
    if (k == OrderKernel::kAmx)
      GemmAmxRange(amx, task, a, b);
    else
      GemmBf16DotRange(task, a, b);
  };
  int64_t pa = r0 / kPanel;
  const int64_t pb = (r1 + kPanel - 1) / kPanel;
  if (threads > 1) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    gemm::ForThreadPanels(pa, pb, range);
    omp_set_num_threads(saved);
    return y;
  }
  for (const int64_t s : splits) {
    range(pa, s);
    pa = s;
  }
  range(pa, pb);
  return y;
}

std::vector<float> RunKernel(OrderKernel k, const Panels& w, const std::vector<float>& x, int64_t n,
                             int64_t x_stride, const float* bias, int64_t r0, int64_t r1,
                             const std::vector<int64_t>& splits = {}, int threads = 1) {
  return RunPacked(k, w.packed.get(), w.panel_bytes(), w.cols, w.padded_cols, x.data(), n, x_stride,
                   bias, r0, r1, splits, threads);
}

std::vector<float> RunReference(const Panels& w, const std::vector<float>& x, int64_t n,
                                int64_t x_stride, const float* bias, int64_t r0, int64_t r1) {
  const int64_t y_stride = r1 - r0 + 3;
  std::vector<float> y(static_cast<size_t>(std::max<int64_t>(1, n * y_stride)), kSentinel);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = r0; r < r1; ++r) {
      const float c = Chain(&x[t * x_stride], w.cols, &w.w[r * w.padded_cols], w.padded_cols);
      y[t * y_stride + r - r0] = bias != nullptr ? AddFtz(c, bias[r]) : c;
    }
  }
  return y;
}

// Bit-identical, sentinels included; the first difference named.
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0) return;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      FAIL() << what << ": element " << i << " is " << got[i] << " (" << std::hexfloat << got[i]
             << "), want " << std::defaultfloat << want[i] << " (" << std::hexfloat << want[i]
             << ")";
    }
  }
}

std::vector<float> Uniform(Rng& rng, size_t count, double lo, double hi) {
  std::vector<float> v(count);
  for (auto& e : v) e = static_cast<float>(lo + (hi - lo) * rng.Uniform());
  return v;
}

// sign * 2^e * (1 + u), e uniform in [emin, emax].
std::vector<float> WideExponents(Rng& rng, size_t count, int emin, int emax) {
  std::vector<float> v(count);
  for (auto& e : v) {
    const int ex = emin + static_cast<int>(rng.Next() % static_cast<uint64_t>(emax - emin + 1));
    e = std::ldexp(static_cast<float>(1.0 + rng.Uniform()), ex) * (rng.Next() % 2 ? 1.0f : -1.0f);
  }
  return v;
}

TEST_P(Bf16OrderKernel, RandomShapesAreTheChain) {
  SKIP_WITHOUT_KERNEL();
  Rng rng(2026);
  const int64_t kTokens[] = {1, 15, 16, 17, 33, 40, 2, 31, 32, 8, 3, 4, 5, 6, 7};
  for (int trial = 0; trial < 45; ++trial) {
    const int64_t n = trial < 15 ? kTokens[trial] : 1 + static_cast<int64_t>(rng.Next() % 40);
    int64_t cols = 32 + static_cast<int64_t>(rng.Next() % 269);
    if (cols % 32 == 0) cols += 1 + trial % 5;  // never a whole number of blocks
    const int64_t rows = 1 + static_cast<int64_t>(rng.Next() % 100);
    const int64_t r0 = static_cast<int64_t>(rng.Next() % static_cast<uint64_t>(rows));
    const int64_t r1 = r0 + 1 + static_cast<int64_t>(rng.Next() % static_cast<uint64_t>(rows - r0));
    const int64_t x_stride = cols + static_cast<int64_t>(rng.Next() % 3);
    const Panels w = MakePanels(Uniform(rng, static_cast<size_t>(rows * cols), -1, 1), rows, cols);
    const std::vector<float> x = Uniform(rng, static_cast<size_t>(n * x_stride), -2, 2);
    const std::vector<float> bias = Uniform(rng, static_cast<size_t>(rows), -1, 1);
    const float* b = trial % 2 ? bias.data() : nullptr;
    const std::string what = "n " + std::to_string(n) + " cols " + std::to_string(cols) + " rows " +
                             std::to_string(rows) + " [" + std::to_string(r0) + ", " +
                             std::to_string(r1) + ")" + (b ? " bias" : "");
    ExpectSameBits(RunKernel(GetParam(), w, x, n, x_stride, b, r0, r1),
                   RunReference(w, x, n, x_stride, b, r0, r1), what);
  }
}

// k long enough for many chunks of k blocks, and a last chunk cut short.
TEST_P(Bf16OrderKernel, LongKIsTheChain) {
  SKIP_WITHOUT_KERNEL();
  Rng rng(7);
  for (const int64_t cols : {1000, 4544, 4539}) {
    const int64_t rows = 70, n = 35;
    const Panels w = MakePanels(Uniform(rng, static_cast<size_t>(rows * cols), -1, 1), rows, cols);
    const std::vector<float> x = Uniform(rng, static_cast<size_t>(n * cols), -2, 2);
    const std::vector<float> bias = Uniform(rng, static_cast<size_t>(rows), -1, 1);
    ExpectSameBits(RunKernel(GetParam(), w, x, n, cols, bias.data(), 3, rows),
                   RunReference(w, x, n, cols, bias.data(), 3, rows),
                   "cols " + std::to_string(cols));
  }
}

// More tokens than one pass takes (512 for the vdpbf16ps tiles) and k long enough to go in chunks
// (over 4096 pairs), with a last chunk and a last token pass cut short.
TEST_P(Bf16OrderKernel, ManyTokensAndLongKAreTheChain) {
  SKIP_WITHOUT_KERNEL();
  Rng rng(8);
  const int64_t rows = 40, cols = 8300, n = 530;
  const Panels w = MakePanels(Uniform(rng, static_cast<size_t>(rows * cols), -1, 1), rows, cols);
  const std::vector<float> x = Uniform(rng, static_cast<size_t>(n * cols), -2, 2);
  const std::vector<float> bias = Uniform(rng, static_cast<size_t>(rows), -1, 1);
  ExpectSameBits(RunKernel(GetParam(), w, x, n, cols, bias.data(), 1, rows),
                 RunReference(w, x, n, cols, bias.data(), 1, rows), "530 tokens, cols 8300");
}

// PackedMatrix's own BF16 panels (columns a multiple of 32, so its padding is the kernel's).
TEST_P(Bf16OrderKernel, PackedMatrixPanelsAreTheChain) {
  SKIP_WITHOUT_KERNEL();
  Rng rng(11);
  const int64_t rows = 77, cols = 128, n = 20;
  const std::vector<float> src = Uniform(rng, static_cast<size_t>(rows * cols), -1, 1);
  std::vector<uint16_t> bits(src.size());
  for (size_t i = 0; i < src.size(); ++i) bits[i] = F32ToBF16(src[i]);
  const MatrixRef ref{DType::kBF16, rows, cols, cols, bits.data()};
  const PackedMatrix m = PackedMatrix::Pack(ref, ActivationPrecision::kBF16);
  ASSERT_EQ(m.padded_cols(), cols);
  const Panels w = MakePanels(src, rows, cols);  // the same values, for the reference
  const std::vector<float> x = Uniform(rng, static_cast<size_t>(n * cols), -2, 2);
  const std::vector<float> y = RunPacked(GetParam(), m.data(), m.panel_elems() * 2, cols,
                                         m.padded_cols(), x.data(), n, cols, nullptr, 0, rows);
  ExpectSameBits(y, RunReference(w, x, n, cols, nullptr, 0, rows), "PackedMatrix");
}

TEST_P(Bf16OrderKernel, SpecialValuesAreTheChain) {
  SKIP_WITHOUT_KERNEL();
  const int64_t rows = 40, cols = 200, n = 19;
  Rng rng(5);
  auto check = [&](const std::vector<float>& wv, const std::vector<float>& x, const char* what) {
    const Panels w = MakePanels(wv, rows, cols);
    ExpectSameBits(RunKernel(GetParam(), w, x, n, cols, nullptr, 0, rows),
                   RunReference(w, x, n, cols, nullptr, 0, rows), what);
  };
  const size_t nw = static_cast<size_t>(rows * cols), nx = static_cast<size_t>(n * cols);
  {  // activations that are f32 subnormals: zero, though the largest would round to 2^-126
    std::vector<float> x = WideExponents(rng, nx, -30, 0);
    for (size_t i = 0; i < nx; ++i) {  // every third value, and all of every third token
      if (i % 3 != 0 && (i / cols) % 3 != 0) continue;
      uint32_t u = i % 2 ? 0x007fffffu : static_cast<uint32_t>(rng.Next() % 0x800000u);
      if (i % 5 == 0) u |= 0x80000000u;
      std::memcpy(&x[i], &u, 4);
    }
    check(WideExponents(rng, nw, -10, 10), x, "subnormal activations");
  }
  // products and chains that pass near 2^-126, flushed or not
  check(WideExponents(rng, nw, -72, -56), WideExponents(rng, nx, -70, -55), "tiny products");
  check(WideExponents(rng, nw, -40, 40), WideExponents(rng, nx, -40, 40), "wide exponents");
  {  // cancellation: neighbours' products cancel exactly or nearly, large terms cancel later
    std::vector<float> wv = WideExponents(rng, nw, -12, 12);
    std::vector<float> x = WideExponents(rng, nx, -12, 12);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t k = 0; k + 1 < cols; k += 2) {
        const uint64_t c = rng.Next() % 4;
        if (c == 0) x[t * cols + k + 1] = -x[t * cols + k];
        if (c == 1) x[t * cols + k + 1] = -x[t * cols + k] * (1.0f + 0x1p-7f);
      }
      for (int64_t k = 0; k + 33 < cols; k += 64) {
        x[t * cols + k] = std::ldexp(1.5f, 22);
        x[t * cols + k + 33] = -std::ldexp(1.5f, 22);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k + 1 < cols; k += 2)
        if (rng.Next() % 2) wv[r * cols + k + 1] = wv[r * cols + k];
      for (int64_t k = 0; k + 33 < cols; k += 64) wv[r * cols + k + 33] = wv[r * cols + k];
    }
    check(wv, x, "cancellation");
  }
  {  // near overflow, all positive (no inf - inf): sums overflow to inf, and FLT_MAX rounds to a
     // bf16 inf
    std::vector<float> wv = WideExponents(rng, nw, 50, 63);
    std::vector<float> x = WideExponents(rng, nx, 50, 63);
    for (auto& v : wv) v = std::fabs(v);
    for (auto& v : x) v = std::fabs(v);
    x[5] = std::numeric_limits<float>::max();
    const Panels w = MakePanels(wv, rows, cols);
    const std::vector<float> y = RunKernel(GetParam(), w, x, n, cols, nullptr, 0, rows);
    int infs = 0;
    for (const float v : y) infs += std::isinf(v);
    EXPECT_GT(infs, 0);
    ExpectSameBits(y, RunReference(w, x, n, cols, nullptr, 0, rows), "near overflow");
  }
}

// The even lane's chain 2^-126, + 2^-149, + p (one token, one row): the exact sum lands just
// below 2^-126. IEEE (gradual underflow) rounds the first three up to 2^-126; x86 flushes a value
// whose 24-bit rounding with unbounded exponent is below 2^-126, so the first becomes zero, and
// AMX does the same.
TEST_P(Bf16OrderKernel, TinyResultsFlushAsX86Does) {
  SKIP_WITHOUT_KERNEL();
  struct Case {
    float p_x, p_w, want;  // p = p_x * p_w; the exact result 2^-126 + 2^-149 + p
  } cases[] = {
      {-1.5f * 0x1p-100f, 0x1p-49f, 0.0f},         // 2^-126 - 2^-150: tiny, flushed (IEEE: 2^-126)
      {-1.25f * 0x1p-100f, 0x1p-49f, 0x1p-126f},   // 2^-126 - 2^-151: the tie, rounds to 2^-126
      {-1.125f * 0x1p-100f, 0x1p-49f, 0x1p-126f},  // 2^-126 - 2^-152: rounds to 2^-126
      {-2.0f * 0x1p-100f, 0x1p-49f, 0.0f},         // 2^-126 - 2^-149: a subnormal, flushed
  };
  for (const Case& c : cases) {
    std::vector<float> x(32, 0.0f), wv(32, 0.0f);
    x[0] = 0x1p-63f;  // k = 0, 2, 4: the even chain
    wv[0] = 0x1p-63f;
    x[2] = 0x1p-100f;
    wv[2] = 0x1p-49f;
    x[4] = c.p_x;
    wv[4] = c.p_w;
    const Panels w = MakePanels(wv, 1, 32);
    const std::vector<float> y = RunKernel(GetParam(), w, x, 1, 32, nullptr, 0, 1);
    const std::vector<float> want = RunReference(w, x, 1, 32, nullptr, 0, 1);
    EXPECT_EQ(y[0], c.want) << std::hexfloat << c.p_x;
    ExpectSameBits(y, want, "tiny");
  }
}

// One call, two calls split inside, one call per panel, and two OpenMP threads: the same bits.
TEST_P(Bf16OrderKernel, PanelSplitsAndThreadsGiveTheSameBits) {
  SKIP_WITHOUT_KERNEL();
  Rng rng(3);
  const int64_t rows = 300, cols = 610, n = 40, r0 = 7, r1 = 290;
  const Panels w = MakePanels(Uniform(rng, static_cast<size_t>(rows * cols), -1, 1), rows, cols);
  const std::vector<float> x = Uniform(rng, static_cast<size_t>(n * cols), -2, 2);
  const std::vector<float> bias = Uniform(rng, static_cast<size_t>(rows), -1, 1);
  const OrderKernel k = GetParam();
  const std::vector<float> one = RunKernel(k, w, x, n, cols, bias.data(), r0, r1);
  ExpectSameBits(one, RunReference(w, x, n, cols, bias.data(), r0, r1), "one call");
  ExpectSameBits(RunKernel(k, w, x, n, cols, bias.data(), r0, r1, {3}), one, "split at 3");
  ExpectSameBits(RunKernel(k, w, x, n, cols, bias.data(), r0, r1, {1, 2, 3, 4, 5, 6, 7, 8}), one,
                 "a call per panel");
  ExpectSameBits(RunKernel(k, w, x, n, cols, bias.data(), r0, r1, {}, 2), one, "two threads");
}

TEST_P(Bf16OrderKernel, NoColumnsGiveTheBias) {
  SKIP_WITHOUT_KERNEL();
  const std::vector<float> bias = {1.5f, -2.0f, 3.0f};
  const std::vector<float> y =
      RunPacked(GetParam(), nullptr, 0, 0, 0, nullptr, 2, 0, bias.data(), 0, 3);
  const std::vector<float> want = {1.5f, -2.0f, 3.0f, kSentinel, kSentinel, kSentinel,
                                   1.5f, -2.0f, 3.0f, kSentinel, kSentinel, kSentinel};
  ExpectSameBits(y, want, "no columns");
}

TEST(GemmAmx, FamilySwitch) {
  SKIP_WITHOUT_AMX();
  EXPECT_EQ(CpuKernelsName(CpuKernels::kAmxBf16Gemm), "AMX BF16");
  SetKernelsEnabled(CpuKernels::kAmxBf16Gemm, false);
  EXPECT_FALSE(AmxBf16GemmAvailable());
  EXPECT_TRUE(CpuHas(CpuKernels::kAmxBf16Gemm));
  SetKernelsEnabled(CpuKernels::kAmxBf16Gemm, true);
  EXPECT_TRUE(AmxBf16GemmAvailable());
}

TEST(GemmBf16Dot, FamilySwitch) {
  if (!Bf16DotGemmAvailable()) GTEST_SKIP() << "no AVX-512 BF16";
  SetKernelsEnabled(CpuKernels::kAvx512Bf16Vbmi, false);
  EXPECT_FALSE(Bf16DotGemmAvailable());
  SetKernelsEnabled(CpuKernels::kAvx512Bf16Vbmi, true);
  EXPECT_TRUE(Bf16DotGemmAvailable());
}

// A prefill's GEMMs on one thread (the calling one): 512 tokens, K = 4544, N = 4544 and 18176.
// Run with --gtest_also_run_disabled_tests --gtest_filter='*Throughput*'.
TEST_P(Bf16OrderKernel, DISABLED_Throughput) {
  SKIP_WITHOUT_KERNEL();
  const int64_t n = 512, cols = 4544;
  Rng rng(1);
  const std::vector<float> x = Uniform(rng, static_cast<size_t>(n * cols), -2, 2);
  for (const int64_t rows : {4544, 18176}) {
    Panels w;  // random bf16 panels, packed directly (MakePanels' reference copy is not needed)
    w.rows = rows;
    w.cols = w.padded_cols = cols;
    const size_t elems = static_cast<size_t>(w.panels() * w.panel_bytes() / 2);
    w.packed.reset(static_cast<uint16_t*>(std::aligned_alloc(64, elems * 2)));
    for (size_t i = 0; i < elems; ++i)
      w.packed[i] = F32ToBF16(static_cast<float>(rng.Uniform() * 2 - 1));
    const double flops = 2.0 * n * rows * cols;
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      RunKernel(GetParam(), w, x, n, cols, nullptr, 0, rows);
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf(
        "%s BF16 GEMM %ldx%ld by %ldx%ld, 1 thread: %.1f GFLOP/s (%.2f ms, input pack "
        "included)\n",
        KernelName(GetParam()).c_str(), static_cast<long>(n), static_cast<long>(cols),
        static_cast<long>(cols), static_cast<long>(rows), flops / best * 1e-9, best * 1e3);
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, Bf16OrderKernel,
                         ::testing::Values(OrderKernel::kAmx, OrderKernel::kDot),
                         [](const auto& info) { return KernelName(info.param); });

}  // namespace
}  // namespace wc
