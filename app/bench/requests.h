// The synthetic requests the benchmarks (bench serve, bench model) put through the serving loop:
// random prompts, fixed lengths (EOS ignored), per-token times, and the aggregate decode rate.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "serving/serving_loop.h"
#include "serving/waiting_observer.h"
#include "util/rng.h"

namespace wc {

using BenchClock = std::chrono::steady_clock;

// Token times of one request, in seconds since `t0` (written on the loop's thread, read after
// Wait()).
class TimingObserver : public WaitingObserver {
 public:
  explicit TimingObserver(BenchClock::time_point t0) : WaitingObserver(nullptr), t0_(t0) {}
  void OnToken(int, const float*, int) override {
    times_.push_back(std::chrono::duration<double>(BenchClock::now() - t0_).count());
  }
  const std::vector<double>& times() const { return times_; }

 private:
  BenchClock::time_point t0_;
  std::vector<double> times_;
};

// `len` random ids in [3, vocab) (the first few are special tokens in Falcon-style vocabularies).
std::vector<int> RandomPrompt(Rng& rng, int len, int vocab);

// A request of `prompt` generating exactly `gen_len` tokens (EOS ignored, as serving benchmarks'
// ignore_eos), heard by `observer`.
Request BenchRequest(std::vector<int> prompt, int gen_len, uint64_t seed,
                     std::shared_ptr<RequestObserver> observer);

// Waits for every request; throws wc::Error if one failed.
void WaitAll(const std::vector<std::shared_ptr<TimingObserver>>& obs);

// Aggregate decode tokens/s of `rows` requests (8-token prompts, `gen_len` new tokens) decoding
// together: the tokens sampled after the last one's first token until the first one ends, over
// that time. Throws wc::Error if gen_len leaves no such window.
double DecodeRate(ServingLoop& loop, int rows, int gen_len, int vocab, uint64_t seed);

// The p-quantile (p in [0, 1]) of `v` by linear interpolation between order statistics; 0 when
// empty.
double Percentile(std::vector<double> v, double p);

}  // namespace wc
