// Next-token selection: greedy (temperature 0) or temperature -> top-k -> top-p sampling with the
// project's own RNG. Defaults are the seed's (001): top_k 5, top_p 0.9, temperature 1.0.
#pragma once

#include <cstdint>
#include <vector>

#include "util/rng.h"

namespace wc {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 5;             // 0 = whole vocabulary
  float top_p = 0.9f;        // 1 = off
  // Throws wc::Error naming the flag (--temperature, --top-k, --top-p) if out of range.
  void Validate() const;
};

class Sampler {
 public:
  Sampler(const SamplingParams& params, uint64_t seed);
  // New parameters for the tokens to come; the RNG stream goes on (a chat's later turns).
  void set_params(const SamplingParams& params);
  // logits: [vocab] f32. Returns a token id in [0, vocab). Ties are broken toward the lower id;
  // NaN logits are never chosen (throws wc::Error if every logit is NaN).
  int Sample(const float* logits, int vocab);
  // The RNG stream's position (one draw per token sampled at a temperature above 0; none when
  // greedy), and setting it back.
  Rng::State rng_state() const { return rng_.state(); }
  void set_rng_state(const Rng::State& state) { rng_.set_state(state); }

 private:
  SamplingParams params_;
  Rng rng_;
  std::vector<int> order_;     // [vocab] scratch
  std::vector<double> probs_;  // [top_k] scratch
};

}  // namespace wc
