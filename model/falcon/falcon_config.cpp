// Falcon's config.json (HF FalconConfig key names and defaults, or the RW-era names of seed 001:
// n_head, n_head_kv, n_layer, n_embed) and its presets.
#include "model/falcon/falcon.h"
#include "model/gguf/gguf_config.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc::falcon {

using nlohmann::json;
namespace K = config_keys;
namespace L = config_limits;

ModelConfig ParseConfig(const json& j, const std::string& src) {
  const bool alibi = K::Bool(j, {"alibi"}, src, false);
  // HF FalconConfig: rotary is `not alibi`; a config that says both contradicts itself.
  if (alibi && K::Bool(j, {"rotary"}, src, false))
    throw Error(Cat(src,
                    ": 'alibi': true and 'rotary': true contradict each other (ALiBi "
                    "replaces the rotary embedding)"));
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    throw Error(Cat(src, alibi ? ": 'rope_scaling' with 'alibi': true contradicts it (an ALiBi "
                                 "model has no rotary embedding to scale)"
                               : ": 'rope_scaling' is not supported; remove it or set it to null"));
  if (K::Bool(j, {"apply_residual_connection_post_layernorm"}, src, false))
    throw Error(Cat(src, ": 'apply_residual_connection_post_layernorm': true is not supported"));
  if (j.contains("activation") && j["activation"] != "gelu")
    throw Error(Cat(src, ": 'activation' ", j["activation"].dump(),
                    " is not supported; Falcon uses \"gelu\""));
  if (j.contains("head_dim") && !j["head_dim"].is_null())
    throw Error(Cat(src,
                    ": 'head_dim' is not a Falcon key; Falcon's heads are hidden_size / "
                    "num_attention_heads wide"));
  ModelConfig c;
  c.arch = Architecture::kFalcon;
  c.norm = NormKind::kLayerNorm;
  c.hidden_size = K::Int(j, {"hidden_size", "n_embed"}, src, nullptr, 1, L::kMaxHidden);
  c.n_head = K::Int(j, {"num_attention_heads", "n_head"}, src, nullptr, 1, L::kMaxHeads);
  c.n_layers = K::Int(j, {"num_hidden_layers", "n_layer"}, src, nullptr, 1, L::kMaxLayers);
  c.vocab_size = K::Int(j, {"vocab_size"}, src, nullptr, 1, L::kMaxVocab);
  c.new_decoder_architecture = K::Bool(j, {"new_decoder_architecture"}, src, false);
  c.multi_query = K::Bool(j, {"multi_query"}, src, true);  // HF FalconConfig default
  c.parallel_attn = K::Bool(j, {"parallel_attn"}, src, true);
  c.bias = K::Bool(j, {"bias"}, src, false);
  c.alibi = alibi;
  c.tie_word_embeddings = K::Bool(j, {"tie_word_embeddings"}, src, true);
  const int kv_default = c.n_head;
  const int kv = K::Int(j, {"num_kv_heads", "n_head_kv"}, src, &kv_default, 1, L::kMaxHeads);
  if (c.new_decoder_architecture)
    c.n_kv_heads = kv;
  else
    c.n_kv_heads = c.multi_query ? 1 : c.n_head;
  const int ffn_default = 4 * c.hidden_size;  // hidden_size <= 2^16
  c.ffn_hidden_size = K::Int(j, {"ffn_hidden_size"}, src, &ffn_default, 1, L::kMaxFfn);
  const int ln_default = 2;
  c.num_ln_in_parallel_attn = K::Int(j, {"num_ln_in_parallel_attn"}, src, &ln_default, 1, 2);
  c.norm_eps = static_cast<float>(K::Number(j, {"layer_norm_epsilon"}, src, 1e-5, L::kMaxEpsilon));
  c.rope_theta = K::Number(j, {"rope_theta"}, src, 10000.0, L::kMaxRopeTheta);
  const int pos_default = 2048;
  c.max_position_embeddings =
      K::Int(j, {"max_position_embeddings"}, src, &pos_default, 1, L::kMaxPositions);
  return c;
}

