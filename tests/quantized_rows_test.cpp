// The attention kernels read quantized K/V rows in place (kernels/kv_rows.h) exactly as the
// kvcache codec writes them (kvcache/kv_formats.h): every code of every format decodes to the
// codec's value, and scores / weighted sums over encoded rows match naive loops over DecodeRow's
// values, for every head and row count around the SIMD groupings and head_dims with scalar tails.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/decode_attention.h"
#include "kvcache/kv_formats.h"
#include "serving/rng.h"

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

std::vector<float> RandomVec(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.Uniform() * 2.0 - 1.0);
  return v;
}

class QuantizedRows : public ::testing::TestWithParam<Format> {};

TEST_P(QuantizedRows, ScoresMatchNaiveDotsOverDecodedRows) {
  const Format f = GetParam();
  for (int64_t cols : {64, 128, 72}) {
    if (f.quant == KVQuant::kBFP8 && cols % 16 != 0) continue;
    for (int n_heads : {1, 3, 4, 5, 8}) {
      for (int64_t rows : {1, 3, 4, 5, 17, 64}) {
        const Encoded k = Encode(f, rows, cols, 100 + rows + cols);
        const auto q = RandomVec(static_cast<size_t>(n_heads * cols), 7 + n_heads);
        std::vector<float> scores(static_cast<size_t>(n_heads * rows));
        AttentionScores(q.data(), n_heads, k.ref, 0.125f, scores.data());
        for (int h = 0; h < n_heads; ++h)
          for (int64_t p = 0; p < rows; ++p) {
            double want = 0, mag = 0;
            for (int64_t c = 0; c < cols; ++c) {
              want += static_cast<double>(q[h * cols + c]) * k.decoded[p * cols + c];
              mag += std::fabs(static_cast<double>(q[h * cols + c]) * k.decoded[p * cols + c]);
            }
            EXPECT_NEAR(scores[h * rows + p], 0.125 * want, 1e-5 * 0.125 * mag + 1e-30)
                << "cols " << cols << " heads " << n_heads << " rows " << rows << " h " << h
                << " p " << p;
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

TEST_P(QuantizedRows, WeightedRowsMatchNaiveSumsOverDecodedRows) {
  const Format f = GetParam();
  for (int64_t cols : {64, 128, 72}) {
    if (f.quant == KVQuant::kBFP8 && cols % 16 != 0) continue;
    for (int n_heads : {1, 3, 4, 5}) {
      for (int64_t rows : {1, 5, 33}) {
        const Encoded v = Encode(f, rows, cols, 300 + rows + cols);
        const auto w = RandomVec(static_cast<size_t>(n_heads * (rows + 3)), 11);
        auto o = RandomVec(static_cast<size_t>(n_heads * cols), 12);
        std::vector<double> want(o.begin(), o.end());
        std::vector<double> mag(o.size());
        for (int h = 0; h < n_heads; ++h)
          for (int64_t p = 0; p < rows; ++p)
            for (int64_t c = 0; c < cols; ++c) {
              const double t = static_cast<double>(w[h * (rows + 3) + p]) * v.decoded[p * cols + c];
              want[h * cols + c] += t;
              mag[h * cols + c] += std::fabs(t);
            }
        AccumulateWeightedRows(w.data(), rows + 3, n_heads, v.ref, o.data());
        for (size_t i = 0; i < o.size(); ++i)
          EXPECT_NEAR(o[i], want[i], 1e-5 * (mag[i] + 1)) << "cols " << cols << " i " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedRows,
                         ::testing::Values(Format{KVQuant::kInt8, ScaleMode::kTokenHead},
                                           Format{KVQuant::kInt8, ScaleMode::kTensor},
                                           Format{KVQuant::kFP8E4M3, ScaleMode::kTokenHead},
                                           Format{KVQuant::kFP8E4M3, ScaleMode::kTensor},
                                           Format{KVQuant::kFP8E5M2, ScaleMode::kTokenHead},
                                           Format{KVQuant::kFP8E5M2, ScaleMode::kTensor},
                                           Format{KVQuant::kBFP8, ScaleMode::kTokenHead}));

// Every code of the one-byte formats, read by the kernels from a tensor-scaled row with scale 1
// and summed with weight 1, gives exactly the codec's value (E4M3 and E5M2 through their f16 bit
// patterns, subnormals included).
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
  // BFP8: every magnitude and sign under shared exponents from tiny to large.
  for (int e : {1, 6, 7, 100, 127, 133, 200}) {
    std::vector<uint8_t> row(16 * 16 + 16);  // 16 blocks of 16 values: exponents, then codes
    std::vector<float> want(256);
    for (int b = 0; b < 16; ++b) row[b] = static_cast<uint8_t>(e);
    for (int i = 0; i < 256; ++i) {
      row[16 + i] = static_cast<uint8_t>(i);
      DecodeBfp8Block(static_cast<uint8_t>(e), &row[16 + 16 * (i / 16)], &want[16 * (i / 16)]);
    }
    RowsRef ref;
    ref.format = RowFormat::kBFP8;
    ref.rows = 1;
    ref.cols = 256;
    ref.row_bytes = static_cast<int64_t>(row.size());
    ref.data = row.data();
    std::vector<float> o(256, 0.0f);
    const float one = 1.0f;
    AccumulateWeightedRows(&one, 1, 1, ref, o.data());
    for (int i = 0; i < 256; ++i) ASSERT_EQ(o[i], want[i]) << "bfp8 exponent " << e << " i " << i;
  }
}

}  // namespace
}  // namespace wc
