#include "app/bench/requests.h"

#include <algorithm>

#include "util/error.h"

namespace wc {

std::vector<int> RandomPrompt(Rng& rng, int len, int vocab) {
  std::vector<int> ids(len);
  // Skip the first few ids (special tokens in Falcon-style vocabularies).
  for (int& id : ids) id = 3 + static_cast<int>(rng.Next() % static_cast<uint64_t>(vocab - 3));
  return ids;
}

Request BenchRequest(std::vector<int> prompt, int gen_len, uint64_t seed,
                     std::shared_ptr<RequestObserver> observer) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.max_new_tokens = gen_len;
  r.stop_at_eos = false;  // fixed lengths, as serving benchmarks' ignore_eos
  r.seed = seed;
  r.observer = std::move(observer);
  return r;
}

void WaitAll(const std::vector<std::shared_ptr<TimingObserver>>& obs) {
  for (const auto& o : obs)
    if (o->Wait().reason == StopReason::kError)
      throw Error(Cat("bench request failed: ", o->Wait().error));
}

// Aggregate decode tokens/s with `rows` requests decoding together.
double DecodeRate(ServingLoop& loop, int rows, int gen_len, int vocab, uint64_t seed) {
  // The requests are submitted one by one while the loop runs: on a busy machine the loop may
  // start the first before the last arrives, and with few tokens the first can end before the
  // last has its first token. That leaves no window; measure again (a few times) before saying
  // gen_len is too short.
  for (int attempt = 0; attempt < 4; ++attempt) {
    Rng rng(seed);
    const BenchClock::time_point t0 = BenchClock::now();
    std::vector<std::shared_ptr<TimingObserver>> obs;
    for (int i = 0; i < rows; ++i) {
      obs.push_back(std::make_shared<TimingObserver>(t0));
      loop.Submit(BenchRequest(RandomPrompt(rng, 8, vocab), gen_len, seed + i, obs.back()));
    }
    WaitAll(obs);
    double start = 0, end = 1e300;
    for (const auto& o : obs) {
      start = std::max(start, o->times().front());
      end = std::min(end, o->times().back());
    }
    int64_t tokens = 0;
    for (const auto& o : obs)
      for (double t : o->times()) tokens += (t > start && t <= end) ? 1 : 0;
    if (end > start && tokens > 0) return tokens / (end - start);
  }
  throw Error("--gen-len is too short to measure decode speed; raise it");
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace wc