void Validate(const ModelConfig& c, const std::string& src) {
  if (c.hidden_size % c.n_head != 0)
    throw Error(Cat(src, ": hidden_size ", c.hidden_size,
                    " is not divisible by num_attention_heads ", c.n_head,
                    "; head_dim must be a whole number"));
  if (c.head_dim_override != 0)
    throw Error(Cat(src, ": Falcon's head_dim is hidden_size / num_attention_heads"));
  if (c.gated_mlp || c.norm != NormKind::kLayerNorm)
    throw Error(Cat(src, ": Falcon has LayerNorms and a GELU MLP"));
  if (c.new_decoder_architecture && c.num_ln_in_parallel_attn != 1 &&
      c.num_ln_in_parallel_attn != 2)
    throw Error(
        Cat(src, ": 'num_ln_in_parallel_attn' must be 1 or 2, got ", c.num_ln_in_parallel_attn));
  if (c.new_decoder_architecture && !c.parallel_attn && c.num_ln_in_parallel_attn == 2)
    throw Error(Cat(src,
                    ": new_decoder_architecture with parallel_attn false needs "
                    "num_ln_in_parallel_attn 1"));
  if (!c.new_decoder_architecture && c.n_kv_heads != (c.multi_query ? 1 : c.n_head))
    throw Error(Cat(src, ": num_kv_heads ", c.n_kv_heads, " needs new_decoder_architecture"));
}

std::string Layout(const ModelConfig& c) {
  const std::string residual =
      Cat(c.parallel_attn ? "parallel" : "sequential", c.alibi ? ", ALiBi" : ", RoPE");
  switch (c.qkv_layout()) {
    case QkvLayout::kGrouped:
      return Cat("new_decoder_architecture (", KvHeadsSummary(c), "), ", residual,
                 " attention + MLP");
    case QkvLayout::kMultiQuery:
      return Cat("multi_query (one KV head), ", residual, " attention + MLP");
    case QkvLayout::kMultiHead:
      return Cat("multi-head, ", residual, " attention + MLP");
  }
  return "";
}

json ToJson(const ModelConfig& c) {
  json j;
  j["model_type"] = "falcon";
  j["architectures"] = {"FalconForCausalLM"};
  j["hidden_size"] = c.hidden_size;
  j["num_attention_heads"] = c.n_head;
  j["num_kv_heads"] = c.n_kv_heads;
  j["num_hidden_layers"] = c.n_layers;
  j["vocab_size"] = c.vocab_size;
  j["ffn_hidden_size"] = c.ffn_hidden_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["new_decoder_architecture"] = c.new_decoder_architecture;
  j["multi_query"] = c.multi_query;
  j["parallel_attn"] = c.parallel_attn;
  j["bias"] = c.bias;
  j["alibi"] = c.alibi;
  if (c.new_decoder_architecture) j["num_ln_in_parallel_attn"] = c.num_ln_in_parallel_attn;
  j["layer_norm_epsilon"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  return j;
}

std::vector<std::string> PresetNames() {
  return {"falcon-40b", "falcon-7b", "falcon-rw-1b", "falcon-rw-7b", "tiny"};
}

std::optional<ModelConfig> Preset(const std::string& name) {
  ModelConfig c;
  c.arch = Architecture::kFalcon;
  if (name == "falcon-40b") {  // seed 001's RWConfig of tiiuae/falcon-40b-instruct
    c.hidden_size = 8192;
    c.n_head = 128;
    c.n_kv_heads = 8;
    c.n_layers = 60;
    c.vocab_size = 65024;
    c.new_decoder_architecture = true;
  } else if (name == "falcon-7b") {
    c.hidden_size = 4544;
    c.n_head = 71;
    c.n_kv_heads = 1;
    c.n_layers = 32;
    c.vocab_size = 65024;
    c.multi_query = true;
  } else if (name == "falcon-rw-1b" || name == "falcon-rw-7b") {  // tiiuae/falcon-rw-*
    const bool big = name == "falcon-rw-7b";
    c.hidden_size = big ? 4096 : 2048;
    c.n_head = big ? 64 : 32;
    c.n_kv_heads = c.n_head;
    c.n_layers = big ? 36 : 24;
    c.vocab_size = big ? 65024 : 50304;
    c.parallel_attn = false;
    c.bias = true;
    c.alibi = true;
    c.bos_token_id = big ? 11 : 1;
    c.eos_token_id = big ? 11 : 2;
  } else if (name == "tiny") {  // the default model's shape (assets/default-model)
    c.hidden_size = 512;
    c.n_head = 8;
    c.n_kv_heads = 2;
    c.n_layers = 3;
    c.vocab_size = 4096;
    c.new_decoder_architecture = true;
    c.max_position_embeddings = 512;
    c.bos_token_id = 1;
    c.eos_token_id = 2;
  } else {
    return std::nullopt;
  }
  c.ffn_hidden_size = name == "tiny" ? 2048 : 4 * c.hidden_size;
  return c;
}

}  // namespace wc::falcon

