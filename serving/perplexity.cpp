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

PerplexityResult TeacherForcedPerplexity(const DecoderModel& model, const std::vector<int>& ids,
                                         KVCache& cache, const ProgressFn& progress) {
  const int ctx = cache.shape().max_seq;
  if (ids.size() < 2) throw Error("the text has fewer than two tokens; nothing to score");
  if (ctx < 2) throw Error(Cat("--ctx ", ctx, " is too short to score anything"));
  const int vocab = model.config().vocab_size;
  PerplexityResult r;
  int64_t total = 0;  // tokens to predict: each window's first is context only
  for (size_t begin = 0; begin + 1 < ids.size(); begin += ctx)
    total += static_cast<int64_t>(std::min(ids.size(), begin + ctx) - begin) - 1;
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
      if (progress) progress(r.tokens, total);
    }
  }
  return r;
}

AttentionError MeasureAttentionError(DecoderModel& model, const std::vector<int>& ids,
                                     KVCache& reference, KVCache& cache) {
  WC_CHECK(reference.shape().max_seq == cache.shape().max_seq, "caches of different contexts");
  const int ctx = cache.shape().max_seq;
  std::vector<std::vector<float>> ref_attn(model.config().n_layers);  // per layer: [values]
  double dot = 0, norm_ref = 0, norm_x = 0;
  AttentionError err;
  std::vector<float> logits;
  for (size_t begin = 0; begin < ids.size(); begin += ctx) {
    reference.ResetUser(0);
    cache.ResetUser(0);
    for (size_t i = begin; i < std::min(ids.size(), begin + ctx); ++i) {
      TokenBatch b;
      b.Add(ids[i], 0, static_cast<int>(i - begin), false);
      const int64_t width = static_cast<int64_t>(model.config().n_head) * model.config().head_dim();
      model.set_attention_observer([&](int layer, const float* attn, int64_t n) {
        ref_attn[layer].assign(attn, attn + n * width);
      });
      model.Forward(b, reference, &logits);
      model.set_attention_observer([&](int layer, const float* attn, int64_t n) {
        const std::vector<float>& r = ref_attn[layer];
        for (int64_t k = 0; k < n * width; ++k) {
          dot += static_cast<double>(r[k]) * attn[k];
          norm_ref += static_cast<double>(r[k]) * r[k];
          norm_x += static_cast<double>(attn[k]) * attn[k];
          err.max_abs = std::max(err.max_abs, std::fabs(static_cast<double>(attn[k]) - r[k]));
        }
        err.values += n * width;
      });
      model.Forward(b, cache, &logits);
      model.set_attention_observer(nullptr);
    }
  }
  err.cosine = norm_ref > 0 && norm_x > 0 ? dot / std::sqrt(norm_ref * norm_x) : 1.0;
  return err;
}

}  // namespace wc
