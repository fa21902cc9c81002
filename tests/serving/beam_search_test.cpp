// Beam search bookkeeping (serving/beam_search.h) on hand-made logits: candidates, ranks, finished
// hypotheses and their length penalty, the stopping test, ties, and parameter errors.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "serving/beam_search.h"
#include "util/error.h"
#include "util/rng.h"

namespace wc {
namespace {

// Logits whose log-softmax is log(p): [beams][vocab] flattened.
std::vector<float> LogProbs(const std::vector<std::vector<double>>& p) {
  std::vector<float> out;
  for (const auto& row : p)
    for (double x : row) out.push_back(static_cast<float>(std::log(x)));
  return out;
}

BeamParams Beams(int w, float length_penalty = 1.0f, bool early = false, int num_return = 1) {
  BeamParams b;
  b.num_beams = w;
  b.length_penalty = length_penalty;
  b.early_stopping = early;
  b.num_return = num_return;
  return b;
}

const auto kNeverEnds = [](int, int) { return false; };

TEST(BeamSearch, OneBeamIsGreedy) {
  BeamSearch search(Beams(1));
  Rng rng(5);
  std::vector<int> greedy;
  for (int step = 0; step < 12; ++step) {
    std::vector<float> logits(50);
    for (auto& x : logits) x = static_cast<float>(rng.Uniform() * 8 - 4);
    int best = 0;
    for (int t = 1; t < 50; ++t)
      if (logits[t] > logits[best]) best = t;
    greedy.push_back(best);
    const BeamSearch::Step s = search.Advance(logits.data(), 50, kNeverEnds);
    ASSERT_EQ(s.tokens, std::vector<int>{best});
    ASSERT_EQ(s.parents, std::vector<int>{0});
    ASSERT_FALSE(search.done());
  }
  search.Finalize();
  const auto best = search.Best();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].tokens, greedy);
  EXPECT_FALSE(best[0].ended);
}

TEST(BeamSearch, CandidatesAreRankedAndEndingOnesBelowWFinish) {
  // W = 2, vocab 4, token 3 ends a hypothesis.
  BeamSearch search(Beams(2, /*length_penalty=*/2.0f));
  const auto ends = [](int, int token) { return token == 3; };
  // Step 1: one live beam. Ranks: t1 (0.4), t3 (0.3, ends: rank 1 < 2, finished), t0 (0.2), t2.
  std::vector<float> l1 = LogProbs({{0.2, 0.4, 0.1, 0.3}});
  BeamSearch::Step s = search.Advance(l1.data(), 4, ends);
  EXPECT_EQ(s.parents, (std::vector<int>{0, 0}));
  EXPECT_EQ(s.tokens, (std::vector<int>{1, 0}));
  EXPECT_NEAR(search.live_score(0), std::log(0.4), 1e-6);
  EXPECT_NEAR(search.live_score(1), std::log(0.2), 1e-6);
  EXPECT_FALSE(search.done());  // one finished of two
  // Step 2: beam 0 = [1] (0.4), beam 1 = [0] (0.2). Candidates, best first: b0t2 .36 (live),
  // b1t3 .14 (rank 1, ends: finished), b1t1 .06 (live), b0t3 .04.
  std::vector<float> l2 = LogProbs({{1e-9, 1e-9, 0.9, 0.1 - 2e-9}, {1e-9, 0.3, 1e-9, 0.7 - 2e-9}});
  s = search.Advance(l2.data(), 4, ends);
  EXPECT_EQ(s.parents, (std::vector<int>{0, 1}));
  EXPECT_EQ(s.tokens, (std::vector<int>{2, 1}));
  // Finished: [3] log(.3)/1^2 = -1.20 and [0, 3] log(.14)/2^2 = -0.49; the live best [1, 2] has
  // log(.36)/2^2 = -0.26, better than the worst finished: the search goes on.
  EXPECT_FALSE(search.done());
  search.Finalize();
  const auto top = search.Best();
  ASSERT_EQ(top.size(), 1u);
  // Kept: the W = 2 best of [3] -1.20, [0, 3] -0.49, then [1, 2] -0.26 and [0, 1] -0.70.
  EXPECT_EQ(top[0].tokens, (std::vector<int>{1, 2}));
  EXPECT_NEAR(top[0].score, std::log(0.36) / 4, 1e-6);
  EXPECT_FALSE(top[0].ended);
}

TEST(BeamSearch, NumReturnGivesTheBestFirstWithTheirEndings) {
  BeamSearch search(Beams(2, 1.0f, false, 2));
  const auto ends = [](int, int token) { return token == 0; };
  std::vector<float> l1 = LogProbs({{0.5, 0.3, 0.2}});  // t0 ends at rank 0: finished
  search.Advance(l1.data(), 3, ends);
  std::vector<float> l2 = LogProbs({{0.6, 0.2, 0.2}, {0.6, 0.2, 0.2}});
  // b0t0 (.18) finishes at rank 0; b1t0 (.12, rank 1) would finish but is worse than the two
  // kept: [0] log .5 = -0.69 and [1, 0] log(.18)/2 = -0.86. The live best [1, 1] scores
  // log(.06)/2 = -1.41 <= the worst finished: done.
  search.Advance(l2.data(), 3, ends);
  EXPECT_TRUE(search.done());
  const auto best = search.Best();
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].tokens, (std::vector<int>{0}));
  EXPECT_EQ(best[1].tokens, (std::vector<int>{1, 0}));
  EXPECT_TRUE(best[0].ended && best[1].ended);
  EXPECT_NEAR(best[1].score, std::log(0.18) / 2, 1e-6);
}

