// The bookkeeping of one beam-search request (issue 13's semantics, as in HF transformers' beam
// search and TensorRT-LLM's, seed 003): live beams and their scores, the 2W best candidates of a
// step, finished hypotheses, the stopping test. It sees logits and token ids only; the serving
// loop runs the forward passes and moves the beams' KV (block sharing, KVCache::ReorderUsers).
//
// A live beam's score is the sum of the log-softmax (temperature 1) of its generated tokens.
// Each step, every live beam b and token t give the candidate score_b + logprob_b(t); the best 2W
// (ties: lower beam, then lower token id) are walked in order. A candidate that ends a hypothesis
// (EOS or a completed stop string) is finished if its rank is below W, scored candidate /
// L^length_penalty (L = its generated tokens, that one included), else skipped; any other becomes
// a next live beam until W are chosen. At most W finished hypotheses are kept (a new one replaces
// the worst if it is better). After the walk: with early_stopping the search ends once W are
// finished; without, once W are finished and the best live beam's score / its length^length_penalty
// is no better than the worst finished. At max new tokens every live beam is added (Finalize).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "serving/run_options.h"

namespace wc {

struct BeamParams {
  int num_beams = 1;  // W, 1..kMaxBeams
  float length_penalty = static_cast<float>(run_option::kLengthPenalty.default_number);
  bool early_stopping = run_option::kEarlyStopping.default_number != 0;
  int num_return = 1;  // 1..W
  // Throws wc::Error naming the flag (--beams, --length-penalty, --num-return) when out of range.
  void Validate() const;
};

struct BeamHypothesis {
  std::vector<int> tokens;  // generated ids, the ending EOS or stop token included
  double score = 0;         // sum of logprobs / length^length_penalty
  bool ended = false;       // EOS or a stop string ended it (else max new tokens did)
};

class BeamSearch {
 public:
  explicit BeamSearch(const BeamParams& params);

  // Live beams, in order (1 before the first step).
  int live() const { return static_cast<int>(live_.size()); }
  const std::vector<int>& live_tokens(int beam) const { return live_[beam].tokens; }
  double live_score(int beam) const { return live_[beam].score; }

  struct Step {
    std::vector<int> parents;  // [new live beams]: the live beam each one extends
    std::vector<int> tokens;   // [new live beams]: the token it appended
  };
  // One step over logits [live(), vocab] f32 of the live beams, in beam order. ends(beam, token):
  // whether `token` appended to live beam `beam` ends its hypothesis. Returns how the new live
  // beams come from the old ones (possibly fewer than W, or none).
  Step Advance(const float* logits, int vocab, const std::function<bool(int, int)>& ends);
  // Whether the stopping test (run by Advance) ended the search, or no beam is live.
  bool done() const { return done_; }
  // Max new tokens reached: every live beam becomes a hypothesis ("length"); the search is done.
  void Finalize();
  // The best num_return hypotheses, best first (equal scores: the one finished first).
  std::vector<BeamHypothesis> Best() const;

 private:
  struct Beam {
    std::vector<int> tokens;
    double score = 0;
  };
  double Normalized(double score, size_t length) const;
  void AddHypothesis(BeamHypothesis h);

  BeamParams params_;
  std::vector<Beam> live_;
  std::vector<BeamHypothesis> finished_;  // at most W, in the order they were kept
  bool done_ = false;
};

}  // namespace wc
