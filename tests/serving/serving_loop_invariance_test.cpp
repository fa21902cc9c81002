// Batch invariance of the serving loop: a request's tokens and logits are bit-identical whether it
// runs alone or among 31 others (submitted while others run, prompts of 1 to several prefill
// chunks, different max_new_tokens, sampling settings and seeds), for every KV format and layout,
// user_rows, max_batch_tokens and thread count (serving_loop.h's determinism promise, resting on
// kernels/matmul.h's batch-invariant kernels).
//
// The full cross product (6 formats x 3 layouts x 3 user_rows x 3 budgets x 2 thread counts) would
// take far too long. Each format runs its solo reference (user_rows 1, contiguous, budget 256, one
// thread: the queue runs the 32 requests one after another) and the two batched runs of kCases:
//   layouts      contiguous x3, paged 16 x4, paged 64 x5 (of 12 runs)
//   user_rows    32 x6, 4 x4, 1 x2        budgets  256 x6, 7 x5, 1 x1      threads  1 x9, 2 x3
// so every value of every axis appears, most with several formats, and the hard combinations are
// there: budget 1 with 32 rows (one token a step, the decoding rows rotated), budget 7 with paged
// blocks of 16 and of 64 (prompts in many chunks beside decoding rows, chunks crossing blocks), and
// one paged row at budget 7 with 2 threads. Comparing paged runs with the contiguous reference
// also checks that the layout changes nothing. About 45 s in Release on 2 cores.
#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/sanitized.h"
#include "tests/serving/serving_loop_util.h"
#include "util/rng.h"

namespace wc {
namespace {

using test::BatchConfig;
using test::Describe;
using test::FormatCase;
using test::Outcome;
using test::RequestSpec;
using test::RunBatched;

// {block_size, user_rows, max_batch_tokens, threads} of the two batched runs of each format.
const FormatCase kCases[] = {
    {KVDType::kBF16, {0, 32, 256, 2}, {16, 4, 7, 1}},
    {KVDType::kF32, {64, 32, 7, 1}, {0, 4, 256, 2}},
    {KVDType::kInt8, {16, 32, 256, 1}, {64, 1, 256, 1}},
    {KVDType::kFP8E4M3, {64, 4, 256, 1}, {16, 32, 1, 1}},
    {KVDType::kFP8E5M2, {0, 32, 7, 1}, {64, 1, 7, 2}},
    {KVDType::kBFP8, {16, 32, 256, 1}, {64, 4, 7, 1}},
};

// 32 requests (8 in a sanitizer build: still a two-chunk prompt, chats, max_new_tokens 0 and 1,
// a stop string, a request that ignores EOS): every 8th prompt needs two prefill chunks even at a
// budget of 256 (260-330 tokens), the others are 1-80 tokens of text or a framed chat question;
// greedy and sampled, with various top-k/top-p and seeds; 8-24 new tokens (one request 0, one 1);
// some with stop strings.
std::vector<RequestSpec> Specs() {
  const std::vector<std::string> questions = {"What is a falcon?", "Define harbor.",
                                              "What does it mean to sail?", "What is patience?"};
  const float temperatures[] = {0.0f, 0.7f, 1.0f, 1.3f};
  const int top_ks[] = {0, 1, 5, 40};
  const float top_ps[] = {1.0f, 0.9f, 0.5f};
  Rng rng(2026);
  std::vector<RequestSpec> specs;
  const int n_requests = test::kSanitized ? 8 : 32;
  for (int i = 0; i < n_requests; ++i) {
    RequestSpec s;
    if (i % 8 == 0) {
      s.prompt = test::TextPrompt(260 + static_cast<int>(rng.Next() % 71),
                                  static_cast<int>(rng.Next() % 100));
    } else if (i % 3 == 1) {
      s.prompt = test::ChatPrompt(questions[i % questions.size()]);
      s.chat = true;
    } else {
      s.prompt = test::TextPrompt(1 + static_cast<int>(rng.Next() % 80),
                                  static_cast<int>(rng.Next() % 300));
    }
    s.sampling.temperature = temperatures[rng.Next() % 4];
    s.sampling.top_k = top_ks[rng.Next() % 4];
    s.sampling.top_p = top_ps[rng.Next() % 3];
    s.seed = rng.Next();
    s.max_new_tokens = i == 5 ? 0 : i == 6 ? 1 : 8 + static_cast<int>(rng.Next() % 17);
    if (i % 5 == 2) s.stop = {"e "};
    if (i % 7 == 3) s.stop_at_eos = false;
    specs.push_back(s);
  }
  return specs;
}

class BatchInvariance : public ::testing::TestWithParam<FormatCase> {};

TEST_P(BatchInvariance, TokensAndLogitsAreBitIdenticalToTheSoloRun) {
  const FormatCase& fc = GetParam();
  const std::vector<RequestSpec> specs = Specs();
  KVCacheOptions solo_kv;
  solo_kv.dtype = fc.dtype;
  const std::vector<Outcome> solo = test::RunSolo(specs, solo_kv);
  // The specs cover what they claim: multi-chunk prompts, EOS, stop strings and max tokens.
  int eos = 0, length = 0, stop = 0;
  for (const Outcome& o : solo) {
    ASSERT_NE(o.result.reason, StopReason::kError) << o.result.error;
    eos += o.result.reason == StopReason::kEos;
    length += o.result.reason == StopReason::kMaxTokens;
    stop += o.result.reason == StopReason::kStopString;
  }
  EXPECT_GT(length, 0);
  EXPECT_GT(eos + stop, 0);
  for (const BatchConfig& c : {fc.a, fc.b}) {
    const std::string config = Cat(KVDTypeName(fc.dtype), ", ", Describe(c));
    const std::vector<Outcome> batched = RunBatched(specs, fc.dtype, c);
    ASSERT_EQ(batched.size(), solo.size());
    for (size_t i = 0; i < solo.size(); ++i)
      test::ExpectSameOutcome(solo[i], batched[i], Cat(config, ", request ", i));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryKVFormat, BatchInvariance, ::testing::ValuesIn(kCases),
                         test::FormatCaseName);

}  // namespace
}  // namespace wc
