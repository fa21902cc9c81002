// Teacher-forced perplexity against the PyTorch reference logits, windowing, and the attention
// error of a KV format (the command: tests/app/perplexity_cli_test.cpp).
#include <cmath>
#include <sstream>

#include <gtest/gtest.h>

#include "serving/perplexity.h"
#include "tests/test_util.h"
#include "util/error.h"
#include "util/npy.h"

namespace wc {
namespace {

std::vector<int> FixtureIds(const std::string& dir) {
  std::istringstream in(test::ReadFile(dir + "/ids.txt"));
  std::vector<int> ids;
  for (int id; in >> id;) ids.push_back(id);
  return ids;
}

TEST(Perplexity, LogProbIsTheLogSoftmax) {
  const float logits[3] = {1.0f, 2.0f, 3.0f};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(LogProb(logits, 3, 2), 3.0 - std::log(z), 1e-12);
  EXPECT_NEAR(LogProb(logits, 3, 0), 1.0 - std::log(z), 1e-12);
}

TEST(Perplexity, MatchesThePyTorchReferenceLogits) {
  const std::string dir = test::FixtureDir("newarch_gqa_bias_bf16");
  const auto ids = FixtureIds(dir);
  const NpyArray ref = ReadNpyF32(dir + "/logits.npy");
  const int vocab = static_cast<int>(ref.shape[1]);
  double nll = 0;
  for (size_t i = 0; i + 1 < ids.size(); ++i)
    nll -= LogProb(&ref.data[i * vocab], vocab, ids[i + 1]);
  ModelOptions exact;  // f32 activations: the reference's exact products
  exact.matmul_precision = ActivationPrecision::kF32;
  auto model = DecoderModel::Load(dir, exact);
  KVCache cache(model->CacheShape(1, 64), KVDType::kF32);
  const PerplexityResult r = TeacherForcedPerplexity(*model, ids, cache);
  EXPECT_EQ(r.tokens, static_cast<int64_t>(ids.size()) - 1);
  EXPECT_NEAR(r.nll, nll, 1e-4 * std::fabs(nll));
}

TEST(Perplexity, LongTextIsScoredInContextWindows) {
  const std::string dir = test::FixtureDir("mq_f32");
  const auto ids = FixtureIds(dir);  // 12 tokens
  auto model = DecoderModel::Load(dir, ModelOptions{});
  KVCache cache(model->CacheShape(1, 5), KVDType::kBF16);
  const PerplexityResult r = TeacherForcedPerplexity(*model, ids, cache);
  EXPECT_EQ(r.tokens, 4 + 4 + 1);  // windows [0,5) [5,10) [10,12): n - 1 each
  EXPECT_GT(r.perplexity(), 1.0);
  EXPECT_THROW(TeacherForcedPerplexity(*model, {ids[0]}, cache), Error);
}

TEST(Perplexity, AttentionErrorAgainstAnF32Cache) {
  const std::string dir = test::FixtureDir("newarch_gqa_bias_bf16");
  const auto ids = FixtureIds(dir);
  auto model = DecoderModel::Load(dir, ModelOptions{});
  KVCache ref(model->CacheShape(1, 8), KVDType::kF32);  // 12 tokens: two windows
  KVCache same(model->CacheShape(1, 8), KVDType::kF32);
  const AttentionError none = MeasureAttentionError(*model, ids, ref, same);
  EXPECT_EQ(none.max_abs, 0.0);
  EXPECT_NEAR(none.cosine, 1.0, 1e-12);
  EXPECT_EQ(none.values, 12 * 8 * 16 * 2);  // tokens x heads x head_dim x layers
  for (KVDType d : {KVDType::kBF16, KVDType::kInt8, KVDType::kFP8E4M3}) {
    KVCache x(model->CacheShape(1, 8), d);
    const AttentionError e = MeasureAttentionError(*model, ids, ref, x);
    EXPECT_GT(e.max_abs, 0.0) << KVDTypeName(d);
    EXPECT_GT(e.cosine, 0.99) << KVDTypeName(d);
    EXPECT_LT(e.cosine, 1.0) << KVDTypeName(d);
  }
}

}  // namespace
}  // namespace wc
