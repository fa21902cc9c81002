// The scripted proposer (`bench model --speculate oracle`): proposals from a known continuation,
// a chosen share made wrong. With the model's own greedy continuation as the script, accept 1
// keeps every proposal, accept 0 none, and either way the tokens are those of decoding without
// speculation.
#include <gtest/gtest.h>

#include "serving/scripted_proposer.h"
#include "tests/serving/serving_loop_util.h"

namespace wc::test {
namespace {

TEST(ScriptedProposer, FollowsTheScriptAndStopsProposingOffIt) {
  ScriptedProposerSource source({6, 7, 8, 9, 10}, 1.0, 100);
  std::unique_ptr<Proposer> p = source.Make(0);
  p->Reset({1, 2, 3});  // the prompt: the script continues whatever the row was reset with
  p->Append(6);
  EXPECT_EQ(p->Propose(3), (std::vector<int>{7, 8, 9}));
  EXPECT_EQ(p->Propose(10), (std::vector<int>{7, 8, 9, 10}));  // the script ends
  p->Append(7);
  EXPECT_EQ(p->Propose(2), (std::vector<int>{8, 9}));
  p->Append(42);  // the row left the script
  EXPECT_TRUE(p->Propose(2).empty());
  p->Reset({5});
  EXPECT_EQ(p->Propose(1), (std::vector<int>{6}));
  p->Append(7);  // off the script at once
  EXPECT_TRUE(p->Propose(1).empty());
  EXPECT_TRUE(p->Propose(0).empty());
}

TEST(ScriptedProposer, MakesTheAskedShareWrongAtFixedPositions) {
  std::vector<int> script(20000);
  for (size_t i = 0; i < script.size(); ++i) script[i] = static_cast<int>(i % 50);
  for (double accept : {0.0, 0.3, 0.5, 0.9, 1.0}) {
    ScriptedProposerSource a(script, accept, 50, 7), b(script, accept, 50, 7),
        c(script, accept, 50, 8);
    int right = 0, same_as_other_seed = 0;
    for (size_t pos = 0; pos < script.size(); ++pos) {
      const int t = a.ProposalAt(pos);
      EXPECT_EQ(t, b.ProposalAt(pos));
      if (t == script[pos]) {
        ++right;
      } else {
        EXPECT_EQ(t, (script[pos] + 1) % 50);
      }
      same_as_other_seed += t == c.ProposalAt(pos);
    }
    const double share = static_cast<double>(right) / script.size();
    EXPECT_NEAR(share, accept, 0.015) << "accept " << accept;
    if (accept > 0.0 && accept < 1.0) {
      EXPECT_LT(same_as_other_seed, static_cast<int>(script.size()));
    }
  }
  EXPECT_THROW(ScriptedProposerSource(script, 1.5, 50), Error);
  EXPECT_THROW(ScriptedProposerSource(script, -0.1, 50), Error);
}

TEST(ScriptedProposer, TheModelsOwnContinuationIsAcceptedAsScriptedAndChangesNoToken) {
  KVCacheOptions kv;
  kv.block_size = 16;
  RequestSpec spec;
  spec.prompt = TextPrompt(20, 40);
  spec.sampling = Greedy();
  spec.max_new_tokens = 40;
  spec.stop_at_eos = false;
  const Outcome want = RunSolo({spec}, kv)[0];
  const std::vector<int>& script = want.result.tokens;
  const int vocab = LoadDefaultModel().config().vocab_size;
  for (double accept : {1.0, 0.6, 0.0}) {
    for (int k : {1, 4, 8}) {
      RequestSpec s = spec;
      s.speculate_k = k;
      s.proposer_source = std::make_shared<ScriptedProposerSource>(script, accept, vocab);
      const Outcome got = RunSolo({s}, kv)[0];
      const std::string label = Cat("accept ", accept, ", k ", k);
      ExpectSameOutcome(want, got, label);
      EXPECT_GT(got.result.spec_proposed, 0) << label;
      if (accept == 1.0) {
        EXPECT_EQ(got.result.spec_accepted, got.result.spec_proposed) << label;
      }
      if (accept == 0.0) {
        EXPECT_EQ(got.result.spec_accepted, 0) << label;
      }
      if (accept == 0.6) {
        EXPECT_GT(got.result.spec_accepted, 0) << label;
        if (k > 1) {
          EXPECT_LT(got.result.spec_accepted, got.result.spec_proposed) << label;
        }
      }
    }
  }
}

}  // namespace
}  // namespace wc::test
