// The architecture table and the Llama layout's config.json (TII's Falcon3): HF LlamaConfig's keys
// and defaults, rope scaling, the Falcon3 presets, and refusals naming the key.
#include <cmath>

#include <gtest/gtest.h>

#include "model/architecture.h"
#include "model/config.h"
#include "model/rope_scaling.h"
#include "model/tensor_table.h"
#include "tests/model/config_errors.h"
#include "util/error.h"

namespace wc {
namespace {

using nlohmann::json;

using test::ExpectConfigError;

// tiiuae/Falcon3-7B-Instruct's config.json as published.
json Falcon3_7b() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"bos_token_id", 11},
          {"eos_token_id", 11},
          {"head_dim", 256},
          {"hidden_act", "silu"},
          {"hidden_size", 3072},
          {"initializer_range", 0.02},
          {"intermediate_size", 23040},
          {"max_position_embeddings", 32768},
          {"mlp_bias", false},
          {"model_type", "llama"},
          {"num_attention_heads", 12},
          {"num_hidden_layers", 28},
          {"num_key_value_heads", 4},
          {"pretraining_tp", 1},
          {"rms_norm_eps", 1e-06},
          {"rope_scaling", nullptr},
          {"rope_theta", 1000042},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"use_cache", true},
          {"vocab_size", 131072}};
}

TEST(Architecture, DetectedFromModelTypeOrClass) {
  EXPECT_EQ(DetectArchitecture(Falcon3_7b(), "c"), Architecture::kLlama);
  EXPECT_EQ(DetectArchitecture({{"architectures", {"LlamaForCausalLM"}}}, "c"),
            Architecture::kLlama);
  EXPECT_EQ(DetectArchitecture({{"model_type", "falcon"}}, "c"), Architecture::kFalcon);
  EXPECT_EQ(DetectArchitecture({{"model_type", "RefinedWebModel"}}, "c"), Architecture::kFalcon);
  EXPECT_EQ(DetectArchitecture({{"architectures", {"RWForCausalLM"}}}, "c"), Architecture::kFalcon);
  EXPECT_EQ(DetectArchitecture({{"n_head", 8}}, "c"), Architecture::kFalcon);  // RW era: neither
  EXPECT_EQ(ArchitectureNamed("llama"), Architecture::kLlama);
  EXPECT_EQ(ArchitectureNamed("gpt2"), std::nullopt);
  for (const ArchitectureInfo& a : Architectures()) EXPECT_EQ(&ArchitectureOf(a.arch), &a);
}

TEST(Architecture, UnknownOrContradictoryNamesAreOneLine) {
  json j = Falcon3_7b();
  j["model_type"] = "mistral";
  ExpectConfigError(j, "model_type \"mistral\" is not an architecture wormchat runs");
  j = Falcon3_7b();
  j["model_type"] = "falcon";
  ExpectConfigError(j, "name different architectures");
  j = Falcon3_7b();
  j.erase("model_type");
  j["architectures"] = {"GPT2LMHeadModel"};
  ExpectConfigError(j, "architectures[0] \"GPT2LMHeadModel\"");
  j["architectures"] = "LlamaForCausalLM";
  ExpectConfigError(j, "'architectures' must be a list");
}

TEST(LlamaConfig, ReadsFalcon3) {
  const ModelConfig c = ModelConfig::FromJson(Falcon3_7b(), "cfg.json");
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.norm, NormKind::kRmsNorm);
  EXPECT_EQ(c.head_dim(), 256);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.ffn_hidden_size, 23040);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_EQ(c.rope_theta, 1000042.0);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::kNone);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.parallel_attn);
  EXPECT_TRUE(c.mlp_norm());
  EXPECT_EQ(c.bos_token_id, 11);
  // Falcon3-7B's published count: 7.456 B parameters.
  EXPECT_EQ(c.n_params(), int64_t{7455550464});
  EXPECT_EQ(PresetConfig("falcon3-7b").ToJson(), c.ToJson());
}

TEST(LlamaConfig, HfDefaultsForKeysAConfigOmits) {
  const ModelConfig c = ModelConfig::FromJson(
      {{"model_type", "llama"}, {"hidden_size", 64}, {"num_attention_heads", 4}}, "cfg.json");
  EXPECT_EQ(c.n_kv_heads, 4);  // num_key_value_heads: the heads
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_EQ(c.ffn_hidden_size, 11008);
  EXPECT_EQ(c.n_layers, 32);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
}

