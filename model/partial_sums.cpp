#include "model/partial_sums.h"

#include <cstdint>

#include "dist/communicator.h"
#include "dist/exchange.h"

namespace wc {

void PartialSums::Poll() const {
  if (!group_ && interrupted_ && interrupted_()) throw Interrupted{};
}

void PartialSums::Sum(std::vector<float>& out,
                      std::initializer_list<const std::vector<float>*> biases) {
  if (!group_) return;
  // The vote, summed as integers in the same all-reduce as the partial sums: rank 0's interrupt
  // (the other ranks have none) and the number of ranks holding a write error.
  enum { kInterrupt, kFailed, kVotes };
  int32_t votes[kVotes] = {interrupted_ && interrupted_() ? 1 : 0, failed() ? 1 : 0};
  group_->AllReduceSum(out.data(), out.size(), votes, kVotes);
  if (votes[kFailed] > 0) {
    const std::vector<std::string> errors = AllGatherBytes(*group_, error_);
    for (int r = 0; r < group_->size(); ++r) {
      const std::string& e = errors[static_cast<size_t>(r)];
      if (!e.empty()) throw Error(r == 0 ? e : Cat("rank ", r, ": ", e));
    }
  }
  if (votes[kInterrupt] > 0) throw Interrupted{};
  for (const std::vector<float>* bias : biases) {
    const size_t hidden = bias->size();
    if (hidden == 0) continue;
    for (size_t t = 0; t < out.size() / hidden; ++t)
      for (size_t j = 0; j < hidden; ++j) out[t * hidden + j] += (*bias)[j];
  }
}

}  // namespace wc
