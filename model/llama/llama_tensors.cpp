// Llama's tensor names (HF modeling_llama.py; GGUF: llama.cpp's LLM_ARCH_LLAMA), one row per tensor
// a config needs.
#include "model/llama/llama.h"
#include "util/error.h"

namespace wc::llama {

std::vector<TensorEntry> Tensors(const ModelConfig& c) {
  using R = TensorRole;
  // llama.cpp's converter interleaves q and k rows for its RoPE (docs/gguf.md section 4).
  constexpr GgufRows kPairs = GgufRows::kRopePairs;
  const int64_t h = c.hidden_size, ffn = c.ffn_hidden_size, hd = c.head_dim();
  const int64_t q = c.n_head * hd, kv = c.n_kv_heads * hd;
  std::vector<TensorEntry> t;
  t.push_back(
      {R::kTokenEmbd, -1, "model.embed_tokens.weight", {c.vocab_size, h}, "token_embd.weight"});
  t.push_back({R::kOutputNorm, -1, "model.norm.weight", {h}, "output_norm.weight"});
  if (!c.tie_word_embeddings)
    t.push_back({R::kOutput, -1, "lm_head.weight", {c.vocab_size, h}, "output.weight"});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = Cat("model.layers.", l, "."), g = Cat("blk.", l, ".");
    t.push_back({R::kAttnNorm, l, p + "input_layernorm.weight", {h}, g + "attn_norm.weight"});
    t.push_back(
        {R::kMlpNorm, l, p + "post_attention_layernorm.weight", {h}, g + "ffn_norm.weight"});
    const std::string a = p + "self_attn.";
    t.push_back({R::kQ, l, a + "q_proj.weight", {q, h}, g + "attn_q.weight", kPairs});
    t.push_back({R::kK, l, a + "k_proj.weight", {kv, h}, g + "attn_k.weight", kPairs});
    t.push_back({R::kV, l, a + "v_proj.weight", {kv, h}, g + "attn_v.weight"});
    t.push_back({R::kAttnOut, l, a + "o_proj.weight", {h, q}, g + "attn_output.weight"});
    if (c.attention_bias) {
      t.push_back({R::kQBias, l, a + "q_proj.bias", {q}, g + "attn_q.bias", kPairs});
      t.push_back({R::kKBias, l, a + "k_proj.bias", {kv}, g + "attn_k.bias", kPairs});
      t.push_back({R::kVBias, l, a + "v_proj.bias", {kv}, g + "attn_v.bias"});
      t.push_back({R::kAttnOutBias, l, a + "o_proj.bias", {h}, g + "attn_output.bias"});
    }
    const std::string m = p + "mlp.";
    t.push_back({R::kGate, l, m + "gate_proj.weight", {ffn, h}, g + "ffn_gate.weight"});
    t.push_back({R::kUp, l, m + "up_proj.weight", {ffn, h}, g + "ffn_up.weight"});
    t.push_back({R::kDown, l, m + "down_proj.weight", {h, ffn}, g + "ffn_down.weight"});
    if (c.mlp_bias) {
      t.push_back({R::kGateBias, l, m + "gate_proj.bias", {ffn}, g + "ffn_gate.bias"});
      t.push_back({R::kUpBias, l, m + "up_proj.bias", {ffn}, g + "ffn_up.bias"});
      t.push_back({R::kDownBias, l, m + "down_proj.bias", {h}, g + "ffn_down.bias"});
    }
  }
  return t;
}

}  // namespace wc::llama