TEST(LlamaConfig, RopeScalingKinds) {
  json j = Falcon3_7b();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  ModelConfig c = ModelConfig::FromJson(j, "cfg.json");
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::kLinear);
  EXPECT_EQ(c.rope_scaling.factor, 2.0);
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  c = ModelConfig::FromJson(j, "cfg.json");
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::kLlama3);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(ModelConfig::FromJson(c.ToJson(), "again").ToJson(), c.ToJson());
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(ModelConfig::FromJson(j, "cfg.json").rope_scaling.kind, RopeScaling::Kind::kNone);
}

TEST(LlamaConfig, RopeFrequenciesFollowEachScaling) {
  ModelConfig c = PresetConfig("falcon3-1b");
  c.head_dim_override = 16;
  c.rope_theta = 10000;
  const std::vector<double> plain = RopeInvFreq(c);
  ASSERT_EQ(plain.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(plain[i], 1.0 / std::pow(10000.0, i / 8.0));
  c.rope_scaling.kind = RopeScaling::Kind::kLinear;
  c.rope_scaling.factor = 2;
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(RopeInvFreq(c)[i], plain[i] / 2);
  // llama3 over an original context of 32: wavelengths below 8 kept, above 32 divided by the
  // factor, between them a blend (component 0: 2 pi; 1: 2 pi 10^0.5 = 19.9; the rest longer).
  c.rope_scaling = RopeScaling{RopeScaling::Kind::kLlama3, 8.0, 1.0, 4.0, 32};
  const std::vector<double> l3 = RopeInvFreq(c);
  EXPECT_DOUBLE_EQ(l3[0], plain[0]);
  const double s = (32 / (2 * M_PI / plain[1]) - 1.0) / 3.0;
  EXPECT_DOUBLE_EQ(l3[1], (1 - s) * plain[1] / 8 + s * plain[1]);
  for (int i = 2; i < 8; ++i) EXPECT_DOUBLE_EQ(l3[i], plain[i] / 8);
}

TEST(LlamaConfig, RefusesWhatItDoesNotRunNamingTheKey) {
  json j = Falcon3_7b();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  ExpectConfigError(j, "rope_scaling.rope_type \"yarn\" is not supported");
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  ExpectConfigError(j, "missing key 'low_freq_factor'");
  j["rope_scaling"] = {{"rope_type", "linear"}};
  ExpectConfigError(j, "missing key 'factor'");
  j["rope_scaling"] = "linear";
  ExpectConfigError(j, "'rope_scaling' must be null or an object");
  j = Falcon3_7b();
  j["hidden_act"] = "gelu";
  ExpectConfigError(j, "'hidden_act' \"gelu\" is not supported");
  j = Falcon3_7b();
  j["num_key_value_heads"] = 5;
  ExpectConfigError(j, "num_attention_heads 12 is not divisible by num_key_value_heads 5");
  j = Falcon3_7b();
  j["head_dim"] = 255;
  ExpectConfigError(j, "head_dim 255 must be even");
  j = Falcon3_7b();
  j["partial_rotary_factor"] = 0.5;
  ExpectConfigError(j, "'partial_rotary_factor'");
  j = Falcon3_7b();
  j.erase("head_dim");
  j["hidden_size"] = 3002;  // not 12 whole heads, and no head_dim to say how wide they are
  ExpectConfigError(j, "hidden_size 3002 is not divisible by num_attention_heads 12");
}

TEST(LlamaConfig, TensorTableHasHfNames) {
  ModelConfig c = PresetConfig("falcon3-1b");
  c.n_layers = 1;
  std::vector<std::string> names;
  for (const TensorEntry& e : ModelTensors(c)) names.push_back(e.name);
  const std::vector<std::string> want = {"model.embed_tokens.weight",
                                         "model.norm.weight",
                                         "lm_head.weight",
                                         "model.layers.0.input_layernorm.weight",
                                         "model.layers.0.post_attention_layernorm.weight",
                                         "model.layers.0.self_attn.q_proj.weight",
                                         "model.layers.0.self_attn.k_proj.weight",
                                         "model.layers.0.self_attn.v_proj.weight",
                                         "model.layers.0.self_attn.o_proj.weight",
                                         "model.layers.0.mlp.gate_proj.weight",
                                         "model.layers.0.mlp.up_proj.weight",
                                         "model.layers.0.mlp.down_proj.weight"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(TensorName(c, TensorRole::kK, 0), "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(MatrixRoleOfName(c, "model.layers.0.mlp.down_proj.weight"), TensorRole::kDown);
  EXPECT_EQ(MatrixRoleOfName(c, "model.norm.weight"), std::nullopt);
  // Falcon3-1B's published count: 1.669 B parameters.
  EXPECT_EQ(PresetConfig("falcon3-1b").n_params(), int64_t{1669408768});
}

}  // namespace
}  // namespace wc