TEST(BeamSearch, EarlyStoppingEndsOnceWAreFinished) {
  for (bool early : {false, true}) {
    BeamSearch search(Beams(2, 1.0f, early));
    const auto ends = [](int, int token) { return token == 0; };
    // Step 1: t0 (0.4) finishes at rank 0; t1, t2 live.
    std::vector<float> l1 = LogProbs({{0.4, 0.35, 0.25}});
    search.Advance(l1.data(), 3, ends);
    std::vector<float> l2 = LogProbs({{0.3, 0.69, 0.01}, {0.01, 0.01, 0.98}});
    search.Advance(l2.data(), 3, ends);
    // Candidates: b0t1 .2415, b1t2 .245 -> ranks: b1t2 (.245), b0t1 (.2415), b0t0 (.105, rank 2:
    // skipped). Finished stays 1: neither mode is done.
    EXPECT_FALSE(search.done());
    std::vector<float> l3 = LogProbs({{0.9, 0.05, 0.05}, {0.9, 0.05, 0.05}});
    search.Advance(l3.data(), 3, ends);
    // Ranks 0 and 1 end: [2, 2, 0] log(.2205)/3 = -0.50 and [1, 1, 0] -0.51 replace [0] -0.92; the
    // live best [2, 2, 1] log(.01225)/3 = -1.47 <= -0.51: done either way.
    EXPECT_TRUE(search.done()) << "early " << early;
  }
  // Early stopping ends even when a live beam could still win.
  for (bool early : {false, true}) {
    BeamSearch search(Beams(1, 1.0f, early));
    const auto ends = [](int, int token) { return token == 0; };
    std::vector<float> l1 = LogProbs({{0.5, 0.5}});  // tie: lower token first: t0 finishes
    const BeamSearch::Step s = search.Advance(l1.data(), 2, ends);
    EXPECT_EQ(s.tokens, (std::vector<int>{1})) << "rank 1 is live though rank 0 ended";
    // Finished [0]: log .5 = -0.69; live [1]: log .5 / 1 = -0.69 <= -0.69: done without early too.
    EXPECT_TRUE(search.done());
  }
  {
    BeamSearch late(Beams(1, 1.0f, false)), early(Beams(1, 1.0f, true));
    const auto ends = [](int, int token) { return token == 0; };
    std::vector<float> l1 = LogProbs({{0.4, 0.6}});  // t1 live (rank 0), t0 ends at rank 1 >= W
    late.Advance(l1.data(), 2, ends);
    early.Advance(l1.data(), 2, ends);
    EXPECT_FALSE(late.done());
    EXPECT_FALSE(early.done());
    std::vector<float> l2 = LogProbs({{0.9, 0.1}});  // t0 ends at rank 0: finished (.54)
    late.Advance(l2.data(), 2, ends);
    early.Advance(l2.data(), 2, ends);
    EXPECT_TRUE(early.done());
    // Live [1,1]: log(.06)/2 = -1.41 <= finished log(.54)/2 = -0.31: done as well.
    EXPECT_TRUE(late.done());
  }
}

TEST(BeamSearch, AnEndingCandidateRankedWOrLowerIsSkipped) {
  BeamSearch search(Beams(2, 1.0f, /*early=*/true, 2));
  const auto ends = [](int, int token) { return token == 1 || token == 2; };
  // Ranks: t0 live, t1 ends (rank 1: finished), t2 ends (rank 2: skipped), t3 live.
  std::vector<float> l1 = LogProbs({{0.3, 0.25, 0.2, 0.15, 0.1}});
  const BeamSearch::Step s = search.Advance(l1.data(), 5, ends);
  EXPECT_EQ(s.tokens, (std::vector<int>{0, 3}));
  EXPECT_FALSE(search.done()) << "only one hypothesis is finished";
  search.Finalize();
  const auto best = search.Best();
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].tokens, (std::vector<int>{0}));
  EXPECT_EQ(best[1].tokens, (std::vector<int>{1}));
}

TEST(BeamSearch, TiesGoToTheLowerBeamThenTheLowerToken) {
  BeamSearch search(Beams(3));
  std::vector<float> l1(6, 0.0f);  // all equal: tokens 0, 1, 2 live
  BeamSearch::Step s = search.Advance(l1.data(), 6, kNeverEnds);
  EXPECT_EQ(s.tokens, (std::vector<int>{0, 1, 2}));
  std::vector<float> l2(18, 0.0f);  // all equal again: beam 0's tokens 0, 1, 2
  s = search.Advance(l2.data(), 6, kNeverEnds);
  EXPECT_EQ(s.parents, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(s.tokens, (std::vector<int>{0, 1, 2}));
}

TEST(BeamSearch, BadParametersNameTheFlag) {
  auto message = [](BeamParams p) {
    try {
      p.Validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(Beams(0)).find("--beams"), std::string::npos);
  EXPECT_NE(message(Beams(17)).find("--beams"), std::string::npos);
  EXPECT_NE(message(Beams(2, -1.0f)).find("--length-penalty"), std::string::npos);
  EXPECT_NE(message(Beams(2, NAN)).find("--length-penalty"), std::string::npos);
  EXPECT_NE(message(Beams(2, 1.0f, false, 3)).find("--num-return"), std::string::npos);
  EXPECT_EQ(message(Beams(16, 0.0f, true, 16)), "");
}

}  // namespace
}  // namespace wc
