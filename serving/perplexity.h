// Teacher-forced perplexity: the text's tokens are fed one at a time through the decode path (so
// every token's K/V is written to the cache in its format and read back by attention), and the
// log-probability of each next token is summed. Text longer than the context is scored in
// consecutive windows of `ctx` tokens, each starting from an empty cache.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvcache/kv_cache.h"
#include "model/decoder_model.h"

namespace wc {

struct PerplexityResult {
  int64_t tokens = 0;  // predicted tokens (each window's first token is context only)
  double nll = 0;      // summed negative log-likelihood, nats
  double perplexity() const { return tokens > 0 ? std::exp(nll / tokens) : 0.0; }
};

// ids: the text's tokens (with BOS if the model uses one), fed through user row 0 of `cache` in
// windows of cache.shape().max_seq tokens. Throws wc::Error if fewer than two tokens.
// `progress` (optional) hears (tokens scored, tokens to score) after each token.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;
PerplexityResult TeacherForcedPerplexity(const DecoderModel& model, const std::vector<int>& ids,
                                         KVCache& cache, const ProgressFn& progress = nullptr);

// How far attention outputs over a KV cache in some format are from those over an f32 cache when
// the same tokens are fed through both (teacher-forced, in lockstep): over every layer, token and
// value.
struct AttentionError {
  double cosine = 1.0;   // cosine similarity of all attention outputs, as one vector
  double max_abs = 0.0;  // largest |difference| of one value
  int64_t values = 0;
};
// ids through `reference` (an f32 cache) and `cache`, windowed like TeacherForcedPerplexity.
// Both caches must have the same shape.
AttentionError MeasureAttentionError(DecoderModel& model, const std::vector<int>& ids,
                                     KVCache& reference, KVCache& cache);

// log softmax(logits)[target] in double. logits: [vocab]
double LogProb(const float* logits, int vocab, int target);

}  // namespace wc
