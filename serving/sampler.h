// Next-token selection: greedy (temperature 0) or temperature -> top-k -> top-p sampling with the
// project's own RNG. Defaults are the seed's (001): top_k 5, top_p 0.9, temperature 1.0. Also the
// verification of a speculative decoding proposal (issue 34), which is sampling and comparing.
#pragma once

#include <cstdint>
#include <vector>

#include "serving/run_options.h"
#include "util/rng.h"

namespace wc {

struct SamplingParams {
  // Defaults and ranges: serving/run_options.h.
  float temperature = static_cast<float>(run_option::kTemperature.default_number);  // 0 = greedy
  int top_k = static_cast<int>(run_option::kTopK.default_number);      // 0 = whole vocabulary
  float top_p = static_cast<float>(run_option::kTopP.default_number);  // 1 = off
  // Throws wc::Error naming the flag (--temperature, --top-k, --top-p) if out of range.
  void Validate() const;
};

// The distribution Sample draws from: the candidates left after temperature, top-k and top-p, in
// Sample's order (higher logit first, lower id on ties), each with its unnormalized weight
// exp((logit - top logit) / temperature). A listed token's probability is weight / total; any other
// id's is 0. At temperature 0 it is the argmax alone, weight 1.
struct SamplingDistribution {
  std::vector<int> tokens;      // [n_kept] token ids, Sample's order
  std::vector<double> weights;  // [n_kept] unnormalized weights in (0, 1]; weights[0] == 1
  double total = 0.0;           // sum of weights, added in order (what Sample scales its draw by)
  // weight / total for a listed token; 0 for any other id.
  double Probability(int token) const;
  // The token a uniform draw u in [0, 1) selects: the first whose running sum of weights exceeds
  // u * total (the last listed one if rounding leaves none). Sample's choice for the same draw, bit
  // for bit. Requires a non-empty distribution.
  int Draw(double u) const;
};

// One chain of stages decides every token: Sample draws from it, SampleVerify (speculation's
// verify step) draws from it and compares, and logprobs read it (Distribution):
//   1. top-k: the k highest logits (all when 0), higher first, lower id on ties, NaN last;
//   2. temperature: each candidate weighs exp((logit - top logit) / T), NaN logits dropped;
//   3. top-p: the shortest prefix whose share of the weight reaches top_p.
// Greedy (temperature 0) is the chain's limit: the argmax alone.
class Sampler {
 public:
  Sampler(const SamplingParams& params, uint64_t seed);
  // New parameters for the tokens to come; the RNG stream goes on (a chat's later turns).
  void set_params(const SamplingParams& params);
  // logits: [vocab] f32. Returns a token id in [0, vocab). Ties are broken toward the lower id;
  // NaN logits are never chosen (throws wc::Error if every logit is NaN).
  int Sample(const float* logits, int vocab);
  // Fills dist with the distribution Sample(logits, vocab) draws from under the current params
  // (Sample is exactly dist->Draw(one RNG draw) at a temperature above 0). Draws nothing; throws as
  // Sample does.
  void Distribution(const float* logits, int vocab, SamplingDistribution* dist);
  // Verifies one deterministic proposal (a prompt-lookup draft token: q is one-hot at proposal) at
  // one position of a verify chunk. Returns the token this position emits and sets *accepted to
  // whether it is the proposal; proposal must be in [0, vocab).
  //  - Greedy (temperature 0): returns the argmax with Sample's tie and NaN rules; accepted iff it
  //    equals the proposal. Draws nothing.
  //  - Sampling: exactly one RNG draw u, and returns Sample's token for u. This is speculative
  //    sampling's rule for a one-hot q: the proposal is accepted iff u falls in its interval of
  //    p's cumulative sum, i.e. with probability p(proposal) = min(1, p/q); on a rejection, u is
  //    uniform over the rest of [0, 1), so the token it selects follows p with the proposal zeroed
  //    and renormalized - the normalized max(0, p - q) - without a second draw. (llama.cpp's
  //    common_sampler_sample_and_accept_n verifies drafts the same way: sample, compare.)
  // Called once per position in order, stopping after the first rejection and wherever decoding
  // stops (an end token), it consumes the RNG exactly as one-token-at-a-time decoding does and
  // emits the same tokens, so sampled output with speculation equals sampled output without it for
  // the same seed (given bit-identical logits), and greedy output likewise.
  int SampleVerify(const float* logits, int vocab, int proposal, bool* accepted);
  // The RNG stream's position (one draw per token sampled or verified at a temperature above 0;
  // none when greedy), and setting it back.
  Rng::State rng_state() const { return rng_.state(); }
  void set_rng_state(const Rng::State& state) { rng_.set_state(state); }

 private:
  // Greedy's choice: the highest logit, lower id on ties, never a NaN (throws if all are NaN).
  int Argmax(const float* logits, int vocab) const;
  // The chain's stages (above), in order: KeepTopK leaves the candidates first in order_ and
  // returns their count (throws if all logits are NaN); WeighByTemperature fills dist->weights
  // and returns their sum; KeepTopP cuts them and fills dist->tokens and dist->total.
  int KeepTopK(const float* logits, int vocab);
  double WeighByTemperature(const float* logits, int k, SamplingDistribution* dist) const;
  void KeepTopP(double sum, SamplingDistribution* dist) const;

  SamplingParams params_;
  Rng rng_;
  std::vector<int> order_;     // [vocab] scratch
  SamplingDistribution dist_;  // [top_k] scratch: what Sample draws from
};

}  // namespace wc
