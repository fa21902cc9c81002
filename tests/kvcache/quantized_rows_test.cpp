// The attention kernels read quantized K/V rows in place (kernels/attention/kv_rows.h) exactly as
// the kvcache codec writes them (kvcache/kv_formats.h): every code of every format decodes to the
// codec's value, and scores / weighted sums over encoded rows match naive loops over DecodeRow's
// values, for every head and row count around the SIMD groupings and head_dims with scalar tails.
// int8 rows go through integer dot products (int8.h): their scores and sums are
// checked bit for bit against that contract, and within its rounding bound of the true values.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hwy/targets.h"

#include "kernels/attention/bfp_kv.h"
#include "kernels/attention/decode_attention.h"
#include "kernels/attention/decode_attention_bf16dot.h"
#include "kernels/attention/fp8.h"
#include "kernels/attention/int8.h"
#include "kernels/attention/kernel_table.h"
#include "kvcache/kv_formats.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/rng.h"

namespace wc {
namespace {

struct Format {
  KVQuant quant;
  ScaleMode mode;
};

// Rows [rows, cols] encoded in `f` one byte past an aligned address, and their decoded values.
struct Encoded {
  std::vector<uint8_t> bytes;
  std::vector<float> decoded;  // [rows, cols]
  RowsRef ref;
};

constexpr float kTensorScale = 3.0f / 448.0f;

Encoded Encode(const Format& f, int64_t rows, int64_t cols, uint64_t seed) {
  Rng rng(seed);
  const int64_t row_bytes = EncodedRowBytes(f.quant, f.mode, static_cast<int>(cols));
  Encoded e;
  e.bytes.assign(static_cast<size_t>(rows * row_bytes + 1), 0);
  e.decoded.resize(static_cast<size_t>(rows * cols));
  std::vector<float> x(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const double spread = 0.1 + 3 * rng.Uniform();  // rows of different magnitudes
    for (auto& v : x) v = static_cast<float>((rng.Uniform() * 2 - 1) * spread);
    if (r == 2) std::fill(x.begin(), x.end(), 0.0f);  // an all-zero row
    uint8_t* dst = e.bytes.data() + 1 + r * row_bytes;
    EXPECT_TRUE(EncodeRow(f.quant, f.mode, kTensorScale, x.data(), static_cast<int>(cols), dst));
    DecodeRow(f.quant, f.mode, kTensorScale, dst, static_cast<int>(cols), &e.decoded[r * cols]);
  }
  e.ref.format = RowFormatOf(f.quant);
  e.ref.rows = rows;
  e.ref.cols = cols;
  e.ref.row_bytes = row_bytes;
  e.ref.data = e.bytes.data() + 1;
  e.ref.row_scale = f.quant != KVQuant::kBFP8 && f.mode == ScaleMode::kTokenHead;
  e.ref.tensor_scale = kTensorScale;
  return e;
}

using test::RandomVec;

// The scale of row p of encoded int8 / fp8 rows, as the kernels read it (without E4M3's 2^8).
float Int8RowScale(const RowsRef& m, int64_t p) {
  if (!m.row_scale) return m.tensor_scale;
  uint16_t bits;
  std::memcpy(&bits, m.data + p * m.row_bytes, 2);
  return BF16ToF32(bits);
}
int8_t Int8Code(const RowsRef& m, int64_t p, int64_t c) {
  return static_cast<int8_t>(m.data[p * m.row_bytes + (m.row_scale ? 2 : 0) + c]);
}

// The int8 score contract, written out: q rounded to int8 per head, an exact integer dot product,
// then float(dot) * (head_scale * row_scale).
std::vector<float> Int8ContractScores(const std::vector<float>& q, int n_heads, const RowsRef& k,
                                      float scale, std::vector<float>* q_step) {
  const int64_t cols = k.cols, rows = k.rows;
  std::vector<float> out(static_cast<size_t>(n_heads * rows));
  q_step->assign(static_cast<size_t>(n_heads), 0.0f);
  for (int h = 0; h < n_heads; ++h) {
    float qmax = 0;
    for (int64_t c = 0; c < cols; ++c) qmax = std::max(qmax, std::fabs(q[h * cols + c]));
    // An all-zero head: codes 0 and head_scale 0.
    const float inv = qmax > 0 ? 127.0f / qmax : 0.0f, head_scale = scale * (qmax / 127.0f);
    (*q_step)[h] = qmax / 127.0f;
    for (int64_t p = 0; p < rows; ++p) {
      int32_t dot = 0;
      for (int64_t c = 0; c < cols; ++c)
        dot += static_cast<int32_t>(std::nearbyint(q[h * cols + c] * inv)) * Int8Code(k, p, c);
      out[h * rows + p] = static_cast<float>(dot) * (head_scale * Int8RowScale(k, p));
    }
  }
  return out;
}

// The int8 P.V contract: per segment of kInt8WeightSegmentRows rows, w * row_scale rounded to int16
// against the segment's largest |w * row_scale| (unit = max / 32767), an exact integer sum per
// column, then o = fma(float(sum), unit, o). units: every segment's unit per head.
void Int8ContractWeighted(const std::vector<float>& w, int64_t w_stride, int n_heads,
                          const RowsRef& v, std::vector<float>* o, std::vector<float>* units) {
  const int64_t cols = v.cols;
  units->clear();
  for (int64_t s0 = 0; s0 < v.rows; s0 += kInt8WeightSegmentRows) {
    const int64_t s1 = std::min(v.rows, s0 + kInt8WeightSegmentRows);
    for (int h = 0; h < n_heads; ++h) {
      float wmax = 0;
      for (int64_t p = s0; p < s1; ++p)
        wmax = std::max(wmax, std::fabs(w[h * w_stride + p] * Int8RowScale(v, p)));
      const float inv = 32767.0f / wmax, unit = wmax / 32767.0f;
      units->push_back(unit);
      for (int64_t c = 0; c < cols; ++c) {
        int32_t sum = 0;
        for (int64_t p = s0; p < s1; ++p)
          sum +=
              static_cast<int32_t>(std::nearbyint(w[h * w_stride + p] * Int8RowScale(v, p) * inv)) *
              Int8Code(v, p, c);
        float& out = (*o)[h * cols + c];
        out = std::fma(static_cast<float>(sum), unit, out);
      }
    }
  }
}

class QuantizedRows : public ::testing::TestWithParam<Format> {};

void CheckScores(const Format& f) {
  for (int64_t cols : {64, 128, 192, 72}) {
    if (f.quant == KVQuant::kBFP8 && cols % 16 != 0) continue;
    for (int n_heads : {1, 3, 4, 5, 8, 11, 16}) {
      for (int64_t rows : {1, 3, 4, 5, 17, 64}) {
        const Encoded k = Encode(f, rows, cols, 100 + rows + cols);
        const auto q = RandomVec(static_cast<size_t>(n_heads * cols), 7 + n_heads);
        std::vector<float> scores(static_cast<size_t>(n_heads * rows));
        AttentionScores(q.data(), n_heads, k.ref, 0.125f, scores.data());
        const bool int8 = f.quant == KVQuant::kInt8;
        std::vector<float> q_step;
        const std::vector<float> contract =
            int8 ? Int8ContractScores(q, n_heads, k.ref, 0.125f, &q_step) : std::vector<float>();
        // fp8 through bf16 dot products: the query is rounded to bf16 first (exact products).
        const bool bf16_q = Bf16DotUsable(k.ref);
        for (int h = 0; h < n_heads; ++h)
          for (int64_t p = 0; p < rows; ++p) {
            double want = 0, mag = 0, k_abs = 0;
            for (int64_t c = 0; c < cols; ++c) {
              const float qc = bf16_q ? BF16ToF32(F32ToBF16(q[h * cols + c])) : q[h * cols + c];
              want += static_cast<double>(qc) * k.decoded[p * cols + c];
              mag += std::fabs(static_cast<double>(qc) * k.decoded[p * cols + c]);
              k_abs += std::fabs(k.decoded[p * cols + c]);
            }
            // int8: q is off by at most half its step per element.
            const double q_error = int8 ? 0.5 * q_step[h] * k_abs : 0.0;
            EXPECT_NEAR(scores[h * rows + p], 0.125 * want,
                        0.125 * (q_error + 1e-5 * (mag + q_error)) + 1e-30)
                << "cols " << cols << " heads " << n_heads << " rows " << rows << " h " << h
                << " p " << p;
            if (int8) {
              ASSERT_EQ(scores[h * rows + p], contract[h * rows + p]) << "h " << h << " p " << p;
            }
          }
        // A row's score does not depend on the rows computed with it.
        for (int64_t p = 0; p < rows; ++p) {
          RowsRef one = k.ref;
          one.data = k.ref.data + p * k.ref.row_bytes;
          one.rows = 1;
          std::vector<float> s1(static_cast<size_t>(n_heads));
          AttentionScores(q.data(), n_heads, one, 0.125f, s1.data());
          for (int h = 0; h < n_heads; ++h) ASSERT_EQ(s1[h], scores[h * rows + p]);
        }
      }
    }
  }
}

void CheckWeighted(const Format& f) {
  for (int64_t cols : {64, 128, 72}) {
    if (f.quant == KVQuant::kBFP8 && cols % 16 != 0) continue;
    for (int n_heads : {1, 3, 4, 5, 11, 16}) {
      for (int64_t rows : {1, 5, 33, 600}) {  // 600: int8 sums two segments
        const Encoded v = Encode(f, rows, cols, 300 + rows + cols);
        const auto w = RandomVec(static_cast<size_t>(n_heads * (rows + 3)), 11);
        auto o = RandomVec(static_cast<size_t>(n_heads * cols), 12);
        std::vector<double> want(o.begin(), o.end());
        std::vector<double> mag(o.size());
        // fp8 and bfp8 through bf16 dot products: each weight times its row's scale is rounded to
        // bf16.
        const bool bf16_w = Bf16DotUsable(v.ref);
        for (int h = 0; h < n_heads; ++h)
          for (int64_t p = 0; p < rows; ++p)
            for (int64_t c = 0; c < cols; ++c) {
              double wp = w[h * (rows + 3) + p];
              if (bf16_w) {
                // the row's scale (any scaled format; BFP8's exponents are in its values)
                const float s = f.quant == KVQuant::kBFP8 ? 1.0f : Int8RowScale(v.ref, p);
                wp = s == 0.0f ? 0.0 : BF16ToF32(F32ToBF16(w[h * (rows + 3) + p] * s)) / double{s};
              }
              const double t = wp * v.decoded[p * cols + c];
              want[h * cols + c] += t;
              mag[h * cols + c] += std::fabs(t);
            }
        std::vector<float> contract = o, units;
        const bool int8 = f.quant == KVQuant::kInt8;
        if (int8) Int8ContractWeighted(w, rows + 3, n_heads, v.ref, &contract, &units);
        AccumulateWeightedRows(w.data(), rows + 3, n_heads, v.ref, o.data());
        for (size_t i = 0; i < o.size(); ++i) {
          // int8: each weight is off by at most half a unit (bounded here by the largest unit).
          double w_error = 0;
          if (int8) {
            const int h = static_cast<int>(i / cols);
            const int64_t c = static_cast<int64_t>(i % cols);
            float unit = 0;
            for (size_t s = h; s < units.size(); s += n_heads) unit = std::max(unit, units[s]);
            for (int64_t p = 0; p < rows; ++p)
              w_error += 0.5 * unit * std::abs(Int8Code(v.ref, p, c));
          }
          EXPECT_NEAR(o[i], want[i], w_error + 1e-5 * (mag[i] + w_error + 1))
              << "cols " << cols << " i " << i;
          if (int8) {
            ASSERT_EQ(o[i], contract[i]) << "cols " << cols << " rows " << rows << " i " << i;
          }
        }
      }
    }
  }
}

TEST_P(QuantizedRows, ScoresMatchNaiveDotsOverDecodedRows) {
  CheckScores(GetParam());
}

TEST_P(QuantizedRows, WeightedRowsMatchNaiveSumsOverDecodedRows) {
  CheckWeighted(GetParam());
}

// The same checks with the CPU-specific kernels (VNNI int8, BF16 fp8) off: the portable paths.
TEST_P(QuantizedRows, PortableKernelsMatchNaiveLoops) {
  SetVnniKernels(false);
  SetBf16DotKernels(false);
  CheckScores(GetParam());
  CheckWeighted(GetParam());
  SetVnniKernels(true);
  SetBf16DotKernels(true);
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedRows,
                         ::testing::Values(Format{KVQuant::kInt8, ScaleMode::kTokenHead},
                                           Format{KVQuant::kInt8, ScaleMode::kTensor},
                                           Format{KVQuant::kFP8E4M3, ScaleMode::kTokenHead},
                                           Format{KVQuant::kFP8E4M3, ScaleMode::kTensor},
                                           Format{KVQuant::kFP8E5M2, ScaleMode::kTokenHead},
                                           Format{KVQuant::kFP8E5M2, ScaleMode::kTensor},
                                           Format{KVQuant::kBFP8, ScaleMode::kTokenHead}));

// The portable int8 path (heads in lanes for Q.K^T, row pairs for P.V: int16 multiply-add pairs
// in Highway) gives the VNNI kernels' results bit for bit on every SIMD target this binary has:
// every score and every output, for head groups of 1-16, tile tails, segments, both scale modes
// and an odd width (against the contract written out).
TEST(QuantizedRows, Int8PortablePathEqualsVnniKernels) {
  if (!CpuHasVnniKernels()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {  // the portable path on each
    for (ScaleMode mode : {ScaleMode::kTokenHead, ScaleMode::kTensor}) {
      for (int64_t cols : {64, 128, 192, 256, 65}) {  // 192: any width; 65: odd (portable only)
        for (int n_heads : {1, 2, 3, 4, 6, 8, 15, 16}) {
          for (int64_t rows : {1, 7, 16, 61, 513}) {
            const Encoded k = Encode({KVQuant::kInt8, mode}, rows, cols, 500 + rows + cols);
            auto q = RandomVec(static_cast<size_t>(n_heads * cols), 17 + n_heads);
            if (n_heads > 1) std::fill(q.begin() + cols, q.begin() + 2 * cols, 0.0f);  // zero head
            const auto w = RandomVec(static_cast<size_t>(n_heads * rows), 19);
            std::vector<float> s_fast(static_cast<size_t>(n_heads * rows)), s_port = s_fast;
            auto o_fast = RandomVec(static_cast<size_t>(n_heads * cols), 23), o_port = o_fast;
            std::vector<float> contract;
            if (cols % 64 == 0) {  // the VNNI kernels' widths
              SetVnniKernels(true);
              AttentionScores(q.data(), n_heads, k.ref, 0.125f, s_fast.data());
              AccumulateWeightedRows(w.data(), rows, n_heads, k.ref, o_fast.data());
            } else {
              std::vector<float> q_step;
              s_fast = Int8ContractScores(q, n_heads, k.ref, 0.125f, &q_step);
              std::vector<float> units;
              Int8ContractWeighted(w, rows, n_heads, k.ref, &o_fast, &units);
            }
            SetVnniKernels(false);
            hwy::SetSupportedTargetsForTest(target);
            AttentionScores(q.data(), n_heads, k.ref, 0.125f, s_port.data());
            AccumulateWeightedRows(w.data(), rows, n_heads, k.ref, o_port.data());
            hwy::SetSupportedTargetsForTest(0);
            SetVnniKernels(true);
            for (size_t i = 0; i < s_fast.size(); ++i)
              ASSERT_EQ(s_fast[i], s_port[i])
                  << hwy::TargetName(target) << " cols " << cols << " heads " << n_heads << " rows "
                  << rows << " i " << i;
            for (size_t i = 0; i < o_fast.size(); ++i)
              ASSERT_EQ(o_fast[i], o_port[i])
                  << hwy::TargetName(target) << " cols " << cols << " heads " << n_heads << " rows "
                  << rows << " i " << i;
          }
        }
      }
    }
  }
}

// Groups of more than 4 heads widen V once for all of them (int8 and fp8): a head's P.V output
// is the same chain as when its group is computed alone, bit for bit.
TEST(QuantizedRows, WeightedRowsOfAHeadDoNotDependOnItsGroup) {
  for (KVQuant quant : {KVQuant::kInt8, KVQuant::kFP8E4M3, KVQuant::kFP8E5M2}) {
    for (int64_t cols : {64, 128, 192}) {
      for (int64_t rows : {7, 64, 130, 512}) {
        const int n_heads = 13;
        const Encoded v = Encode({quant, ScaleMode::kTokenHead}, rows, cols, 700 + rows + cols);
        const auto w = RandomVec(static_cast<size_t>(n_heads * rows), 41);
        auto all = RandomVec(static_cast<size_t>(n_heads * cols), 43);
        auto apart = all;
        AccumulateWeightedRows(w.data(), rows, n_heads, v.ref, all.data());
        for (int h0 = 0; h0 < n_heads; h0 += 4)
          AccumulateWeightedRows(w.data() + h0 * rows, rows, std::min(4, n_heads - h0), v.ref,
                                 apart.data() + h0 * cols);
        for (size_t i = 0; i < all.size(); ++i)
          ASSERT_EQ(all[i], apart[i]) << "cols " << cols << " rows " << rows << " i " << i;
      }
    }
  }
}

// The kernel names the benchmark prints follow the switches and the CPU.
TEST(QuantizedRows, KernelNamesFollowTheCpuAndSwitches) {
  const Encoded i8 = Encode({KVQuant::kInt8, ScaleMode::kTokenHead}, 4, 128, 1);
  const Encoded f8 = Encode({KVQuant::kFP8E4M3, ScaleMode::kTokenHead}, 4, 128, 2);
  const Encoded b8 = Encode({KVQuant::kBFP8, ScaleMode::kTokenHead}, 4, 128, 3);
  EXPECT_EQ(AttentionKernelName(i8.ref).rfind("int8 dot (", 0), 0u);
  EXPECT_EQ(AttentionKernelName(i8.ref).find("VNNI") != std::string::npos, CpuHasVnniKernels());
  EXPECT_EQ(AttentionKernelName(f8.ref).rfind(CpuHasBf16DotKernels() ? "bf16 dot" : "f32 FMA", 0),
            0u);
  EXPECT_EQ(AttentionKernelName(b8.ref).rfind(CpuHasBf16DotKernels() ? "bf16 dot" : "f32 FMA", 0),
            0u);
  SetVnniKernels(false);
  SetBf16DotKernels(false);
  EXPECT_EQ(AttentionKernelName(i8.ref).rfind("int8 dot (", 0), 0u);
  EXPECT_EQ(AttentionKernelName(i8.ref).find("VNNI"), std::string::npos);
  EXPECT_EQ(AttentionKernelName(f8.ref).rfind("f32 FMA (", 0), 0u);
  EXPECT_EQ(AttentionKernelName(b8.ref).rfind("f32 FMA (", 0), 0u);
  SetVnniKernels(true);
  SetBf16DotKernels(true);
}

// The kernel table (kernels/attention/kernel_table.h) is what runs and what is printed:
// AttentionScores and AccumulateWeightedRows give bit for bit what the chosen row's kernel gives,
// AttentionKernelName prints the chosen row's name whatever the group size, and the two head
// thresholds pick the rows they name, with every family on and with the AVX-512 ones off.
TEST(QuantizedRows, KernelTableNamesTheKernelThatRuns) {
  const int64_t rows = 37, cols = 64;
  for (bool avx512 : {true, false}) {
    SetVnniKernels(avx512);
    SetBf16DotKernels(avx512);
    for (KVQuant quant : {KVQuant::kInt8, KVQuant::kFP8E4M3, KVQuant::kFP8E5M2, KVQuant::kBFP8}) {
      const Encoded m = Encode({quant, ScaleMode::kTokenHead}, rows, cols, 71);
      for (int n_heads : {1, 3, 4, 5, 7, 8, 16}) {
        SCOPED_TRACE(std::string(KVQuantName(quant)) + " heads " + std::to_string(n_heads));
        const auto q = RandomVec(n_heads * cols, 72);
        const auto w = RandomVec(n_heads * rows, 73);
        const AttentionKernelRow& qk = ChooseAttentionKernel(AttentionOp::kScores, m.ref, n_heads);
        const AttentionKernelRow& pv =
            ChooseAttentionKernel(AttentionOp::kWeighted, m.ref, n_heads);
        EXPECT_EQ(AttentionKernelRowName(qk), AttentionKernelName(m.ref));
        std::vector<float> got(n_heads * rows), want(n_heads * rows);
        AttentionScores(q.data(), n_heads, m.ref, 0.125f, got.data());
        qk.scores(q.data(), n_heads, m.ref, 0.125f, want.data(), RowsRef{});
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
        std::vector<float> o_got(n_heads * cols, 0.5f), o_want(n_heads * cols, 0.5f);
        AccumulateWeightedRows(w.data(), rows, n_heads, m.ref, o_got.data());
        pv.weighted(w.data(), rows, n_heads, m.ref, o_want.data(), RowsRef{});
        EXPECT_EQ(0, std::memcmp(o_got.data(), o_want.data(), o_got.size() * sizeof(float)));
        const bool shared = n_heads >= kAvx512SharedBlockHeads;
        const bool in_lanes = n_heads >= kPortableHeadsInLanes;
        if (quant == KVQuant::kInt8 && qk.cpu == CpuKernels::kPortable) {
          EXPECT_EQ(std::string(qk.variant).rfind(in_lanes ? "heads in lanes" : "groups", 0), 0u);
          EXPECT_EQ(std::string(pv.variant), in_lanes ? "V widened once" : "one head at a time");
        }
        if (qk.cpu == CpuKernels::kAvx512Bf16Vbmi) {
          EXPECT_EQ(std::string(qk.variant), shared ? "rows in lanes" : "groups of 4 heads");
        }
        if (pv.cpu != CpuKernels::kPortable) {
          EXPECT_EQ(std::string(pv.variant), shared ? "V widened once" : "groups of 4 heads");
        }
      }
      // The printed names, as they were before the table.
      const std::string simd = CpuKernelsName(CpuKernels::kPortable);
      const std::string name = AttentionKernelName(m.ref);
      if (quant == KVQuant::kInt8) {
        EXPECT_EQ(name, CpuHasVnniKernels() && avx512 ? "int8 dot (AVX-512 VNNI)"
                                                      : "int8 dot (" + simd + ")");
      } else {
        EXPECT_EQ(name, CpuHasBf16DotKernels() && avx512 ? "bf16 dot (AVX-512 BF16)"
                                                         : "f32 FMA (" + simd + ")");
      }
    }
  }
  SetVnniKernels(true);
  SetBf16DotKernels(true);
}

// Query rounding: every value within half a step, codes in [-127, 127], an all-zero head scores 0
// and a NaN or Inf in a head spreads to its scores instead of being hidden by the rounding.
TEST(QuantizedRows, Int8QueryRoundingBoundsZerosAndNaN) {
  for (bool vnni : {true, false}) {
    SetVnniKernels(vnni);
    const int64_t cols = 128;
    auto q = RandomVec(4 * cols, 31);
    std::fill(q.begin() + cols, q.begin() + 2 * cols, 0.0f);
    q[2 * cols + 5] = std::numeric_limits<float>::quiet_NaN();
    q[3 * cols + 9] = std::numeric_limits<float>::infinity();
    std::vector<int8_t> q8(4 * cols);
    float head_scale[4];
    QuantizeQueryInt8(q.data(), 4, cols, 0.5f, q8.data(), head_scale);
    float qmax = 0;
    for (int64_t c = 0; c < cols; ++c) qmax = std::max(qmax, std::fabs(q[c]));
    EXPECT_EQ(head_scale[0], 0.5f * (qmax / 127.0f));
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_GE(q8[c], -127);
      ASSERT_LE(std::fabs(q8[c] * (qmax / 127.0f) - q[c]), 0.5f * qmax / 127.0f * 1.0001f);
    }
    EXPECT_EQ(head_scale[1], 0.0f);
    EXPECT_TRUE(std::isnan(head_scale[2]));
    EXPECT_TRUE(std::isnan(head_scale[3]));
    const Encoded k = Encode({KVQuant::kInt8, ScaleMode::kTokenHead}, 5, cols, 3);
    std::vector<float> scores(4 * 5);
    AttentionScores(q.data(), 4, k.ref, 0.5f, scores.data());
    for (int p = 0; p < 5; ++p) {
      EXPECT_EQ(scores[5 + p], 0.0f);
      EXPECT_TRUE(std::isnan(scores[10 + p]));
      EXPECT_TRUE(std::isnan(scores[15 + p]));
    }
  }
  SetVnniKernels(true);
}

// Every code of the one-byte formats, read by the kernels from a tensor-scaled row with scale 1
// and summed with weight 1, gives exactly the codec's value (E4M3 and E5M2 through their f16 bit
// patterns or widened to bf16 by table, subnormals included).
TEST(QuantizedRows, EveryCodeDecodesToTheCodecsValue) {
  for (RowFormat rf : {RowFormat::kInt8, RowFormat::kFP8E4M3, RowFormat::kFP8E5M2}) {
    std::vector<uint8_t> codes;
    std::vector<float> want;
    for (int b = 0; b < 256; ++b) {
      float x;
      if (rf == RowFormat::kInt8) {
        if (b == 0x80) continue;  // -128 is never written (symmetric [-127, 127])
        x = static_cast<float>(static_cast<int8_t>(b));
      } else if (rf == RowFormat::kFP8E4M3) {
        x = FP8E4M3ToF32(static_cast<uint8_t>(b));
      } else {
        x = FP8E5M2ToF32(static_cast<uint8_t>(b));
      }
      if (!std::isfinite(x)) continue;  // NaN / Inf codes are never written
      codes.push_back(static_cast<uint8_t>(b));
      want.push_back(x);
    }
    while (codes.size() % 64 != 0) {  // whole 64-value blocks: the widening kernels take them too
      codes.push_back(0);
      want.push_back(0.0f);
    }
    RowsRef row;
    row.format = rf;
    row.rows = 1;
    row.cols = static_cast<int64_t>(codes.size());
    row.row_bytes = row.cols;
    row.data = codes.data();
    row.tensor_scale = 1.0f;
    std::vector<float> o(codes.size(), 0.0f);
    const float one = 1.0f;
    AccumulateWeightedRows(&one, 1, 1, row, o.data());
    for (size_t i = 0; i < codes.size(); ++i)
      ASSERT_EQ(o[i], want[i]) << RowFormatName(rf) << " code 0x" << std::hex << int(codes[i]);
  }
  // BFP8: every magnitude and sign under shared exponents from tiny to large (the bf16 dot
  // kernels read values below 2^-126 as 0), then a row whose 16 blocks have different exponents.
  auto check_bfp8 = [](const std::vector<int>& exps) {
    const int n = static_cast<int>(exps.size());
    std::vector<uint8_t> row(17 * n);  // n blocks of 16 values: exponents, then codes
    std::vector<float> want(16 * n);
    for (int b = 0; b < n; ++b) row[b] = static_cast<uint8_t>(exps[b]);
    for (int i = 0; i < 16 * n; ++i) row[n + i] = static_cast<uint8_t>(i * 37 + i / 256);
    for (int b = 0; b < n; ++b) DecodeBfp8Block(row[b], &row[n + 16 * b], &want[16 * b]);
    RowsRef ref;
    ref.format = RowFormat::kBFP8;
    ref.rows = 1;
    ref.cols = 16 * n;
    ref.row_bytes = static_cast<int64_t>(row.size());
    ref.data = row.data();
    const bool flush = Bf16DotUsable(ref);
    std::vector<float> o(16 * n, 0.0f);
    const float one = 1.0f;
    AccumulateWeightedRows(&one, 1, 1, ref, o.data());
    for (int i = 0; i < 16 * n; ++i) {
      const float x = flush && std::fabs(want[i]) < 0x1p-126f ? 0.0f : want[i];
      ASSERT_EQ(o[i], x) << "bfp8 exponent " << exps[i / 16] << " code " << int(row[n + i]);
    }
  };
  // (255, the exponent of Inf and NaN, is never written: the encoder refuses non-finite rows.)
  for (int e : {0, 1, 6, 7, 8, 100, 127, 133, 200, 254}) check_bfp8(std::vector<int>(16, e));
  check_bfp8({120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135});
  check_bfp8({127, 3, 130, 0, 9, 6, 253, 140, 1, 2, 4, 5, 7, 8, 100, 254});
}

}  // namespace
}  // namespace wc
