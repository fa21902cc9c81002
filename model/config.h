// The Falcon model configuration, read from a Hugging Face `config.json` (FalconConfig key names or
// the RW-era names of the seed: n_head, n_head_kv, n_layer, n_embed), or from a named preset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wc {

// How the fused query_key_value rows are laid out (HF FalconAttention._split_heads).
enum class QkvLayout {
  kGrouped,     // new_decoder_architecture: n_kv_heads groups of [q x (n_head/n_kv_heads), k, v]
  kMultiQuery,  // Falcon-7B multi_query: [q x n_head, k, v]
  kMultiHead,   // per head [q, k, v]
};

struct FalconConfig {
  int hidden_size = 0;
  int n_head = 0;
  int n_kv_heads = 0;  // effective: grouped -> num_kv_heads; multi_query -> 1; else n_head
  int n_layers = 0;
  int vocab_size = 0;
  int ffn_hidden_size = 0;  // default 4 * hidden_size
  int max_position_embeddings = 2048;
  bool new_decoder_architecture = false;
  bool multi_query = false;
  bool parallel_attn = true;
  bool bias = false;
  int num_ln_in_parallel_attn = 2;  // meaningful with new_decoder_architecture
  float layer_norm_epsilon = 1e-5f;
  double rope_theta = 10000.0;
  int bos_token_id = 11;
  int eos_token_id = 11;
  // Whether config.json gave them (else LoadConfig looks beside it: model/generation_defaults.h).
  // Not part of ToJson.
  bool bos_token_id_given = true, eos_token_id_given = true;
  bool tie_word_embeddings = true;

  int head_dim() const { return hidden_size / n_head; }
  QkvLayout qkv_layout() const;
  // Rows of query_key_value.weight: (n_head + 2 * n_kv_heads) * head_dim (multi-head: 3 * hidden).
  int qkv_rows() const { return (n_head + 2 * n_kv_heads) * head_dim(); }
  // ln_attn + ln_mlp (true) or one input_layernorm (false).
  bool two_layernorms() const { return new_decoder_architecture && num_ln_in_parallel_attn == 2; }
  // Total parameter count (embeddings counted once when tied).
  int64_t n_params() const;

  // Parses HF/RW keys. Throws wc::Error naming `source` and the key on a bad or missing value.
  static FalconConfig FromJson(const nlohmann::json& j, const std::string& source);
  // HF FalconConfig keys, as written by `wormchat init`.
  nlohmann::json ToJson() const;
  // Throws wc::Error naming `source` if the shape is inconsistent.
  void Validate(const std::string& source) const;
};

// Reads DIR/config.json. Throws wc::Error naming the file on failure.
FalconConfig LoadConfig(const std::string& model_dir);

// Presets: "falcon-40b" (the seed's RWConfig), "falcon-7b", "tiny" (the default model's shape).
FalconConfig PresetConfig(const std::string& name);
std::vector<std::string> PresetNames();

}  // namespace wc
