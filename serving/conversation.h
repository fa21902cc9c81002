// One user row of a KV cache holding a growing token sequence (a chat, or one `generate` call), and
// the decode loop that samples from it and streams text to a sink.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "kvcache/kv_cache.h"
#include "model/falcon.h"
#include "model/tokenizer.h"
#include "serving/sampler.h"
#include "serving/text_stream.h"

namespace wc {

struct GenerateOptions {
  int max_new_tokens = 256;       // -n
  std::vector<std::string> stop;  // stop strings (text before them is kept)
  bool stop_at_eos = true;
  bool trim_leading_space = false;  // drop the reply's leading word-boundary space
};

enum class StopReason { kEos, kStopString, kMaxTokens, kContextFull, kCancelled };
const char* StopReasonName(StopReason reason);

struct GenerationResult {
  std::vector<int> tokens;  // sampled ids, including a final EOS if one was sampled
  std::string text;         // exactly what the sink received
  StopReason reason = StopReason::kMaxTokens;
};

class Conversation {
 public:
  // prefill_chunk: most tokens fed per forward call (bounds activation memory for long prompts).
  Conversation(const FalconModel& model, KVCache& cache, int user_row, int prefill_chunk = 256);

  int cur_pos() const { return cur_pos_; }
  int context() const { return cache_.shape().max_seq; }
  const std::vector<int>& history() const { return history_; }

  // Feeds `ids` at cur_pos.. and keeps the logits of the last one. Throws wc::Error (and feeds
  // nothing) if they do not fit in the remaining context.
  void Feed(const std::vector<int>& ids);
  // Samples until EOS, a stop string, max_new_tokens, a full context or `cancel`, streaming text to
  // `sink`. Needs at least one fed token. Sampled tokens are fed as they are produced, except the
  // last one when generation ends on EOS or a stop string.
  GenerationResult Generate(const Tokenizer& tok, const GenerateOptions& options, Sampler& sampler,
                            TextSink& sink, const std::atomic<bool>* cancel = nullptr);
  // Forgets the sequence (the row's cache is overwritten from position 0 on).
  void Reset();
  // Logits after the last fed token: [vocab_size].
  const std::vector<float>& last_logits() const { return last_logits_; }

 private:
  const FalconModel& model_;
  KVCache& cache_;
  int user_row_;
  int prefill_chunk_;
  int cur_pos_ = 0;
  std::vector<int> history_;        // every fed token, [cur_pos]
  std::vector<float> last_logits_;  // [vocab_size]
};

}  // namespace wc
