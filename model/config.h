// A decoder model's configuration: which architecture (model/architecture.h) and its shape, read
// from a Hugging Face `config.json` by that architecture's parser, or from a named preset. One
// struct for every architecture, as llama.cpp keeps one hparams: the layout facts an
// architecture does not have keep their defaults (a Llama config is never multi_query).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/architecture.h"

namespace wc {

// How Falcon's fused query_key_value rows are laid out (HF FalconAttention._split_heads).
enum class QkvLayout {
  kGrouped,     // new_decoder_architecture: n_kv_heads groups of [q x (n_head/n_kv_heads), k, v]
  kMultiQuery,  // Falcon-7B multi_query: [q x n_head, k, v]
  kMultiHead,   // per head [q, k, v]
};

// The normalization every norm of the model uses.
enum class NormKind {
  kLayerNorm,  // (x - mean) / sqrt(var + eps) * w + b (Falcon)
  kRmsNorm,    // x / sqrt(mean(x^2) + eps) * w (Llama)
};

// HF's rope_scaling (modeling_rope_utils.py): how inv_freq is derived from rope_theta.
struct RopeScaling {
  enum class Kind { kNone, kLinear, kLlama3 };
  Kind kind = Kind::kNone;
  double factor = 1.0;                          // linear and llama3
  double low_freq_factor = 1.0;                 // llama3
  double high_freq_factor = 4.0;                // llama3
  int original_max_position_embeddings = 8192;  // llama3
  bool operator==(const RopeScaling& o) const {
    return kind == o.kind && factor == o.factor && low_freq_factor == o.low_freq_factor &&
           high_freq_factor == o.high_freq_factor &&
           original_max_position_embeddings == o.original_max_position_embeddings;
  }
};

struct ModelConfig {
  Architecture arch = Architecture::kFalcon;
  int hidden_size = 0;
  int n_head = 0;
  int n_kv_heads = 0;  // Falcon: grouped -> num_kv_heads; multi_query -> 1; else n_head
  int n_layers = 0;
  int vocab_size = 0;
  int ffn_hidden_size = 0;  // Falcon: default 4 * hidden_size; Llama: intermediate_size
  int max_position_embeddings = 2048;
  // Per-head width; 0: hidden_size / n_head (Llama's head_dim key may set another: Falcon3 256).
  int head_dim_override = 0;
  NormKind norm = NormKind::kLayerNorm;
  float norm_eps = 1e-5f;  // layer_norm_epsilon (Falcon), rms_norm_eps (Llama)
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int bos_token_id = 11;
  int eos_token_id = 11;
  // Whether config.json gave them (else LoadConfig looks beside it: model/generation_defaults.h).
  // Not part of ToJson.
  bool bos_token_id_given = true, eos_token_id_given = true;
  // Ids besides eos_token_id that end generation as it does, ascending: a GGUF vocabulary's
  // end-of-generation ids (llama.cpp's EOG set: EOT such as <|im_end|> or <|eot_id|>, EOM, ...;
  // tokenizer/gguf_tokenizer.h: FindGgufRoles). Empty for a checkpoint directory, whose
  // generation_config.json list of EOS ids gives only its first (model/generation_defaults.h). Not
  // part of ToJson.
  std::vector<int> end_token_ids;
  bool tie_word_embeddings = true;

  // Falcon's layout facts.
  bool new_decoder_architecture = false;
  bool multi_query = false;
  bool parallel_attn = true;  // Llama: false (sequential residuals)
  bool bias = false;          // every Falcon linear's bias
  bool alibi = false;         // Falcon-RW: ALiBi position bias instead of RoPE (attention/alibi.h)
  int num_ln_in_parallel_attn = 2;  // meaningful with new_decoder_architecture

  // Llama's layout facts.
  bool attention_bias = false;  // q/k/v/o_proj biases
  bool mlp_bias = false;        // gate/up/down_proj biases
  bool gated_mlp = false;       // SwiGLU: down(silu(gate(x)) * up(x)) instead of Falcon's GELU MLP

