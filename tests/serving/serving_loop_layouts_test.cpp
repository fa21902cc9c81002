// The determinism contract on every architecture's layouts (the Falcon default model's tests are
// the serving loop's own files): on a Falcon fixture, the Llama (Falcon3) fixtures and a
// Falcon-RW (ALiBi) one, each
// request's tokens and logits are the same bits alone in a loop of one row as batched with others
// (chunked prefill, several rows, two threads), with and without the prefix cache, contiguous and
// paged, and (greedy) with and without prompt-lookup speculation.
#include <gtest/gtest.h>

#include "tests/serving/serving_loop_util.h"
#include "tests/test_util.h"
#include "util/rng.h"

namespace wc::test {
namespace {

class LayoutsTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { model_ = DecoderModel::Load(FixtureDir(GetParam()), ModelOptions{}); }

  // Six requests over the fixture's vocabulary: three share a 17-token prefix (the prefix cache's
  // blocks of 8), greedy and seeded sampling, one with repeated text for the lookup to find.
  std::vector<RequestSpec> Specs(int speculate_k) const {
    const int vocab = model_->config().vocab_size;
    Rng rng(17);
    auto ids = [&](int n) {
      std::vector<int> v;
      for (int i = 0; i < n; ++i) v.push_back(static_cast<int>(rng.Uniform() * vocab) % vocab);
      return v;
    };
    const std::vector<int> shared = ids(17);
    std::vector<RequestSpec> specs;
    for (int r = 0; r < 6; ++r) {
      RequestSpec s;
      s.prompt = r < 3 ? shared : ids(9 + r);
      const std::vector<int> tail = ids(2 + r);
      s.prompt.insert(s.prompt.end(), tail.begin(), tail.end());
      if (r == 5)  // a repeated run the lookup proposes from
        s.prompt.insert(s.prompt.end(), s.prompt.begin(), s.prompt.begin() + 8);
      s.sampling = Greedy();
      if (r % 2 == 1 && speculate_k == 0) {
        s.sampling.temperature = 0.9f;
        s.seed = 100 + r;
      }
      s.max_new_tokens = 12;
      s.stop_at_eos = false;
      s.speculate_k = speculate_k;
      specs.push_back(s);
    }
    return specs;
  }

  std::vector<Outcome> Run(const std::vector<RequestSpec>& specs, const ServingOptions& o,
                           bool all_at_once) const {
    ServingLoop loop(*model_, nullptr, std::nullopt, o);
    std::vector<Outcome> out;
    std::vector<std::shared_ptr<WaitingObserver>> waiting;
    for (const RequestSpec& s : specs) {
      waiting.push_back(Submit(loop, s));
      if (!all_at_once) out.push_back(Await(*waiting.back()));
    }
    if (all_at_once)
      for (auto& w : waiting) out.push_back(Await(*w));
    return out;
  }

  static ServingOptions Options(int rows, int budget, int threads, int block_size, bool prefix) {
    ServingOptions o;
    o.user_rows = rows;
    o.max_batch_tokens = budget;
    o.threads = threads;
    o.ctx = 64;
    o.kv = Kv(KVDType::kBF16, block_size);
    o.prefix_cache = prefix && block_size > 0;
    o.check_block_counts = true;
    return o;
  }

  std::unique_ptr<DecoderModel> model_;
};

TEST_P(LayoutsTest, BatchMixThreadsAndPrefixCacheChangeNoBit) {
  const std::vector<RequestSpec> specs = Specs(0);
  const std::vector<Outcome> solo = Run(specs, Options(1, 256, 1, 0, false), false);
  struct Case {
    const char* label;
    ServingOptions o;
  };
  const Case cases[] = {
      {"6 rows, budget 7, 2 threads, paged 8, prefix cache", Options(6, 7, 2, 8, true)},
      {"3 rows, budget 5, 1 thread, contiguous", Options(3, 5, 1, 0, false)},
      {"6 rows, budget 64, 2 threads, paged 16, no prefix cache", Options(6, 64, 2, 16, false)},
  };
  for (const Case& c : cases) {
    const std::vector<Outcome> got = Run(specs, c.o, true);
    ASSERT_EQ(got.size(), solo.size());
    for (size_t i = 0; i < got.size(); ++i)
      ExpectSameOutcome(solo[i], got[i], Cat(GetParam(), ", ", c.label, ", request ", i));
  }
  // The prefix cache's second pass over the same requests (its blocks now warm) changes nothing.
  ServingLoop loop(*model_, nullptr, std::nullopt, Options(2, 7, 2, 8, true));
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < specs.size(); ++i) {
      auto w = Submit(loop, specs[i]);
      ExpectSameOutcome(solo[i], Await(*w), Cat(GetParam(), ", warm pass ", pass, ", ", i));
    }
  EXPECT_GT(loop.status().prefix_hits, 0) << "the shared prefix was never reused";
}

TEST_P(LayoutsTest, GreedySpeculationChangesNoToken) {
  const std::vector<Outcome> plain = Run(Specs(0), Options(6, 16, 2, 8, true), true);
  const std::vector<Outcome> spec = Run(Specs(4), Options(6, 16, 2, 8, true), true);
  ASSERT_EQ(plain.size(), spec.size());
  for (size_t i = 0; i < plain.size(); i += 2)  // the greedy ones
    EXPECT_EQ(plain[i].result.tokens, spec[i].result.tokens) << GetParam() << " request " << i;
}

INSTANTIATE_TEST_SUITE_P(Architectures, LayoutsTest,
                         ::testing::Values("newarch_gqa_f32", "llama_gqa4_f32",
                                           "llama_gqa2_tied_bias_bf16", "llama_mqa_linear_f16",
                                           "rw_alibi6_bf16"));

}  // namespace
}  // namespace wc::test
