// Llama's config.json (HF LlamaConfig key names and defaults, configuration_llama.py) and the
// Falcon3 presets (tiiuae/Falcon3-*'s published configs).
#include <cmath>

#include "model/gguf/gguf_config.h"
#include "model/llama/llama.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc::llama {

using nlohmann::json;
namespace K = config_keys;
namespace L = config_limits;

namespace {

// rope_scaling (or transformers 5's rope_parameters): null, "default", "linear" or "llama3".
RopeScaling ParseRopeScaling(const json& j, const char* key, const std::string& src) {
  RopeScaling s;
  if (!j.is_object())
    throw Error(Cat(src, ": key '", key, "' must be null or an object, got ", j.dump()));
  std::string type_key;
  const json* type = K::Find(j, {"rope_type", "type"}, &type_key);
  if (type == nullptr || !type->is_string())
    throw Error(Cat(src, ": key '", key, "' needs a 'rope_type' string"));
  const std::string kind = type->get<std::string>();
  const std::string where = Cat(src, ": ", key);
  if (kind == "default") return s;
  if (kind == "linear") {
    s.kind = RopeScaling::Kind::kLinear;
    s.factor = K::Number(j, {"factor"}, where, 0.0, L::kMaxRopeFactor);
    if (s.factor == 0.0) throw Error(Cat(where, ": missing key 'factor'"));
    return s;
  }
  if (kind == "llama3") {
    s.kind = RopeScaling::Kind::kLlama3;
    for (const char* k : {"factor", "low_freq_factor", "high_freq_factor"})
      if (!j.contains(k)) throw Error(Cat(where, ": missing key '", k, "' (rope_type llama3)"));
    s.factor = K::Number(j, {"factor"}, where, 1.0, L::kMaxRopeFactor);
    s.low_freq_factor = K::Number(j, {"low_freq_factor"}, where, 1.0, L::kMaxRopeFactor);
    s.high_freq_factor = K::Number(j, {"high_freq_factor"}, where, 4.0, L::kMaxRopeFactor);
    s.original_max_position_embeddings =
        K::Int(j, {"original_max_position_embeddings"}, where, nullptr, 1, L::kMaxPositions);
    if (!(s.low_freq_factor < s.high_freq_factor))
      throw Error(Cat(where, ": low_freq_factor ", s.low_freq_factor,
                      " must be below high_freq_factor ", s.high_freq_factor));
    return s;
  }
  throw Error(Cat(where, ".", type_key, " \"", kind,
                  "\" is not supported; wormchat runs null, \"linear\" and \"llama3\" rope "
                  "scaling"));
}

}  // namespace

ModelConfig ParseConfig(const json& j, const std::string& src) {
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    throw Error(Cat(src, ": 'hidden_act' ", j["hidden_act"].dump(),
                    " is not supported; the Llama layout uses \"silu\""));
  ModelConfig c;
  c.arch = Architecture::kLlama;
  c.norm = NormKind::kRmsNorm;
  c.parallel_attn = false;
  c.gated_mlp = true;
  // HF LlamaConfig's defaults (the 7B of 2023) for every key a config omits.
  const int d_hidden = 4096, d_ffn = 11008, d_layers = 32, d_heads = 32, d_vocab = 32000;
  c.hidden_size = K::Int(j, {"hidden_size"}, src, &d_hidden, 1, L::kMaxHidden);
  c.ffn_hidden_size = K::Int(j, {"intermediate_size"}, src, &d_ffn, 1, L::kMaxFfn);
  c.n_layers = K::Int(j, {"num_hidden_layers"}, src, &d_layers, 1, L::kMaxLayers);
  c.n_head = K::Int(j, {"num_attention_heads"}, src, &d_heads, 1, L::kMaxHeads);
  c.n_kv_heads = K::Int(j, {"num_key_value_heads"}, src, &c.n_head, 1, L::kMaxHeads);
  c.vocab_size = K::Int(j, {"vocab_size"}, src, &d_vocab, 1, L::kMaxVocab);
  if (!j.contains("head_dim") && c.hidden_size % c.n_head != 0)
    throw Error(Cat(src, ": hidden_size ", c.hidden_size,
                    " is not divisible by num_attention_heads ", c.n_head,
                    ", and there is no head_dim to say how wide the heads are"));
  if (j.contains("partial_rotary_factor") && !j["partial_rotary_factor"].is_null() &&
      j["partial_rotary_factor"] != 1 && j["partial_rotary_factor"] != 1.0)
    throw Error(Cat(src, ": 'partial_rotary_factor' ", j["partial_rotary_factor"].dump(),
                    " is not supported; wormchat rotates the whole head"));
  const int d_head_dim = c.hidden_size / c.n_head;
  const int head_dim = K::Int(j, {"head_dim"}, src, &d_head_dim, 1, L::kMaxHeadDim);
  c.head_dim_override = head_dim;
  const int d_pos = 2048;
  c.max_position_embeddings =
      K::Int(j, {"max_position_embeddings"}, src, &d_pos, 1, L::kMaxPositions);
  c.norm_eps = static_cast<float>(K::Number(j, {"rms_norm_eps"}, src, 1e-6, L::kMaxEpsilon));
  c.attention_bias = K::Bool(j, {"attention_bias"}, src, false);
  c.mlp_bias = K::Bool(j, {"mlp_bias"}, src, false);
  c.tie_word_embeddings = K::Bool(j, {"tie_word_embeddings"}, src, false);
  c.rope_theta = K::Number(j, {"rope_theta"}, src, 10000.0, L::kMaxRopeTheta);
  const bool has_scaling = j.contains("rope_scaling") && !j["rope_scaling"].is_null();
  if (has_scaling) c.rope_scaling = ParseRopeScaling(j["rope_scaling"], "rope_scaling", src);
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    const json& p = j["rope_parameters"];
    if (has_scaling) throw Error(Cat(src, ": give 'rope_scaling' or 'rope_parameters', not both"));
    c.rope_scaling = ParseRopeScaling(p, "rope_parameters", src);
    c.rope_theta =
        K::Number(p, {"rope_theta"}, Cat(src, ": rope_parameters"), c.rope_theta, L::kMaxRopeTheta);
  }
  // LlamaConfig's defaults; ModelConfig::FromJson reads the keys themselves, as for every
  // architecture.
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

