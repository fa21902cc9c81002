// Falcon's tensor names (HF modeling_falcon.py; GGUF: llama.cpp's LLM_ARCH_FALCON), one row per
// tensor a config needs. llama.cpp's falcon graph is the parallel RoPE layout without biases: its
// attn_norm is the norm the MLP reads (Falcon-7B's one input_layernorm, Falcon-40B's ln_mlp) and
// attn_norm_2 Falcon-40B's ln_attn.
#include "model/falcon/falcon.h"
#include "util/error.h"

namespace wc::falcon {

std::vector<TensorEntry> Tensors(const ModelConfig& c) {
  using R = TensorRole;
  const int64_t h = c.hidden_size, ffn = c.ffn_hidden_size, qkv = c.qkv_rows();
  const int64_t attn = int64_t{c.n_head} * c.head_dim();
  std::vector<TensorEntry> t;
  t.push_back({R::kTokenEmbd,
               -1,
               "transformer.word_embeddings.weight",
               {c.vocab_size, h},
               "token_embd.weight"});
  t.push_back({R::kOutputNorm, -1, "transformer.ln_f.weight", {h}, "output_norm.weight"});
  t.push_back({R::kOutputNormBias, -1, "transformer.ln_f.bias", {h}, "output_norm.bias"});
  if (!c.tie_word_embeddings)
    t.push_back({R::kOutput, -1, "lm_head.weight", {c.vocab_size, h}, "output.weight"});
  // llama.cpp's converter writes the grouped QKV as all Q, all K, all V (one group: the same).
  const GgufRows qkv_rows = c.qkv_layout() == QkvLayout::kGrouped && c.n_kv_heads > 1
                                ? GgufRows::kQkvBlocks
                                : GgufRows::kAsHf;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = Cat("transformer.h.", l, "."), g = Cat("blk.", l, ".");
    const std::string ln1 = c.two_layernorms() ? "ln_attn" : "input_layernorm";
    const std::string gn1 = c.two_layernorms() ? g + "attn_norm_2" : g + "attn_norm";
    t.push_back({R::kAttnNorm, l, p + ln1 + ".weight", {h}, gn1 + ".weight"});
    t.push_back({R::kAttnNormBias, l, p + ln1 + ".bias", {h}, gn1 + ".bias"});
    if (c.mlp_norm()) {
      const std::string ln2 = c.two_layernorms() ? "ln_mlp" : "post_attention_layernorm";
      const std::string gn2 = c.two_layernorms() ? g + "attn_norm" : "";
      t.push_back({R::kMlpNorm, l, p + ln2 + ".weight", {h}, gn2.empty() ? "" : gn2 + ".weight"});
      t.push_back({R::kMlpNormBias, l, p + ln2 + ".bias", {h}, gn2.empty() ? "" : gn2 + ".bias"});
    }
    t.push_back({R::kQkv,
                 l,
                 p + "self_attention.query_key_value.weight",
                 {qkv, h},
                 g + "attn_qkv.weight",
                 qkv_rows});
    if (c.bias) t.push_back({R::kQkvBias, l, p + "self_attention.query_key_value.bias", {qkv}});
    t.push_back(
        {R::kAttnOut, l, p + "self_attention.dense.weight", {h, attn}, g + "attn_output.weight"});
    if (c.bias) t.push_back({R::kAttnOutBias, l, p + "self_attention.dense.bias", {h}});
    t.push_back({R::kUp, l, p + "mlp.dense_h_to_4h.weight", {ffn, h}, g + "ffn_up.weight"});
    if (c.bias) t.push_back({R::kUpBias, l, p + "mlp.dense_h_to_4h.bias", {ffn}});
    t.push_back({R::kDown, l, p + "mlp.dense_4h_to_h.weight", {h, ffn}, g + "ffn_down.weight"});
    if (c.bias) t.push_back({R::kDownBias, l, p + "mlp.dense_4h_to_h.bias", {h}});
  }
  return t;
}

}  // namespace wc::falcon
