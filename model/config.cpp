#include "model/config.h"

#include "model/generation_defaults.h"

#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

using nlohmann::json;

// Returns the first present key among `names`, or nullptr.
const json* Find(const json& j, std::initializer_list<const char*> names, std::string* found) {
  for (const char* n : names) {
    auto it = j.find(n);
    if (it != j.end() && !it->is_null()) {
      *found = n;
      return &*it;
    }
  }
  return nullptr;
}

// An integer key in [min, max] (the ranges in FalconConfig::Validate's table).
int GetInt(const json& j, std::initializer_list<const char*> names, const std::string& src,
           const int* fallback, int64_t min = 0, int64_t max = int64_t{1} << 30) {
  std::string key;
  const json* v = Find(j, names, &key);
  if (v == nullptr) {
    if (fallback != nullptr) return *fallback;
    throw Error(Cat(src, ": missing key '", *names.begin(), "'"));
  }
  // nlohmann keeps non-negative integers unsigned (and 2^64 - 1 does not fit int64_t); min >= 0.
  const bool in_range =
      v->is_number_unsigned()
          ? v->get<uint64_t>() >= static_cast<uint64_t>(min) &&
                v->get<uint64_t>() <= static_cast<uint64_t>(max)
          : v->is_number_integer() && v->get<int64_t>() >= min && v->get<int64_t>() <= max;
  if (!in_range)
    throw Error(Cat(src, ": key '", key, "' must be an integer in [", min, ", ", max, "], got ",
                    v->dump()));
  return static_cast<int>(v->get<int64_t>());
}

bool GetBool(const json& j, std::initializer_list<const char*> names, const std::string& src,
             bool fallback) {
  std::string key;
  const json* v = Find(j, names, &key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean())
    throw Error(Cat(src, ": key '", key, "' must be true or false, got ", v->dump()));
  return v->get<bool>();
}

// A number key in (0, max].
double GetNumber(const json& j, std::initializer_list<const char*> names, const std::string& src,
                 double fallback, double max) {
  std::string key;
  const json* v = Find(j, names, &key);
  if (v == nullptr) return fallback;
  if (!v->is_number() || !(v->get<double>() > 0) || !(v->get<double>() <= max))
    throw Error(Cat(src, ": key '", key, "' must be a number in (0, ", max, "], got ", v->dump()));
  return v->get<double>();
}

// The ranges every config is held to (FromJson and Validate): far beyond Falcon-180B's shape
// (hidden 14848, 232 heads, 80 layers, ffn 59392, vocab 65024) and small enough that every
// derived size (qkv_rows, 4 * hidden, the parameter count, the weights' bytes) fits its type.
constexpr int64_t kMaxHidden = 1 << 16, kMaxHeads = 1 << 12, kMaxLayers = 1 << 10,
                  kMaxVocab = 1 << 24, kMaxFfn = 1 << 20, kMaxPositions = 1 << 24;
constexpr double kMaxEpsilon = 1.0, kMaxRopeTheta = 1e12;

}  // namespace

QkvLayout FalconConfig::qkv_layout() const {
  if (new_decoder_architecture) return QkvLayout::kGrouped;
  return multi_query ? QkvLayout::kMultiQuery : QkvLayout::kMultiHead;
}

int64_t FalconConfig::n_params() const {
  const int64_t h = hidden_size;
  int64_t per_layer = static_cast<int64_t>(qkv_rows()) * h              // query_key_value
                      + h * h                                           // dense
                      + 2 * h * static_cast<int64_t>(ffn_hidden_size);  // MLP
  if (bias) per_layer += qkv_rows() + h + ffn_hidden_size + h;
  const int n_ln = two_layernorms() || !parallel_attn ? 2 : 1;
  per_layer += n_ln * 2 * h;
  int64_t total = per_layer * n_layers + static_cast<int64_t>(vocab_size) * h + 2 * h;
  if (!tie_word_embeddings) total += static_cast<int64_t>(vocab_size) * h;
  return total;
}