void Validate(const ModelConfig& c, const std::string& src) {
  if (c.head_dim_override == 0)
    throw Error(Cat(src,
                    ": the Llama layout needs head_dim (hidden_size / num_attention_heads "
                    "when config.json has no head_dim)"));
  if (!c.gated_mlp || c.new_decoder_architecture || c.multi_query || c.parallel_attn ||
      c.norm != NormKind::kRmsNorm || c.bias)
    throw Error(Cat(src,
                    ": the Llama layout has sequential residuals, RMSNorm and no Falcon "
                    "bias"));
}

std::string Layout(const ModelConfig& c) {
  std::string rope = Cat("rope_theta ", c.rope_theta);
  if (c.rope_scaling.kind == RopeScaling::Kind::kLinear)
    rope += Cat(", linear scaling x", c.rope_scaling.factor);
  if (c.rope_scaling.kind == RopeScaling::Kind::kLlama3)
    rope += Cat(", llama3 scaling x", c.rope_scaling.factor);
  return Cat(KvHeadsSummary(c), ", RMSNorm, SwiGLU, ", rope,
             c.tie_word_embeddings ? ", tied" : ", untied", " LM head");
}

json ToJson(const ModelConfig& c) {
  json j;
  j["model_type"] = "llama";
  j["architectures"] = {"LlamaForCausalLM"};
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.ffn_hidden_size;
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_head;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim();
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["hidden_act"] = "silu";
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  const RopeScaling& s = c.rope_scaling;
  switch (s.kind) {
    case RopeScaling::Kind::kNone:
      j["rope_scaling"] = nullptr;
      break;
    case RopeScaling::Kind::kLinear:
      j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", s.factor}};
      break;
    case RopeScaling::Kind::kLlama3:
      j["rope_scaling"] = {
          {"rope_type", "llama3"},
          {"factor", s.factor},
          {"low_freq_factor", s.low_freq_factor},
          {"high_freq_factor", s.high_freq_factor},
          {"original_max_position_embeddings", s.original_max_position_embeddings}};
      break;
  }
  j["attention_bias"] = c.attention_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  return j;
}

std::vector<std::string> PresetNames() {
  return {"falcon3-1b", "falcon3-7b"};
}

std::optional<ModelConfig> Preset(const std::string& name) {
  json j = {{"model_type", "llama"}, {"head_dim", 256},      {"rope_theta", 1000042},
            {"rms_norm_eps", 1e-6},  {"vocab_size", 131072}, {"tie_word_embeddings", false},
            {"bos_token_id", 11},    {"eos_token_id", 11}};
  if (name == "falcon3-1b") {  // tiiuae/Falcon3-1B-Base
    j.update({{"hidden_size", 2048},
              {"intermediate_size", 8192},
              {"num_hidden_layers", 18},
              {"num_attention_heads", 8},
              {"num_key_value_heads", 4},
              {"max_position_embeddings", 8192}});
  } else if (name == "falcon3-7b") {  // tiiuae/Falcon3-7B-Base
    j.update({{"hidden_size", 3072},
              {"intermediate_size", 23040},
              {"num_hidden_layers", 28},
              {"num_attention_heads", 12},
              {"num_key_value_heads", 4},
              {"max_position_embeddings", 32768}});
  } else {
    return std::nullopt;
  }
  return ModelConfig::FromJson(j, Cat("preset ", name));
}

}  // namespace wc::llama

