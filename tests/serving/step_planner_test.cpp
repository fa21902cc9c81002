// The serving loop's prepare_inputs choice (serving/step_planner.h): decoding rows first, the token
// budget, rotation so every decoding row gets its turn, prefill chunks in admission order.
#include <map>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "serving/step_planner.h"
#include "util/error.h"

namespace wc {
namespace {

RowDemand Decoding(int row) {
  return {row, 1, true, 0};
}
RowDemand Prefill(int row, int remaining, int64_t admit_seq) {
  return {row, remaining, false, admit_seq};
}

int Total(const std::vector<PlannedChunk>& plan) {
  return std::accumulate(plan.begin(), plan.end(), 0,
                         [](int sum, const PlannedChunk& c) { return sum + c.n_tokens; });
}

TEST(StepPlanner, NoRowsGiveAnEmptyPlan) {
  EXPECT_TRUE(PlanStep({}, 256, 0).empty());
}

TEST(StepPlanner, DecodingRowsComeFirstThenPrefillTakesWhatIsLeft) {
  // Row 0 prefills 10 tokens; rows 1 and 2 decode. Budget 5: both decode tokens, then 3 of the
  // prompt.
  const auto plan = PlanStep({Prefill(0, 10, 0), Decoding(1), Decoding(2)}, 5, 0);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].row, 1);
  EXPECT_EQ(plan[0].n_tokens, 1);
  EXPECT_EQ(plan[1].row, 2);
  EXPECT_EQ(plan[1].n_tokens, 1);
  EXPECT_EQ(plan[2].row, 0);
  EXPECT_EQ(plan[2].n_tokens, 3);
}

TEST(StepPlanner, NeverExceedsTheBudgetAndNeverPlansEmptyChunks) {
  for (int budget : {1, 2, 3, 7, 16, 256}) {
    const auto plan = PlanStep({Decoding(0), Prefill(1, 40, 1), Decoding(2), Prefill(3, 2, 0),
                                Decoding(5), Prefill(6, 300, 2)},
                               budget, 0);
    EXPECT_LE(Total(plan), budget) << budget;
    // Everything fits in 256: the whole demand (3 + 40 + 2 + 300 = 345) is capped at the budget.
    EXPECT_EQ(Total(plan), std::min(budget, 345)) << budget;
    for (const PlannedChunk& c : plan) EXPECT_GE(c.n_tokens, 1) << budget;
  }
}

TEST(StepPlanner, PrefillRowsWaitWhileDecodingRowsUseTheWholeBudget) {
  const auto plan = PlanStep({Prefill(0, 50, 0), Decoding(1), Decoding(2), Decoding(3)}, 2, 0);
  ASSERT_EQ(plan.size(), 2u);
  for (const PlannedChunk& c : plan) {
    EXPECT_NE(c.row, 0);
    EXPECT_EQ(c.n_tokens, 1);
  }
}

TEST(StepPlanner, PrefillRowsShareTheBudgetInAdmissionOrder) {
  // Row numbers disagree with admission order on purpose: admit_seq decides.
  const auto plan =
      PlanStep({Prefill(3, 5, 5), Prefill(1, 5, 2), Prefill(2, 5, 9), Prefill(0, 5, 7)}, 12, 0);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].row, 1);  // admitted first (2)
  EXPECT_EQ(plan[0].n_tokens, 5);
  EXPECT_EQ(plan[1].row, 3);  // then 5
  EXPECT_EQ(plan[1].n_tokens, 5);
  EXPECT_EQ(plan[2].row, 0);  // then 7: what is left of the budget
  EXPECT_EQ(plan[2].n_tokens, 2);
}

TEST(StepPlanner, AnEarlierPromptIsChunkedBeforeALaterOneStarts) {
  // A 300-token prompt admitted first takes the whole 256-token budget; the later prompt waits.
  const auto first = PlanStep({Prefill(4, 20, 1), Prefill(7, 300, 0)}, 256, 0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].row, 7);
  EXPECT_EQ(first[0].n_tokens, 256);
  const auto second = PlanStep({Prefill(4, 20, 1), Prefill(7, 44, 0)}, 256, 0);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].row, 7);
  EXPECT_EQ(second[0].n_tokens, 44);
  EXPECT_EQ(second[1].row, 4);
  EXPECT_EQ(second[1].n_tokens, 20);
}

TEST(StepPlanner, DecodingRowsStartAtTheRotationAndWrap) {
  const std::vector<RowDemand> rows = {Decoding(1), Decoding(5), Decoding(9)};
  auto order = [&](int rotate) {
    std::vector<int> got;
    for (const PlannedChunk& c : PlanStep(rows, 256, rotate)) got.push_back(c.row);
    return got;
  };
  EXPECT_EQ(order(0), (std::vector<int>{1, 5, 9}));
  EXPECT_EQ(order(2), (std::vector<int>{5, 9, 1}));
  EXPECT_EQ(order(5), (std::vector<int>{5, 9, 1}));
  EXPECT_EQ(order(6), (std::vector<int>{9, 1, 5}));
  EXPECT_EQ(order(10), (std::vector<int>{1, 5, 9}));
  // A budget of 1 serves the first row at or after the rotation.
  const auto one = PlanStep(rows, 1, 6);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].row, 9);
}

TEST(StepPlanner, RotationGivesEveryDecodingRowItsTurnWhenTheBudgetIsSmall) {
  // The loop advances `rotate` by one per step, modulo user_rows. With budget 1 every decoding
  // row is served within user_rows steps, and when all rows decode the service is exactly fair.
  const int user_rows = 8;
  for (const std::vector<int>& decoding_rows :
       {std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}, std::vector<int>{1, 4, 6}, std::vector<int>{7}}) {
    std::vector<RowDemand> rows;
    for (int r : decoding_rows) rows.push_back(Decoding(r));
    for (int budget : {1, 2}) {
      std::map<int, int> served;
      for (int step = 0; step < user_rows; ++step)
        for (const PlannedChunk& c : PlanStep(rows, budget, step % user_rows)) ++served[c.row];
      for (int r : decoding_rows)
        EXPECT_GE(served[r], 1) << "row " << r << " starved with budget " << budget;
      if (decoding_rows.size() == static_cast<size_t>(user_rows)) {
        for (int r : decoding_rows) EXPECT_EQ(served[r], budget) << "row " << r;
      }
    }
  }
}

TEST(StepPlanner, RejectsAnEmptyBudgetOrARowWithNothingToFeed) {
  EXPECT_THROW(PlanStep({Decoding(0)}, 0, 0), InternalError);
  EXPECT_THROW(PlanStep({Prefill(0, 0, 0)}, 4, 0), InternalError);
}

}  // namespace
}  // namespace wc
