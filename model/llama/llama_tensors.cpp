// Llama's tensor names (HF modeling_llama.py), one row per tensor a config needs.
#include "model/llama/llama.h"
#include "util/error.h"

namespace wc::llama {

std::vector<TensorEntry> Tensors(const ModelConfig& c) {
  using R = TensorRole;
  const int64_t h = c.hidden_size, ffn = c.ffn_hidden_size, hd = c.head_dim();
  const int64_t q = c.n_head * hd, kv = c.n_kv_heads * hd;
  std::vector<TensorEntry> t;
  t.push_back({R::kTokenEmbd, -1, "model.embed_tokens.weight", {c.vocab_size, h}});
  t.push_back({R::kOutputNorm, -1, "model.norm.weight", {h}});
  if (!c.tie_word_embeddings) t.push_back({R::kOutput, -1, "lm_head.weight", {c.vocab_size, h}});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = Cat("model.layers.", l, ".");
    t.push_back({R::kAttnNorm, l, p + "input_layernorm.weight", {h}});
    t.push_back({R::kMlpNorm, l, p + "post_attention_layernorm.weight", {h}});
    const std::string a = p + "self_attn.";
    t.push_back({R::kQ, l, a + "q_proj.weight", {q, h}});
    t.push_back({R::kK, l, a + "k_proj.weight", {kv, h}});
    t.push_back({R::kV, l, a + "v_proj.weight", {kv, h}});
    t.push_back({R::kAttnOut, l, a + "o_proj.weight", {h, q}});
    if (c.attention_bias) {
      t.push_back({R::kQBias, l, a + "q_proj.bias", {q}});
      t.push_back({R::kKBias, l, a + "k_proj.bias", {kv}});
      t.push_back({R::kVBias, l, a + "v_proj.bias", {kv}});
      t.push_back({R::kAttnOutBias, l, a + "o_proj.bias", {h}});
    }
    const std::string m = p + "mlp.";
    t.push_back({R::kGate, l, m + "gate_proj.weight", {ffn, h}});
    t.push_back({R::kUp, l, m + "up_proj.weight", {ffn, h}});
    t.push_back({R::kDown, l, m + "down_proj.weight", {h, ffn}});
    if (c.mlp_bias) {
      t.push_back({R::kGateBias, l, m + "gate_proj.bias", {ffn}});
      t.push_back({R::kUpBias, l, m + "up_proj.bias", {ffn}});
      t.push_back({R::kDownBias, l, m + "down_proj.bias", {h}});
    }
  }
  return t;
}

}  // namespace wc::llama
