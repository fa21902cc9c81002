#include "serving/step_planner.h"

#include <algorithm>

#include "util/error.h"

namespace wc {

std::vector<PlannedChunk> PlanStep(std::vector<RowDemand> rows, int max_batch_tokens, int rotate) {
  WC_CHECK(max_batch_tokens >= 1, "max_batch_tokens ", max_batch_tokens);
  std::vector<RowDemand> decoding, prefilling;
  for (const RowDemand& r : rows) {
    WC_CHECK(r.remaining >= 1, "row ", r.row, " has nothing to feed");
    (r.decoding ? decoding : prefilling).push_back(r);
  }
  // Decoding rows in row order from `rotate`, wrapping around.
  std::sort(decoding.begin(), decoding.end(), [rotate](const RowDemand& a, const RowDemand& b) {
    const bool a_late = a.row < rotate, b_late = b.row < rotate;
    return a_late != b_late ? b_late : a.row < b.row;
  });
  std::stable_sort(
      prefilling.begin(), prefilling.end(),
      [](const RowDemand& a, const RowDemand& b) { return a.admit_seq < b.admit_seq; });
  std::vector<PlannedChunk> plan;
  int budget = max_batch_tokens;
  for (const RowDemand& r : decoding) {
    if (r.remaining > budget) continue;  // all of a beam request's tokens, or none this step
    plan.push_back({r.row, r.remaining});
    budget -= r.remaining;
  }
  for (const RowDemand& r : prefilling) {
    if (budget == 0) break;
    const int n = std::min(r.remaining, budget);
    plan.push_back({r.row, n});
    budget -= n;
  }
  return plan;
}

}  // namespace wc