FalconConfig FalconConfig::FromJson(const json& j, const std::string& src) {
  if (!j.is_object()) throw Error(Cat(src, ": expected a JSON object"));
  if (GetBool(j, {"alibi"}, src, false))
    throw Error(Cat(src,
                    ": 'alibi': true (ALiBi position bias) is not supported; wormchat runs "
                    "RoPE Falcon models (7B/40B/180B layouts)"));
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    throw Error(Cat(src, ": 'rope_scaling' is not supported; remove it or set it to null"));
  if (GetBool(j, {"apply_residual_connection_post_layernorm"}, src, false))
    throw Error(Cat(src, ": 'apply_residual_connection_post_layernorm': true is not supported"));
  if (j.contains("activation") && j["activation"] != "gelu")
    throw Error(Cat(src, ": 'activation' ", j["activation"].dump(),
                    " is not supported; Falcon "
                    "uses \"gelu\""));
  FalconConfig c;
  c.hidden_size = GetInt(j, {"hidden_size", "n_embed"}, src, nullptr, 1, kMaxHidden);
  c.n_head = GetInt(j, {"num_attention_heads", "n_head"}, src, nullptr, 1, kMaxHeads);
  c.n_layers = GetInt(j, {"num_hidden_layers", "n_layer"}, src, nullptr, 1, kMaxLayers);
  c.vocab_size = GetInt(j, {"vocab_size"}, src, nullptr, 1, kMaxVocab);
  c.new_decoder_architecture = GetBool(j, {"new_decoder_architecture"}, src, false);
  c.multi_query = GetBool(j, {"multi_query"}, src, true);  // HF FalconConfig default
  c.parallel_attn = GetBool(j, {"parallel_attn"}, src, true);
  c.bias = GetBool(j, {"bias"}, src, false);
  c.tie_word_embeddings = GetBool(j, {"tie_word_embeddings"}, src, true);
  const int kv_default = c.n_head;
  const int kv = GetInt(j, {"num_kv_heads", "n_head_kv"}, src, &kv_default, 1, kMaxHeads);
  if (c.new_decoder_architecture)
    c.n_kv_heads = kv;
  else
    c.n_kv_heads = c.multi_query ? 1 : c.n_head;
  const int ffn_default = 4 * c.hidden_size;  // hidden_size <= 2^16
  c.ffn_hidden_size = GetInt(j, {"ffn_hidden_size"}, src, &ffn_default, 1, kMaxFfn);
  const int ln_default = 2;
  c.num_ln_in_parallel_attn = GetInt(j, {"num_ln_in_parallel_attn"}, src, &ln_default, 1, 2);
  c.layer_norm_epsilon =
      static_cast<float>(GetNumber(j, {"layer_norm_epsilon"}, src, 1e-5, kMaxEpsilon));
  c.rope_theta = GetNumber(j, {"rope_theta"}, src, 10000.0, kMaxRopeTheta);
  const int pos_default = 2048;
  c.max_position_embeddings =
      GetInt(j, {"max_position_embeddings"}, src, &pos_default, 1, kMaxPositions);
  const int tok_default = 11;
  c.bos_token_id_given = j.contains("bos_token_id") && !j["bos_token_id"].is_null();
  c.eos_token_id_given = j.contains("eos_token_id") && !j["eos_token_id"].is_null();
  c.bos_token_id = GetInt(j, {"bos_token_id"}, src, &tok_default, 0, kMaxVocab);
  c.eos_token_id = GetInt(j, {"eos_token_id"}, src, &tok_default, 0, kMaxVocab);
  c.Validate(src);
  return c;
}

void FalconConfig::Validate(const std::string& src) const {
  auto need_range = [&](int64_t v, const char* key, int64_t max) {
    if (v < 1 || v > max) throw Error(Cat(src, ": '", key, "' must be in [1, ", max, "], got ", v));
  };
  need_range(hidden_size, "hidden_size", kMaxHidden);
  need_range(n_head, "num_attention_heads", kMaxHeads);
  need_range(n_kv_heads, "num_kv_heads", kMaxHeads);
  need_range(n_layers, "num_hidden_layers", kMaxLayers);
  need_range(vocab_size, "vocab_size", kMaxVocab);
  need_range(ffn_hidden_size, "ffn_hidden_size", kMaxFfn);
  need_range(max_position_embeddings, "max_position_embeddings", kMaxPositions);
  if (!(layer_norm_epsilon > 0 && layer_norm_epsilon <= kMaxEpsilon))
    throw Error(Cat(src, ": 'layer_norm_epsilon' must be in (0, 1], got ", layer_norm_epsilon));
  if (!(rope_theta > 0 && rope_theta <= kMaxRopeTheta))
    throw Error(Cat(src, ": 'rope_theta' must be in (0, 1e12], got ", rope_theta));
  if (hidden_size % n_head != 0)
    throw Error(Cat(src, ": hidden_size ", hidden_size, " is not divisible by num_attention_heads ",
                    n_head, "; head_dim must be a whole number"));
  if (n_head % n_kv_heads != 0)
    throw Error(Cat(src, ": num_attention_heads ", n_head, " is not divisible by num_kv_heads ",
                    n_kv_heads, "; each KV head must serve the same number of query heads"));
  if (head_dim() % 2 != 0 || head_dim() > 1024)
    throw Error(Cat(src, ": head_dim ", head_dim(),
                    " (hidden_size / num_attention_heads) must be "
                    "even and at most 1024 for RoPE"));
  if (new_decoder_architecture && num_ln_in_parallel_attn != 1 && num_ln_in_parallel_attn != 2)
    throw Error(
        Cat(src, ": 'num_ln_in_parallel_attn' must be 1 or 2, got ", num_ln_in_parallel_attn));
  if (new_decoder_architecture && !parallel_attn && num_ln_in_parallel_attn == 2)
    throw Error(Cat(src,
                    ": new_decoder_architecture with parallel_attn false needs "
                    "num_ln_in_parallel_attn 1"));
  if (bos_token_id < 0 || eos_token_id < 0 || bos_token_id >= vocab_size ||
      eos_token_id >= vocab_size)
    throw Error(Cat(src, ": bos_token_id ", bos_token_id, " / eos_token_id ", eos_token_id,
                    " must be below vocab_size ", vocab_size));
}

