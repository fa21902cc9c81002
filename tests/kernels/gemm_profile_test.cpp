// GemmProfile (kernels/gemm/gemm_profile.h): calls are kept by matrix role and kernel with their
// tokens, FLOPs and time; nothing is kept while no profile records; one profile at a time.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/gemm/format_table.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_profile.h"
#include "kernels/gemm/packed_matrix.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/error.h"

namespace wc {
namespace {

PackedMatrix Bf16Matrix(int64_t rows, int64_t cols, std::vector<uint16_t>* bf16) {
  for (int64_t i = 0; i < rows * cols; ++i)
    bf16->push_back(F32ToBF16(static_cast<float>(i % 7) * 0.25f - 0.75f));
  return PackedMatrix::Pack(MatrixRef{DType::kBF16, rows, cols, cols, bf16->data()},
                            WeightFormat::kBF16, ActivationPrecision::kBF16, "w");
}

// One timed Gemm call of n tokens, as the model makes them.
void TimedGemm(const std::string& role, const PackedMatrix& w, int64_t n) {
  const std::vector<float> x = test::RandomX(n, w.cols(), 3);
  std::vector<float> y(static_cast<size_t>(n * w.rows()));
  const GemmCallTimer timer(role, w, n, 2.0 * n * w.rows() * w.cols());
  Gemm(x.data(), n, w, nullptr, y.data());
}

std::string KernelOf(const PackedMatrix& w, int64_t n) {
  return GemmKernelLabel(ChooseGemmKernel(w.format(), w.precision(), n).kernel);
}

TEST(GemmProfileTest, KeepsEachRoleAndKernelWithItsWork) {
  std::vector<uint16_t> a_bf16, b_bf16;
  const PackedMatrix a = Bf16Matrix(64, 96, &a_bf16), b = Bf16Matrix(32, 96, &b_bf16);
  TimedGemm("before", a, 4);  // no profile: not kept
  const GemmProfile profile;
  EXPECT_TRUE(GemmProfile::Recording());
  TimedGemm("a", a, 40);
  TimedGemm("b", b, 40);
  TimedGemm("a", a, 40);
  TimedGemm("a", a, 1);  // one token: a kernel of its own, if the table gives it one
  const std::vector<GemmProfileEntry> e = profile.Entries();
  const bool one_token_apart = KernelOf(a, 1) != KernelOf(a, 40);
  ASSERT_EQ(e.size(), one_token_apart ? 3u : 2u);
  EXPECT_EQ(e[0].matrix, "a");
  EXPECT_EQ(e[0].kernel, KernelOf(a, 40));
  EXPECT_EQ(e[0].calls, one_token_apart ? 2 : 3);
  EXPECT_EQ(e[0].tokens, one_token_apart ? 80 : 81);
  EXPECT_DOUBLE_EQ(e[0].flops, 2.0 * e[0].tokens * 64 * 96);
  EXPECT_GT(e[0].seconds, 0);
  EXPECT_EQ(e[1].matrix, "b");
  EXPECT_EQ(e[1].calls, 1);
  EXPECT_DOUBLE_EQ(e[1].flops, 2.0 * 40 * 32 * 96);
  EXPECT_EQ(e[1].peak, KernelInfo(ChooseGemmKernel(b.format(), b.precision(), 40).kernel).peak);
  if (one_token_apart) {
    EXPECT_EQ(e[2].matrix, "a");
    EXPECT_EQ(e[2].tokens, 1);
  }
  profile.Entries();  // reading does not clear
  EXPECT_EQ(profile.Entries().size(), e.size());
}

TEST(GemmProfileTest, ClearsAndStops) {
  std::vector<uint16_t> bf16;
  const PackedMatrix a = Bf16Matrix(32, 64, &bf16);
  {
    GemmProfile profile;
    TimedGemm("a", a, 8);
    profile.Clear();
    EXPECT_TRUE(profile.Entries().empty());
    TimedGemm("a", a, 8);
    EXPECT_EQ(profile.Entries().size(), 1u);
    EXPECT_THROW(GemmProfile(), Error);  // one at a time
    EXPECT_TRUE(GemmProfile::Recording());
  }
  EXPECT_FALSE(GemmProfile::Recording());
  const GemmProfile again;  // a new one starts empty
  EXPECT_TRUE(again.Entries().empty());
}

}  // namespace
}  // namespace wc
