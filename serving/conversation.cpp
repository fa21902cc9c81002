#include "serving/conversation.h"

#include <algorithm>

#include "util/error.h"

namespace wc {

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kEos:
      return "eos";
    case StopReason::kStopString:
      return "stop";
    case StopReason::kMaxTokens:
      return "length";
    case StopReason::kContextFull:
      return "context";
    case StopReason::kCancelled:
      return "cancelled";
  }
  return "?";
}

Conversation::Conversation(const FalconModel& model, KVCache& cache, int user_row,
                           int prefill_chunk)
    : model_(model),
      cache_(cache),
      user_row_(user_row),
      prefill_chunk_(std::max(1, prefill_chunk)) {}

void Conversation::Feed(const std::vector<int>& ids) {
  if (ids.empty()) return;
  if (cur_pos_ + static_cast<int64_t>(ids.size()) > context())
    throw Error(Cat("input of ", ids.size(), " tokens does not fit the context of ", context(),
                    " tokens (", cur_pos_,
                    " already used); raise --ctx, shorten the input, or "
                    "start over"));
  for (size_t begin = 0; begin < ids.size(); begin += prefill_chunk_) {
    const size_t end = std::min(ids.size(), begin + prefill_chunk_);
    TokenBatch batch;
    for (size_t i = begin; i < end; ++i)
      batch.Add(ids[i], user_row_, cur_pos_ + static_cast<int>(i - begin), i + 1 == ids.size());
    model_.Forward(batch, cache_, &last_logits_);
    cur_pos_ += static_cast<int>(end - begin);
    history_.insert(history_.end(), ids.begin() + begin, ids.begin() + end);
  }
}

GenerationResult Conversation::Generate(const Tokenizer& tok, const GenerateOptions& options,
                                        Sampler& sampler, TextSink& sink,
                                        const std::atomic<bool>* cancel) {
  WC_CHECK(!last_logits_.empty(), "Generate needs a fed prompt");
  GenerationResult result;
  TextStream stream(options.stop, sink, options.trim_leading_space);
  const int vocab = model_.config().vocab_size, eos = model_.config().eos_token_id;
  result.reason = StopReason::kMaxTokens;
  for (int i = 0; i < options.max_new_tokens; ++i) {
    if (cancel != nullptr && cancel->load()) {
      result.reason = StopReason::kCancelled;
      break;
    }
    const int token = sampler.Sample(last_logits_.data(), vocab);
    result.tokens.push_back(token);
    if (options.stop_at_eos && token == eos) {
      result.reason = StopReason::kEos;
      break;
    }
    if (stream.Add(tok.TokenBytes(token))) {
      result.reason = StopReason::kStopString;
      break;
    }
    if (cur_pos_ >= context()) {
      result.reason = StopReason::kContextFull;
      break;
    }
    Feed({token});
  }
  stream.Finish();
  result.text = stream.emitted();
  return result;
}

void Conversation::Reset() {
  cache_.ResetUser(user_row_);
  cur_pos_ = 0;
  history_.clear();
  last_logits_.clear();
}

}  // namespace wc