nlohmann::json FalconConfig::ToJson() const {
  json j;
  j["model_type"] = "falcon";
  j["architectures"] = {"FalconForCausalLM"};
  j["hidden_size"] = hidden_size;
  j["num_attention_heads"] = n_head;
  j["num_kv_heads"] = n_kv_heads;
  j["num_hidden_layers"] = n_layers;
  j["vocab_size"] = vocab_size;
  j["ffn_hidden_size"] = ffn_hidden_size;
  j["max_position_embeddings"] = max_position_embeddings;
  j["new_decoder_architecture"] = new_decoder_architecture;
  j["multi_query"] = multi_query;
  j["parallel_attn"] = parallel_attn;
  j["bias"] = bias;
  j["alibi"] = false;
  if (new_decoder_architecture) j["num_ln_in_parallel_attn"] = num_ln_in_parallel_attn;
  j["layer_norm_epsilon"] = layer_norm_epsilon;
  j["rope_theta"] = rope_theta;
  j["bos_token_id"] = bos_token_id;
  j["eos_token_id"] = eos_token_id;
  j["tie_word_embeddings"] = tie_word_embeddings;
  return j;
}

FalconConfig LoadConfig(const std::string& model_dir) {
  if (!DirExists(model_dir)) throw Error(Cat(model_dir, ": model directory not found"));
  const std::string path = JoinPath(model_dir, "config.json");
  const std::string problem = FileProblem(path);
  if (problem == "missing")
    throw Error(Cat(path, ": missing (a Falcon model directory needs config.json)"));
  if (!problem.empty()) throw Error(Cat(path, ": ", problem));
  // Size and depth capped; syntax errors and numbers out of range (1e400) name the file and key.
  FalconConfig c = FalconConfig::FromJson(ReadJsonFile(path), path);
  if (c.bos_token_id_given && c.eos_token_id_given) return c;
  // HF's order: config.json, then generation_config.json, tokenizer_config.json,
  // special_tokens_map.json.
  const GenerationDefaults d =
      ReadGenerationDefaults(model_dir, !c.bos_token_id_given, !c.eos_token_id_given);
  auto take = [&](bool given, const std::optional<int>& id, const std::string& source, int* out) {
    if (given || !id) return;
    if (*id < 0 || *id >= c.vocab_size)
      throw Error(
          Cat(source, ": token id ", *id, " is not below ", path, "'s vocab_size ", c.vocab_size));
    *out = *id;
  };
  take(c.bos_token_id_given, d.bos_token_id, d.bos_source, &c.bos_token_id);
  take(c.eos_token_id_given, d.eos_token_id, d.eos_source, &c.eos_token_id);
  return c;
}

FalconConfig PresetConfig(const std::string& name) {
  FalconConfig c;
  if (name == "falcon-40b") {  // seed 001's RWConfig of tiiuae/falcon-40b-instruct
    c.hidden_size = 8192;
    c.n_head = 128;
    c.n_kv_heads = 8;
    c.n_layers = 60;
    c.vocab_size = 65024;
    c.new_decoder_architecture = true;
    c.parallel_attn = true;
    c.bias = false;
    c.bos_token_id = c.eos_token_id = 11;
  } else if (name == "falcon-7b") {
    c.hidden_size = 4544;
    c.n_head = 71;
    c.n_kv_heads = 1;
    c.n_layers = 32;
    c.vocab_size = 65024;
    c.multi_query = true;
    c.parallel_attn = true;
    c.bias = false;
    c.bos_token_id = c.eos_token_id = 11;
  } else if (name == "tiny") {  // the default model's shape (assets/default-model)
    c.hidden_size = 512;
    c.n_head = 8;
    c.n_kv_heads = 2;
    c.n_layers = 3;
    c.vocab_size = 4096;
    c.new_decoder_architecture = true;
    c.parallel_attn = true;
    c.bias = false;
    c.max_position_embeddings = 512;
    c.bos_token_id = 1;
    c.eos_token_id = 2;
  } else {
    std::string names;
    for (const auto& n : PresetNames()) names += (names.empty() ? "" : ", ") + n;
    throw Error(Cat("unknown preset '", name, "'; choose one of: ", names));
  }
  c.ffn_hidden_size = name == "tiny" ? 2048 : 4 * c.hidden_size;
  c.Validate(Cat("preset ", name));
  return c;
}

std::vector<std::string> PresetNames() {
  return {"falcon-40b", "falcon-7b", "tiny"};
}

}  // namespace wc
