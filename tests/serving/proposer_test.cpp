// Speculative decoding's proposers: prompt lookup (which n-gram, which occurrence, how many tokens)
// by scan and by index, and AdaptiveK over scripted verify steps.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "serving/proposer.h"
#include "util/error.h"
#include "util/rng.h"

namespace wc {
namespace {

using Tokens = std::vector<int>;

// Both implementations on one history: the indexed proposer built by Append must agree with the
// scan; the result is the scan's.
Tokens Lookup(const Tokens& history, int max_ngram, int k) {
  PromptLookupProposer proposer(max_ngram);
  for (const int t : history) proposer.Append(t);
  const Tokens scanned = PromptLookupScan(history, max_ngram, k);
  EXPECT_EQ(proposer.Propose(k), scanned) << "index and scan disagree";
  return scanned;
}

TEST(PromptLookup, LongestNgramWinsOverAShorterMoreRecentOne) {
  // Ends in "1 2 3". "1 2 3" occurred at 0-2 (followed by 10 11); "2 3" alone occurred later at
  // 6-7 (followed by 20 21): the trigram's older match wins.
  const Tokens h = {1, 2, 3, 10, 11, 9, 2, 3, 20, 21, 1, 2, 3};
  EXPECT_EQ(Lookup(h, 3, 2), (Tokens{10, 11}));
  // Matching at most bigrams, the most recent "2 3" wins instead.
  EXPECT_EQ(Lookup(h, 2, 2), (Tokens{20, 21}));
}

TEST(PromptLookup, MostRecentOccurrenceOfTheNgram) {
  // "5 6" occurs at 0-1 (then 7) and at 4-5 (then 8): the later one.
  const Tokens h = {5, 6, 7, 1, 5, 6, 8, 2, 5, 6};
  EXPECT_EQ(Lookup(h, 3, 1), (Tokens{8}));
  EXPECT_EQ(Lookup(h, 3, 3), (Tokens{8, 2, 5}));
}

TEST(PromptLookup, KCapsTheProposal) {
  const Tokens h = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2};
  EXPECT_EQ(Lookup(h, 3, 1), (Tokens{3}));
  EXPECT_EQ(Lookup(h, 3, 4), (Tokens{3, 4, 5, 6}));
  EXPECT_EQ(Lookup(h, 3, 16), (Tokens{3, 4, 5, 6, 7, 8, 9, 1, 2}));
  EXPECT_EQ(Lookup(h, 3, 0), Tokens{});
  EXPECT_EQ(Lookup(h, 3, -1), Tokens{});
}

TEST(PromptLookup, ProposalRunsToTheEndOfTheHistory) {
  // "1 2" occurred at 2-3, followed only by "3 1 2" before the history ends.
  const Tokens h = {0, 0, 1, 2, 3, 1, 2};
  EXPECT_EQ(Lookup(h, 3, 8), (Tokens{3, 1, 2}));
  // An occurrence overlapping the suffix: "7 7" ends at position 2 of "7 7 7 7".
  EXPECT_EQ(Lookup({7, 7, 7, 7}, 3, 8), (Tokens{7}));
  // The token right before the last one.
  EXPECT_EQ(Lookup({4, 4}, 3, 5), (Tokens{4}));
}

TEST(PromptLookup, NothingFound) {
  EXPECT_EQ(Lookup({}, 3, 4), Tokens{});
  EXPECT_EQ(Lookup({1}, 3, 4), Tokens{});
  EXPECT_EQ(Lookup({1, 2, 3, 4, 5}, 3, 4), Tokens{});
  // The suffix itself is no earlier occurrence.
  EXPECT_EQ(Lookup({9, 8, 1, 2, 3}, 3, 4), Tokens{});
}

TEST(PromptLookup, FallsBackToTheLastTokenAlone) {
  // Neither "5 3" nor longer occurred; "3" did, at 1 (then 4) and 4 (then 9): the latest.
  const Tokens h = {1, 3, 4, 2, 3, 9, 5, 3};
  EXPECT_EQ(Lookup(h, 3, 2), (Tokens{9, 5}));
  EXPECT_EQ(Lookup(h, 1, 2), (Tokens{9, 5}));
}

TEST(PromptLookup, IndexEqualsScanOnRandomHistories) {
  // Small alphabets repeat n-grams of every length; the incremental index after every Append, and
  // a Reset to the same history, must give the scan's proposal for every k.
  Rng rng(34);
  for (const int alphabet : {2, 3, 5, 40}) {
    for (const int max_ngram : {1, 2, 3, 5}) {
      PromptLookupProposer appended(max_ngram);
      Tokens history;
      for (int i = 0; i < 300; ++i) {
        const int token = static_cast<int>(rng.Next() % alphabet);
        history.push_back(token);
        appended.Append(token);
        ASSERT_EQ(appended.history(), history);
        for (const int k : {1, 3, 16}) {
          const Tokens scanned = PromptLookupScan(history, max_ngram, k);
          ASSERT_EQ(appended.Propose(k), scanned)
              << "alphabet " << alphabet << " n " << max_ngram << " size " << history.size();
          if (i % 37 == 0) {
            PromptLookupProposer reset(max_ngram);
            reset.Reset(history);
            ASSERT_EQ(reset.Propose(k), scanned);
          }
        }
      }
      // Reset replaces a history, it does not add to it.
      appended.Reset({1, 2, 1});
      EXPECT_EQ(appended.Propose(4), (Tokens{2, 1}));
    }
  }
}

TEST(PromptLookup, ContextSizedHistory) {
  // 8,192 tokens of a 7-token cycle with a marker: the index answers like the scan.
  Tokens history;
  for (int i = 0; i < 8192; ++i) history.push_back(i % 7 == 0 ? 1000 + (i / 7) % 3 : i % 7);
  PromptLookupProposer proposer(3);
  proposer.Reset(history);
  EXPECT_EQ(proposer.Propose(8), PromptLookupScan(history, 3, 8));
  EXPECT_EQ(proposer.Propose(8).size(), 8u);
}

TEST(PromptLookup, InvalidNgramNamesTheFlag) {
  for (const int n : {0, kMaxLookupNgram + 1}) {
    try {
      PromptLookupProposer proposer(n);
      ADD_FAILURE() << "accepted --lookup-ngram " << n;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--lookup-ngram"), std::string::npos);
    }
    EXPECT_THROW(PromptLookupScan({1, 2}, n, 1), Error);
  }
}

TEST(AdaptiveK, FollowsAScriptedAcceptanceSequence) {
  AdaptiveK k(8);
  EXPECT_EQ(k.k(), 8);
  struct Step {
    int proposed, accepted, k_after;
  };
  const Step script[] = {
      {8, 8, 8},                        // all accepted at the cap: stays
      {8, 0, 4},                        // none: halves
      {4, 1, 2},                        // 1 of 4 is under half: halves
      {2, 0, 1},                        // halves to 1
      {1, 0, 0},                        // fails at 1: backs off for 1 step
      {0, 0, 1},                        // that step proposed nothing; k is 1 again
      {1, 0, 0}, {0, 0, 0}, {0, 0, 1},  // fails again: 2 steps
      {1, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 1},  // and again: 4 steps
      {0, 0, 1},             // nothing proposed (no match): no evidence, unchanged
      {1, 1, 2},             // all accepted: +1, and the back-off is forgotten
      {2, 2, 3}, {3, 2, 3},  // 2 of 3, at least half: unchanged
      {2, 2, 4},             // a short proposal (history ended) fully kept still grows
      {4, 2, 4},             // exactly half: unchanged
      {4, 4, 5}, {5, 5, 6}, {6, 6, 7}, {7, 7, 8}, {8, 8, 8}, {8, 3, 4},  // 3 of 8: halves
  };
  for (const Step& s : script) {
    k.Record(s.proposed, s.accepted);
    EXPECT_EQ(k.k(), s.k_after) << s.proposed << " proposed, " << s.accepted << " accepted";
  }
  k.Reset();
  EXPECT_EQ(k.k(), 8);
  // After a success the back-off starts again from 1 step, and it never exceeds its cap.
  for (int step : {8, 4, 2, 1}) k.Record(step, 0);
  EXPECT_EQ(k.k(), 0);
  k.Record(0, 0);
  EXPECT_EQ(k.k(), 1);
  int longest = 0;
  for (int failure = 0; failure < 10; ++failure) {
    k.Record(1, 0);
    int skipped = 0;
    while (k.k() == 0) {
      k.Record(0, 0);
      ++skipped;
    }
    longest = std::max(longest, skipped);
  }
  EXPECT_EQ(longest, AdaptiveK::kMaxBackoffSteps);
  k.Reset();
  EXPECT_EQ(k.k(), 8);
}

TEST(AdaptiveK, DeterministicAndInRange) {
  // The same (proposed, accepted) sequence gives the same k's; k stays in [1, k_max], or 0 while
  // backing off (then the step proposes nothing).
  for (const int k_max : {1, 2, 5, 16}) {
    auto run = [k_max](uint64_t seed) {
      AdaptiveK k(k_max);
      Rng rng(seed);
      std::vector<int> ks;
      for (int i = 0; i < 500; ++i) {
        const int proposed = static_cast<int>(rng.Next() % (k.k() + 1));
        const int accepted = proposed == 0 ? 0 : static_cast<int>(rng.Next() % (proposed + 1));
        k.Record(proposed, accepted);
        EXPECT_GE(k.k(), 0);
        EXPECT_LE(k.k(), k_max);
        ks.push_back(k.k());
      }
      return ks;
    };
    EXPECT_EQ(run(1), run(1));
  }
  AdaptiveK one(1);
  one.Record(1, 1);
  EXPECT_EQ(one.k(), 1);
  one.Record(1, 0);
  EXPECT_EQ(one.k(), 0);  // backs off a step
  one.Record(0, 0);
  EXPECT_EQ(one.k(), 1);
}

TEST(AdaptiveK, BadInput) {
  for (const int k_max : {0, -3, kMaxSpeculateK + 1}) {
    try {
      AdaptiveK k(k_max);
      ADD_FAILURE() << "accepted --speculate-k " << k_max;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--speculate-k"), std::string::npos);
    }
  }
  AdaptiveK k(4);
  EXPECT_THROW(k.Record(2, 3), InternalError);
  EXPECT_THROW(k.Record(5, 0), InternalError);
  EXPECT_THROW(k.Record(-1, 0), InternalError);
}

}  // namespace
}  // namespace wc
