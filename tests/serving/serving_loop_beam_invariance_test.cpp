// Beam requests are batch-invariant (issue 13): a beam request's hypotheses - tokens, text,
// scores to the last bit, reasons - are the same alone and among 20 other requests (beam requests
// of other widths and penalties, sampled ones), for every KV format, paged and contiguous, 8 and 32
// user rows, one and two threads. Each format runs the 21 requests alone (contiguous, one thread)
// and in two batched configurations that between them cover both layouts, both row counts and both
// thread counts; budgets of 16 and 24 tokens make a beam step wait for its turn beside prefill
// chunks.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/sanitized.h"
#include "tests/serving/serving_loop_util.h"
#include "util/rng.h"

namespace wc {
namespace {

using test::BatchConfig;
using test::FormatCase;
using test::Outcome;
using test::RequestSpec;

// {block_size, user_rows, max_batch_tokens, threads}
const FormatCase kBeamCases[] = {
    {KVDType::kBF16, {0, 32, 256, 2}, {64, 8, 16, 1}},
    {KVDType::kF32, {64, 32, 24, 1}, {0, 8, 256, 2}},
    {KVDType::kInt8, {16, 32, 256, 1}, {0, 8, 24, 2}},
    {KVDType::kFP8E4M3, {64, 8, 256, 1}, {16, 32, 16, 2}},
    {KVDType::kFP8E5M2, {0, 32, 24, 1}, {64, 8, 256, 2}},
    {KVDType::kBFP8, {16, 8, 256, 1}, {64, 32, 16, 1}},
};

// 21 requests: the beam request under test (index 7: 4 beams, 3 returned, a chat question), six
// more beam requests (2, 3 and 8 beams; length penalties 0.5 to 2; early stopping on and off; one
// with a stop string) and fourteen sampled ones, prompts of 1 to 120 tokens. A sanitizer build runs
// the first 8.
std::vector<RequestSpec> BeamSpecs() {
  const std::vector<std::string> questions = {"What is a falcon?", "Define harbor.",
                                              "What does it mean to sail?", "What is patience?"};
  Rng rng(1313);
  std::vector<RequestSpec> specs;
  const int n_requests = test::kSanitized ? 8 : 21;  // 8: the one under test and three more beams
  for (int i = 0; i < n_requests; ++i) {
    RequestSpec s;
    if (i % 3 == 1) {
      s.prompt = test::ChatPrompt(questions[i % questions.size()]);
      s.chat = true;
    } else {
      s.prompt = test::TextPrompt(1 + static_cast<int>(rng.Next() % 120),
                                  static_cast<int>(rng.Next() % 300));
    }
    s.max_new_tokens = 6 + static_cast<int>(rng.Next() % 14);
    if (i % 3 == 0 || i == 7) {
      BeamParams b;
      const int widths[] = {2, 3, 8};
      const float penalties[] = {0.5f, 1.0f, 2.0f};
      b.num_beams = i == 7 ? 4 : widths[(i / 3) % 3];
      b.length_penalty = penalties[rng.Next() % 3];
      b.early_stopping = rng.Next() % 2 == 0;
      b.num_return = i == 7 ? 3 : 1 + static_cast<int>(rng.Next() % b.num_beams);
      s.beams = b;
      s.sampling.temperature = 5.0f;  // ignored
      if (i == 12) s.stop = {"e "};
    } else {
      s.sampling.temperature = 0.8f;
      s.sampling.top_k = 40;
      s.seed = rng.Next();
    }
    specs.push_back(s);
  }
  return specs;
}

class BeamInvariance : public ::testing::TestWithParam<FormatCase> {};

TEST_P(BeamInvariance, HypothesesAreBitIdenticalToTheSoloRun) {
  const FormatCase& fc = GetParam();
  const std::vector<RequestSpec> specs = BeamSpecs();
  KVCacheOptions solo_kv;
  solo_kv.dtype = fc.dtype;
  const std::vector<Outcome> solo = test::RunSolo(specs, solo_kv);
  for (size_t i = 0; i < solo.size(); ++i) {
    ASSERT_NE(solo[i].result.reason, StopReason::kError) << solo[i].result.error;
    if (specs[i].beams) {
      EXPECT_EQ(static_cast<int>(solo[i].result.sequences.size()), specs[i].beams->num_return);
    }
  }
  for (const BatchConfig& c : {fc.a, fc.b}) {
    const std::string config = Cat(KVDTypeName(fc.dtype), ", ", test::Describe(c));
    const std::vector<Outcome> batched = test::RunBatched(specs, fc.dtype, c);
    ASSERT_EQ(batched.size(), solo.size());
    for (size_t i = 0; i < solo.size(); ++i)
      test::ExpectSameOutcome(solo[i], batched[i], Cat(config, ", request ", i));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryKVFormat, BeamInvariance, ::testing::ValuesIn(kBeamCases),
                         test::FormatCaseName);

}  // namespace
}  // namespace wc
