// Speculative decoding in the serving loop (issue 34): a decoding row carries prompt-lookup
// proposals, the step verifies them as one causal chunk, and the row keeps what its own sampling
// confirms. The contract: tokens, text, reasons and every logit are bit-identical to decoding
// without speculation - greedy and sampled (Sampler::SampleVerify draws as Sample does) - on every
// KV format, paged and contiguous, for any k and batch mix; rejected positions leave no trace
// (the rows' blocks all return; a session's next turn, which reads the rolled-back KV, is
// identical too).
#include <algorithm>
#include <atomic>

#include <gtest/gtest.h>

#include "tests/serving/serving_loop_util.h"

namespace wc::test {
namespace {

// Prompts where lookup has something to propose: a text that repeats itself (the model's
// continuation often follows it), a plain text, and the default model's own loops under greedy.
std::vector<RequestSpec> Specs(int speculate_k) {
  std::vector<int> repeated = TextPrompt(40, 3);
  const std::vector<int> again(repeated.begin() + 1, repeated.end());
  repeated.insert(repeated.end(), again.begin(), again.end());
  std::vector<RequestSpec> specs;
  int seed = 11;
  for (const std::vector<int>& prompt : {repeated, TextPrompt(24, 100), TextPrompt(9, 400)}) {
    for (bool greedy : {true, false}) {
      RequestSpec s;
      s.prompt = prompt;
      s.sampling = greedy ? Greedy() : SamplingParams{0.8f, 8, 0.95f};
      s.seed = static_cast<uint64_t>(seed++);
      s.max_new_tokens = 40;
      s.stop_at_eos = false;
      s.speculate_k = speculate_k;
      specs.push_back(s);
    }
  }
  return specs;
}

struct Totals {
  int proposed = 0, accepted = 0;
};
Totals Count(const std::vector<Outcome>& outs) {
  Totals t;
  for (const Outcome& o : outs) {
    t.proposed += o.result.spec_proposed;
    t.accepted += o.result.spec_accepted;
  }
  return t;
}

class SpeculationFormats : public ::testing::TestWithParam<KVDType> {};

TEST_P(SpeculationFormats, TokensAndLogitsAreThoseOfDecodingWithoutIt) {
  for (int block_size : {0, 16}) {
    const KVCacheOptions kv = Kv(GetParam(), block_size);
    const std::vector<Outcome> want = RunSolo(Specs(0), kv);
    EXPECT_EQ(Count(want).proposed, 0);
    for (int k : {1, 4, 16}) {
      const std::vector<Outcome> got = RunSolo(Specs(k), kv);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        ExpectSameOutcome(want[i], got[i],
                          Cat(KVDTypeName(GetParam()), block_size ? " paged" : " contiguous",
                              ", k ", k, ", request ", i));
      const Totals t = Count(got);
      // Both paths ran: proposals confirmed and proposals rejected.
      EXPECT_GT(t.accepted, 0) << "k " << k;
      EXPECT_LT(t.accepted, t.proposed) << "k " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryKVFormat, SpeculationFormats,
                         ::testing::Values(KVDType::kF32, KVDType::kBF16, KVDType::kInt8,
                                           KVDType::kFP8E4M3, KVDType::kFP8E5M2, KVDType::kBFP8),
                         KVDTypeParamName);

// In a batch that mixes speculating and plain requests, prefills and decodes, several threads
// and a small token budget: each request's outcome is its solo run without speculation.
TEST(Speculation, AnyBatchMixAndThreadCountGivesTheSameTokens) {
  std::vector<RequestSpec> specs = Specs(6);
  for (size_t i = 0; i < specs.size(); i += 2) specs[i].speculate_k = 0;  // plain rows beside them
  const std::vector<Outcome> want = RunSolo(Specs(0), Kv(KVDType::kBF16, 16));
  for (const BatchConfig& c :
       {BatchConfig{16, 4, 256, 2}, BatchConfig{16, 3, 9, 1}, BatchConfig{0, 6, 256, 2}}) {
    const std::vector<Outcome> got = RunBatched(specs, KVDType::kBF16, c);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ExpectSameOutcome(want[i], got[i], Cat(Describe(c), ", request ", i));
  }
}

// A session's turns read the KV the rolled-back verify chunks left: the second turn (without
// speculation) is identical whether the first speculated or not, and so is the whole session.
TEST(Speculation, ASessionsNextTurnReadsTheRolledBackKvAsIfNoneWereProposed) {
  for (int block_size : {0, 16}) {
    std::vector<std::vector<Outcome>> runs;
    for (int k : {0, 8}) {
      ServingOptions o = Rows(1);
      o.kv = Kv(KVDType::kBF16, block_size);
      std::unique_ptr<ServingLoop> loop = MakeLoop(o);
      const SessionId session = loop->OpenSession();
      std::vector<Outcome> outs;
      for (int turn = 0; turn < 3; ++turn) {
        RequestSpec s = Specs(turn == 1 ? 0 : k)[turn * 2];
        s.session = session;
        s.prompt = TextPrompt(6 + turn, 50 * turn);
        s.prompt.erase(s.prompt.begin());  // a later turn has no BOS
        if (turn == 0) s.prompt.insert(s.prompt.begin(), TextPrompt(1)[0]);
        outs.push_back(RunOne(*loop, s));
      }
      loop->CloseSession(session);
      runs.push_back(std::move(outs));
    }
    for (size_t t = 0; t < runs[0].size(); ++t)
      ExpectSameOutcome(runs[0][t], runs[1][t],
                        Cat(block_size ? "paged" : "contiguous", " turn ", t));
    EXPECT_GT(runs[1][0].result.spec_proposed, 0);
  }
}

// A cancel that lands in the middle of a verify step: the speculating request ends cancelled with
// a prefix of the tokens it has without speculation, and the request beside it, whose pass was
// interrupted and run again, gets exactly its solo tokens and logits.
TEST(Speculation, ACancelMidVerifyLeavesTheOtherRowExact) {
  RequestSpec spec = Specs(8)[0];  // the repeating text, greedy: its proposals are confirmed
  spec.max_new_tokens = 60;
  RequestSpec plain = Specs(0)[3];
  RequestSpec spec_off = spec;
  spec_off.speculate_k = 0;
  const std::vector<Outcome> solo = RunSolo({spec_off, plain}, Kv(KVDType::kBF16, 16));
  ServingOptions o = Rows(2);
  o.kv = Kv(KVDType::kBF16, 16);
  std::unique_ptr<ServingLoop> loop = MakeLoop(o);
  ServingLoop* raw = loop.get();
  std::atomic<int> verify_passes{0};
  // Once both prompts are in, a pass of 3 or more tokens carries a verify chunk (the plain row
  // feeds one token).
  LoadDefaultModel().model->set_attention_observer([&](int layer, const float*, int64_t n_tokens) {
    if (layer == 0 && n_tokens >= 3 && n_tokens <= 1 + 8 + 1 && verify_passes.fetch_add(1) == 4)
      raw->Cancel(1);
  });
  auto a = Submit(*loop, spec);
  auto b = Submit(*loop, plain);
  const Outcome got_a = Await(*a);
  const Outcome got_b = Await(*b);
  loop.reset();
  LoadDefaultModel().model->set_attention_observer(nullptr);
  ASSERT_GE(verify_passes.load(), 5) << "no verify step was interrupted";
  EXPECT_EQ(got_a.result.reason, StopReason::kCancelled);
  ASSERT_LE(got_a.result.tokens.size(), solo[0].result.tokens.size());
  EXPECT_TRUE(std::equal(got_a.result.tokens.begin(), got_a.result.tokens.end(),
                         solo[0].result.tokens.begin()));
  ExpectSameOutcome(solo[1], got_b, "the plain request beside the cancelled one");
}

// Bad values are refused with one line naming the flag.
TEST(Speculation, OutOfRangeSettingsAreRefused) {
  std::unique_ptr<ServingLoop> loop = MakeLoop(Rows(1));
  RequestSpec s = Specs(17)[0];
  Outcome o = RunOne(*loop, s);
  EXPECT_EQ(o.result.reason, StopReason::kError);
  EXPECT_NE(o.result.error.find("--speculate-k must be a whole number in 1-16, got 17"),
            std::string::npos)
      << o.result.error;
  s.speculate_k = 4;
  s.lookup_ngram = 0;
  o = RunOne(*loop, s);
  EXPECT_NE(o.result.error.find("--lookup-ngram must be a whole number in 1-16, got 0"),
            std::string::npos)
      << o.result.error;
}

}  // namespace
}  // namespace wc::test
