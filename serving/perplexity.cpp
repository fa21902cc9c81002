#include "serving/perplexity.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace wc {

double LogProb(const float* logits, int vocab, int target) {
  double mx = logits[0];
  for (int i = 1; i < vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return static_cast<double>(logits[target]) - mx - std::log(sum);
}

PerplexityResult TeacherForcedPerplexity(const FalconModel& model, const std::vector<int>& ids,
                                         KVCache& cache) {
  const int ctx = cache.shape().max_seq;
  if (ids.size() < 2) throw Error("the text has fewer than two tokens; nothing to score");
  if (ctx < 2) throw Error(Cat("--ctx ", ctx, " is too short to score anything"));
  const int vocab = model.config().vocab_size;
  PerplexityResult r;
  std::vector<float> logits;
  for (size_t begin = 0; begin + 1 < ids.size(); begin += ctx) {
    cache.ResetUser(0);
    const size_t end = std::min(ids.size(), begin + ctx);
    for (size_t i = begin; i + 1 < end; ++i) {
      TokenBatch b;
      b.Add(ids[i], 0, static_cast<int>(i - begin), true);
      model.Forward(b, cache, &logits);
      r.nll -= LogProb(logits.data(), vocab, ids[i + 1]);
      ++r.tokens;
    }
  }
  return r;
}

}  // namespace wc
