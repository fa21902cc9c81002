#include "model/config.h"

#include <algorithm>

#include "model/architecture_ops.h"
#include "model/generation_defaults.h"
#include "model/gguf/gguf_config.h"
#include "model/tensor_table.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {

namespace L = config_limits;

QkvLayout ModelConfig::qkv_layout() const {
  if (new_decoder_architecture) return QkvLayout::kGrouped;
  return multi_query ? QkvLayout::kMultiQuery : QkvLayout::kMultiHead;
}

bool ModelConfig::EndsGeneration(int id) const {
  return id == eos_token_id || std::binary_search(end_token_ids.begin(), end_token_ids.end(), id);
}

int64_t ModelConfig::n_params() const {
  int64_t total = 0;
  for (const TensorEntry& e : ModelTensors(*this)) {
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    total += n;
  }
  return total;
}

ModelConfig ModelConfig::FromJson(const nlohmann::json& j, const std::string& src) {
  if (!j.is_object()) throw Error(Cat(src, ": expected a JSON object"));
  const Architecture arch = DetectArchitecture(j, src);
  ModelConfig c = OpsOf(arch).parse(j, src);
  c.bos_token_id_given = j.contains("bos_token_id") && !j["bos_token_id"].is_null();
  c.eos_token_id_given = j.contains("eos_token_id") && !j["eos_token_id"].is_null();
  const int tok_default = c.bos_token_id;
  c.bos_token_id = config_keys::Int(j, {"bos_token_id"}, src, &tok_default, 0, L::kMaxVocab);
  const int eos_default = c.eos_token_id;
  c.eos_token_id = config_keys::Int(j, {"eos_token_id"}, src, &eos_default, 0, L::kMaxVocab);
  c.Validate(src);
  return c;
}

void ModelConfig::Validate(const std::string& src) const {
  auto need_range = [&](int64_t v, const char* key, int64_t max) {
    if (v < 1 || v > max) throw Error(Cat(src, ": '", key, "' must be in [1, ", max, "], got ", v));
  };
  need_range(hidden_size, "hidden_size", L::kMaxHidden);
  need_range(n_head, "num_attention_heads", L::kMaxHeads);
  need_range(n_kv_heads, "num_kv_heads", L::kMaxHeads);
  need_range(n_layers, "num_hidden_layers", L::kMaxLayers);
  need_range(vocab_size, "vocab_size", L::kMaxVocab);
  need_range(ffn_hidden_size, "ffn_hidden_size", L::kMaxFfn);
  need_range(max_position_embeddings, "max_position_embeddings", L::kMaxPositions);
  if (!(norm_eps > 0 && norm_eps <= L::kMaxEpsilon))
    throw Error(Cat(src, ": the norm's epsilon must be in (0, 1], got ", norm_eps));
  if (!(rope_theta > 0 && rope_theta <= L::kMaxRopeTheta))
    throw Error(Cat(src, ": 'rope_theta' must be in (0, 1e12], got ", rope_theta));
  OpsOf(arch).validate(*this, src);
  if (n_head % n_kv_heads != 0)
    throw Error(Cat(src, ": num_attention_heads ", n_head, " is not divisible by ",
                    arch == Architecture::kLlama ? "num_key_value_heads " : "num_kv_heads ",
                    n_kv_heads, "; each KV head must serve the same number of query heads"));
  if (head_dim() % 2 != 0 || head_dim() > L::kMaxHeadDim)
    throw Error(Cat(src, ": head_dim ", head_dim(), " must be even and at most ", L::kMaxHeadDim,
                    " for RoPE"));
  if (int64_t{n_head} * head_dim() > L::kMaxHidden * 4)
    throw Error(Cat(src, ": num_attention_heads x head_dim ", int64_t{n_head} * head_dim(),
                    " is beyond ", L::kMaxHidden * 4));
  if (bos_token_id < 0 || eos_token_id < 0 || bos_token_id >= vocab_size ||
      eos_token_id >= vocab_size)
    throw Error(Cat(src, ": bos_token_id ", bos_token_id, " / eos_token_id ", eos_token_id,
                    " must be below vocab_size ", vocab_size));
}

std::string KvHeadsSummary(const ModelConfig& c) {
  if (c.n_kv_heads == 1) return "one KV head";
  if (c.n_kv_heads == c.n_head) return "multi-head";
  return Cat("grouped KV heads, ", c.n_head / c.n_kv_heads, " query heads each");
}

std::string ModelConfig::LayoutSummary() const {
  return OpsOf(arch).layout(*this);
}

ModelConfig ModelConfig::Resized(int layers, int hidden, int heads, int kv_heads,
                                 const std::string& preset) const {
  ModelConfig c = *this;
  if (layers > 0) c.n_layers = layers;
  if (hidden > 0) {  // the MLP keeps the preset's ratio (Falcon's 4x; Falcon3-7B's 7.5x)
    const int64_t ffn = int64_t{c.ffn_hidden_size} * hidden / c.hidden_size;
    c.ffn_hidden_size = static_cast<int>(std::max<int64_t>(32, (ffn + 31) / 32 * 32));
    c.hidden_size = hidden;
  }
  if (heads > 0) c.n_head = heads;
  // Falcon's multi-query and multi-head layouts fix the KV heads (1, or one per query head).
  const bool fixed_kv = arch == Architecture::kFalcon && !new_decoder_architecture;
  if (kv_heads > 0) {
    if (fixed_kv && kv_heads != c.n_kv_heads)
      throw Error(Cat("--kv-heads: preset ", preset, " has a fixed number of KV heads (",
                      c.n_kv_heads, "); use a new_decoder_architecture preset such as falcon-40b"));
    c.n_kv_heads = kv_heads;
  } else if (fixed_kv && c.qkv_layout() == QkvLayout::kMultiHead) {
    c.n_kv_heads = c.n_head;
  }
  return c;
}

nlohmann::json ModelConfig::ToJson() const {
  return OpsOf(arch).to_json(*this);
}

ModelConfig LoadConfig(const std::string& model_dir) {
  if (IsGgufModel(model_dir)) return ConfigFromGguf(*OpenGgufFile(model_dir));
  if (FileExists(model_dir)) throw Error(Cat(model_dir, ": not a model directory or a GGUF file"));
  if (!DirExists(model_dir)) throw Error(Cat(model_dir, ": model directory not found"));
  const std::string path = JoinPath(model_dir, "config.json");
  const std::string problem = FileProblem(path);
  if (problem == "missing")
    throw Error(Cat(path, ": missing (a model directory needs config.json)"));
  if (!problem.empty()) throw Error(Cat(path, ": ", problem));
  // Size and depth capped; syntax errors and numbers out of range (1e400) name the file and key.
  ModelConfig c = ModelConfig::FromJson(ReadJsonFile(path), path);
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

ModelConfig PresetConfig(const std::string& name) {
  for (const ArchitectureInfo& a : Architectures())
    if (std::optional<ModelConfig> c = OpsOf(a.arch).preset(name)) {
      c->Validate(Cat("preset ", name));
      return *c;
    }
  std::string names;
  for (const auto& n : PresetNames()) names += (names.empty() ? "" : ", ") + n;
  throw Error(Cat("unknown preset '", name, "'; choose one of: ", names));
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const ArchitectureInfo& a : Architectures())
    for (const std::string& n : OpsOf(a.arch).preset_names()) names.push_back(n);
  return names;
}

}  // namespace wc