  // Whether sampling `id` ends generation: eos_token_id or one of end_token_ids.
  bool EndsGeneration(int id) const;
  int head_dim() const { return head_dim_override > 0 ? head_dim_override : hidden_size / n_head; }
  // Falcon: the fused QKV's layout and rows ((n_head + 2 * n_kv_heads) * head_dim).
  QkvLayout qkv_layout() const;
  int qkv_rows() const { return (n_head + 2 * n_kv_heads) * head_dim(); }
  // Falcon: ln_attn + ln_mlp (true) or one input_layernorm (false).
  bool two_layernorms() const { return new_decoder_architecture && num_ln_in_parallel_attn == 2; }
  // Whether each layer has a second norm before its MLP (Falcon's ln_mlp or
  // post_attention_layernorm, Llama's post_attention_layernorm).
  bool mlp_norm() const { return two_layernorms() || !parallel_attn; }
  // Total parameter count (embeddings counted once when tied): every tensor of the architecture's
  // table (model/tensor_table.h).
  int64_t n_params() const;

  // The layout in a few words, as `info` prints it (the architecture's own facts).
  std::string LayoutSummary() const;
  // A preset reshaped for `wormchat init` (--layers, --hidden, --heads, --kv-heads; 0 keeps the
  // preset's): the MLP keeps the preset's width ratio, a Falcon layout its KV-head rule. Throws
  // wc::Error naming --kv-heads for a count the layout cannot take. Not validated.
  ModelConfig Resized(int layers, int hidden, int heads, int kv_heads,
                      const std::string& preset) const;

  // Parses config.json as the architecture it names (model_type / architectures). Throws wc::Error
  // naming `source` and the key on a bad, missing or contradictory value.
  static ModelConfig FromJson(const nlohmann::json& j, const std::string& source);
  // The architecture's HF config keys, as written by `wormchat init` (loadable by HF's classes).
  nlohmann::json ToJson() const;
  // Throws wc::Error naming `source` if the shape is inconsistent.
  void Validate(const std::string& source) const;
};

// "one KV head", "multi-head" or "grouped KV heads, N query heads each".
std::string KvHeadsSummary(const ModelConfig& c);

// Reads DIR/config.json, or a GGUF file's keys when model_dir is one (model/gguf/gguf_config.h).
// Throws wc::Error naming the file on failure.
ModelConfig LoadConfig(const std::string& model_dir);

// Presets of every architecture: "falcon-40b" (the seed's RWConfig), "falcon-7b", "tiny" (the
// default model's shape), "falcon3-1b", "falcon3-7b", ... (PresetNames lists them).
ModelConfig PresetConfig(const std::string& name);
std::vector<std::string> PresetNames();

// The ranges every config is held to (parsers and Validate): far beyond Falcon-180B's shape
// (hidden 14848, 232 heads, 80 layers, ffn 59392, vocab 65024) and small enough that every
// derived size (qkv_rows, 4 * hidden, the parameter count, the weights' bytes) fits its type.
namespace config_limits {
constexpr int64_t kMaxHidden = 1 << 16, kMaxHeads = 1 << 12, kMaxLayers = 1 << 10,
                  kMaxVocab = 1 << 24, kMaxFfn = 1 << 20, kMaxPositions = 1 << 24,
                  kMaxHeadDim = 1024;
constexpr double kMaxEpsilon = 1.0, kMaxRopeTheta = 1e12, kMaxRopeFactor = 1e6;
}  // namespace config_limits

// What the architectures' parsers share: config.json's keys read with a range check, each error
// naming `src` and the key (model/config_keys.cpp).
namespace config_keys {
// The first present, non-null key among `names`, or nullptr (`found` names it).
const nlohmann::json* Find(const nlohmann::json& j, std::initializer_list<const char*> names,
                           std::string* found);
// An integer key in [min, max]; absent: *fallback, or an error when fallback is null.
int Int(const nlohmann::json& j, std::initializer_list<const char*> names, const std::string& src,
        const int* fallback, int64_t min = 0, int64_t max = int64_t{1} << 30);
bool Bool(const nlohmann::json& j, std::initializer_list<const char*> names, const std::string& src,
          bool fallback);
// A number key in (0, max].
double Number(const nlohmann::json& j, std::initializer_list<const char*> names,
              const std::string& src, double fallback, double max);
}  // namespace config_keys

}  // namespace wc