namespace wc::falcon {

// llama.cpp's LLM_ARCH_FALCON keys (convert_hf_to_gguf.py's FalconModel writes block_count,
// context_length, embedding_length, feed_forward_length, head_count, head_count_kv and
// layer_norm_epsilon). Its graph is the parallel RoPE layout without biases: one KV head and one
// norm is Falcon-7B (multi_query), more KV heads the new decoder architecture with attn_norm_2
// as Falcon-40B's second norm (ln_attn) where the file has it.
json GgufToJson(const GgufFile& g, const std::string& a) {
  namespace G = gguf_keys;
  const std::string src = g.path();
  json j = {{"model_type", "falcon"}, {"architectures", {"FalconForCausalLM"}}};
  const int64_t layers = G::Int(g, a + ".block_count", std::nullopt, 1, L::kMaxLayers);
  const int64_t hidden = G::Int(g, a + ".embedding_length", std::nullopt, 1, L::kMaxHidden);
  const int64_t heads =
      G::LayerInt(g, a + ".attention.head_count", std::nullopt, layers, 1, L::kMaxHeads);
  const int64_t kv = G::LayerInt(g, a + ".attention.head_count_kv", 1, layers, 1, L::kMaxHeads);
  if (hidden % heads != 0)
    throw Error(Cat(src, ": key '", a, ".embedding_length' ", hidden,
                    " is not divisible by the head count ", heads));
  for (const char* k :
       {".attention.key_length", ".attention.value_length", ".rope.dimension_count"})
    if (G::Int(g, a + k, hidden / heads, 1, L::kMaxHeadDim) != hidden / heads)
      throw Error(Cat(src, ": key '", a, k, "' differs from the head width ", hidden / heads,
                      "; Falcon's heads are embedding_length / head_count wide"));
  const bool two_norms = g.FindTensor("blk.0.attn_norm_2.weight") != nullptr;
  j["num_hidden_layers"] = layers;
  j["hidden_size"] = hidden;
  j["num_attention_heads"] = heads;
  if (kv == 1 && !two_norms) {
    j["multi_query"] = true;
    j["new_decoder_architecture"] = false;
  } else {
    j["new_decoder_architecture"] = true;
    j["num_kv_heads"] = kv;
    j["num_ln_in_parallel_attn"] = two_norms ? 2 : 1;
  }
  j["parallel_attn"] = true;
  j["bias"] = false;
  j["alibi"] = false;
  j["ffn_hidden_size"] =
      G::LayerInt(g, a + ".feed_forward_length", 4 * hidden, layers, 1, L::kMaxFfn);
  j["max_position_embeddings"] =
      G::Int(g, a + ".context_length", std::nullopt, 1, L::kMaxPositions);
  j["layer_norm_epsilon"] = static_cast<double>(static_cast<float>(
      G::Float(g, a + ".attention.layer_norm_epsilon", std::nullopt, L::kMaxEpsilon)));
  j["rope_theta"] = G::Float(g, a + ".rope.freq_base", 10000.0, L::kMaxRopeTheta);
  j["vocab_size"] = G::VocabSize(g, hidden);
  j["tie_word_embeddings"] = g.FindTensor("output.weight") == nullptr;
  G::TokenIds(g, j);
  return j;
}

}  // namespace wc::falcon