namespace wc::llama {

// llama.cpp's LLM_ARCH_LLAMA keys (llama-model.cpp load_hparams; convert_hf_to_gguf.py's
// LlamaModel writes them from the HF keys named here).
json GgufToJson(const GgufFile& g, const std::string& a) {
  namespace G = gguf_keys;
  const std::string src = g.path();
  if (G::Int(g, a + ".expert_count", 0, 0, int64_t{1} << 20) > 0)
    throw Error(
        Cat(src, ": key '", a, ".expert_count' is above 0: wormchat runs no mixture of experts"));
  if (g.FindTensor("rope_freqs.weight") != nullptr)
    throw Error(Cat(src,
                    ": tensor 'rope_freqs.weight' (llama3 rope scaling as per-frequency "
                    "factors) is not supported from GGUF; use the Hugging Face checkpoint"));
  json j = {{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}};
  const int64_t layers = G::Int(g, a + ".block_count", std::nullopt, 1, L::kMaxLayers);
  const int64_t hidden = G::Int(g, a + ".embedding_length", std::nullopt, 1, L::kMaxHidden);
  const int64_t heads =
      G::LayerInt(g, a + ".attention.head_count", std::nullopt, layers, 1, L::kMaxHeads);
  const std::optional<int64_t> even_width =
      hidden % heads == 0 ? std::optional<int64_t>(hidden / heads) : std::nullopt;
  const int64_t key_len = G::Int(g, a + ".attention.key_length", even_width, 1, L::kMaxHeadDim);
  const std::string value_key = a + ".attention.value_length";
  if (G::Int(g, value_key, key_len, 1, L::kMaxHeadDim) != key_len)
    throw Error(Cat(src, ": key '", value_key, "' differs from ", a, ".attention.key_length ",
                    key_len,
                    "; the Llama layout's K and V heads are "
                    "one width"));
  const std::string rot_key = a + ".rope.dimension_count";
  if (G::Int(g, rot_key, key_len, 1, L::kMaxHeadDim) != key_len)
    throw Error(Cat(src, ": key '", rot_key, "' differs from the head width ", key_len,
                    "; wormchat rotates the whole head"));
  j["num_hidden_layers"] = layers;
  j["hidden_size"] = hidden;
  j["num_attention_heads"] = heads;
  j["num_key_value_heads"] =
      G::LayerInt(g, a + ".attention.head_count_kv", heads, layers, 1, L::kMaxHeads);
  j["head_dim"] = key_len;
  j["intermediate_size"] =
      G::LayerInt(g, a + ".feed_forward_length", std::nullopt, layers, 1, L::kMaxFfn);
  j["max_position_embeddings"] =
      G::Int(g, a + ".context_length", std::nullopt, 1, L::kMaxPositions);
  j["rms_norm_eps"] = static_cast<double>(static_cast<float>(
      G::Float(g, a + ".attention.layer_norm_rms_epsilon", std::nullopt, L::kMaxEpsilon)));
  j["rope_theta"] = G::Float(g, a + ".rope.freq_base", 10000.0, L::kMaxRopeTheta);
  // rope.scaling.type (llama.cpp's default "linear") with factor (or the older scale_linear);
  // a factor of 0 or 1 scales nothing.
  const std::string type_key = a + ".rope.scaling.type";
  const std::string type = g.Find(type_key) != nullptr ? g.String(type_key) : "linear";
  double factor = 1.0;
  for (const std::string& k : {a + ".rope.scaling.factor", a + ".rope.scale_linear"})
    if (g.Find(k) != nullptr) {
      factor = g.Float(k);
      if (!(factor >= 0 && factor <= L::kMaxRopeFactor))
        throw Error(Cat(src, ": key '", k, "' is ", factor, ", expected 0..", L::kMaxRopeFactor));
      break;
    }
  if (type != "none" && factor != 0.0 && factor != 1.0) {
    if (type != "linear")
      throw Error(Cat(src, ": key '", type_key, "' is \"", Printable(type),
                      "\"; wormchat runs none and linear rope scaling from GGUF"));
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", factor}};
  }
  j["vocab_size"] = G::VocabSize(g, hidden);
  j["tie_word_embeddings"] = g.FindTensor("output.weight") == nullptr;
  j["attention_bias"] = g.FindTensor("blk.0.attn_q.bias") != nullptr;
  j["mlp_bias"] = g.FindTensor("blk.0.ffn_gate.bias") != nullptr;
  G::TokenIds(g, j);
  return j;
}

}  // namespace wc::llama
