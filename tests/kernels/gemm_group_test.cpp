// GemmGroup (kernels/gemm/gemm_group.h) against one Gemm call a part: bit-identical outputs for
// groups of one format (one input packing) and of mixed formats (one packing each), every token
// count a tile shape can take, any split of the group's panels into Run calls, 1 and 2 threads.
#include <omp.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_group.h"
#include "kernels/gemm/packed_matrix.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/rng.h"

namespace wc {
namespace {

struct Matrix {
  std::vector<uint16_t> bf16;  // [rows, cols]
  std::vector<float> bias;     // [rows]
  PackedMatrix p;
};

// A [rows, cols] BF16 matrix (values in [-1, 1)) packed in `format`.
Matrix MakeMatrix(int64_t rows, int64_t cols, WeightFormat format, ActivationPrecision precision,
                  uint64_t seed) {
  Matrix m;
  Rng rng(seed);
  for (int64_t i = 0; i < rows * cols; ++i)
    m.bf16.push_back(F32ToBF16(static_cast<float>(rng.Uniform() * 2.0 - 1.0)));
  for (int64_t r = 0; r < rows; ++r) m.bias.push_back(static_cast<float>(rng.Uniform()));
  m.p = PackedMatrix::Pack(MatrixRef{DType::kBF16, rows, cols, cols, m.bf16.data()}, format,
                           precision, "w" + std::to_string(seed));
  return m;
}

struct Case {
  std::string name;
  std::vector<WeightFormat> formats;  // one matrix each
  std::vector<int64_t> rows;
  ActivationPrecision precision;
};

void ExpectGroupEqualsGemms(const Case& c, int64_t cols, int64_t n, int threads, int64_t run_step) {
  std::vector<Matrix> ms;
  for (size_t i = 0; i < c.formats.size(); ++i)
    ms.push_back(MakeMatrix(c.rows[i], cols, c.formats[i], c.precision, 11 + i));
  const int64_t x_stride = cols + 5;
  const std::vector<float> x = test::RandomX(n, x_stride, 7);
  std::vector<std::vector<float>> want(ms.size()), got(ms.size());
  std::vector<GemmPart> parts;
  omp_set_num_threads(threads);
  for (size_t i = 0; i < ms.size(); ++i) {
    const int64_t rows = ms[i].p.rows();
    want[i].resize(static_cast<size_t>(n * rows));
    got[i].assign(want[i].size(), -1.0f);
    const GemmInput in = PackGemmInput(x.data(), n, x_stride, ms[i].p);
    Gemm(in, ms[i].p, i == 1 ? nullptr : ms[i].bias.data(), want[i].data(), rows, 0, rows);
    parts.push_back({&ms[i].p, i == 1 ? nullptr : ms[i].bias.data(), got[i].data()});
  }
  const GemmGroup group(x.data(), n, x_stride, parts);
  int64_t panels = 0;
  for (const Matrix& m : ms) panels += m.p.panels();
  ASSERT_EQ(group.panels(), panels);
  for (int64_t p0 = 0; p0 < panels; p0 += run_step) group.Run(p0, std::min(panels, p0 + run_step));
  for (size_t i = 0; i < ms.size(); ++i)
    EXPECT_EQ(0, std::memcmp(want[i].data(), got[i].data(), want[i].size() * sizeof(float)))
        << c.name << ": part " << i << ", " << n << " tokens, " << threads << " threads, runs of "
        << run_step << " panels";
  omp_set_num_threads(omp_get_num_procs());
}

const Case kCases[] = {
    {"qkv bf16",
     {WeightFormat::kBF16, WeightFormat::kBF16, WeightFormat::kBF16},
     {96, 40, 40},
     ActivationPrecision::kBF16},
    {"qkv bf16, f32 activations",
     {WeightFormat::kBF16, WeightFormat::kBF16, WeightFormat::kBF16},
     {64, 33, 33},
     ActivationPrecision::kF32},
    {"gate/up f32", {WeightFormat::kF32, WeightFormat::kF32}, {70, 70}, ActivationPrecision::kF32},
    {"gate/up bfp8",
     {WeightFormat::kBfp8, WeightFormat::kBfp8},
     {64, 64},
     ActivationPrecision::kBF16},
    {"mixed formats",
     {WeightFormat::kBF16, WeightFormat::kBfp4, WeightFormat::kF32, WeightFormat::kBF16},
     {32, 64, 40, 7},
     ActivationPrecision::kBF16},
};

TEST(GemmGroup, EachPartEqualsItsOwnGemm) {
  for (const Case& c : kCases)
    for (int64_t n : {1, 2, 5, 6, 13, 33})
      for (int threads : {1, 2})
        for (int64_t step : {1, 3, 1000}) ExpectGroupEqualsGemms(c, 96, n, threads, step);
}

TEST(GemmGroup, ColumnsNotAMultipleOf32) {
  for (const Case& c : kCases) ExpectGroupEqualsGemms(c, 70, 9, 2, 2);
}

TEST(GemmGroup, OneInputServesMatricesOfTheSameKernel) {
  const Matrix a = MakeMatrix(32, 64, WeightFormat::kBF16, ActivationPrecision::kBF16, 1);
  const Matrix b = MakeMatrix(50, 64, WeightFormat::kBF16, ActivationPrecision::kBF16, 2);
  const Matrix f = MakeMatrix(32, 64, WeightFormat::kF32, ActivationPrecision::kF32, 3);
  const Matrix q = MakeMatrix(32, 64, WeightFormat::kBfp8, ActivationPrecision::kBF16, 4);
  const Matrix e = MakeMatrix(32, 64, WeightFormat::kBF16, ActivationPrecision::kF32, 5);
  const Matrix w = MakeMatrix(32, 63, WeightFormat::kBF16, ActivationPrecision::kBF16, 6);
  const std::vector<float> x = test::RandomX(4, 64, 9);
  const GemmInput in = PackGemmInput(x.data(), 4, 64, a.p);
  EXPECT_TRUE(in.Serves(a.p));
  EXPECT_TRUE(in.Serves(b.p));
  EXPECT_FALSE(in.Serves(f.p)) << "another kernel path";
  EXPECT_FALSE(in.Serves(q.p)) << "a bfp matrix's input is its own";
  EXPECT_FALSE(in.Serves(e.p)) << "activations not rounded to bf16";
  EXPECT_FALSE(in.Serves(w.p)) << "the 64th column would read a padding zero";
  EXPECT_FALSE(PackGemmInput(x.data(), 4, 64, q.p).Serves(q.p));
}

}  // namespace
}  // namespace wc
