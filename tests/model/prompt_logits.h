// The logits of every position of one prompt, run as one batch on a fresh f32 KV cache: what the
// GGUF tests compare between a file and its checkpoint directory (or its dequantized model).
#pragma once

#include <vector>

#include "kvcache/kv_cache.h"
#include "model/decoder_model.h"
#include "model/token_batch.h"

namespace wc::test {

inline std::vector<float> PromptLogits(const DecoderModel& model, const std::vector<int>& ids) {
  KVCache cache(model.CacheShape(1, static_cast<int>(ids.size())), KVDType::kF32);
  TokenBatch b;
  for (size_t i = 0; i < ids.size(); ++i) b.Add(ids[i], 0, static_cast<int>(i), true);
  std::vector<float> logits;  // [ids.size(), vocab]
  model.Forward(b, cache, &logits);
  return logits;
}

}  // namespace wc::test
