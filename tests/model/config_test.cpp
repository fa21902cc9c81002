// config.json parsing: HF and RW-era key names, the three layouts, presets, and refusals.
#include <gtest/gtest.h>

#include "kvcache/kv_cache.h"
#include "model/config.h"
#include "tests/model/config_errors.h"
#include "tests/test_util.h"
#include "util/error.h"

namespace wc {
namespace {

using nlohmann::json;

using test::ExpectConfigError;

json Falcon40bHF() {
  return {{"hidden_size", 8192},   {"num_attention_heads", 128},
          {"num_kv_heads", 8},     {"num_hidden_layers", 60},
          {"vocab_size", 65024},   {"new_decoder_architecture", true},
          {"parallel_attn", true}, {"bias", false},
          {"alibi", false}};
}

TEST(Config, ReadsHfKeys) {
  const ModelConfig c = ModelConfig::FromJson(Falcon40bHF(), "cfg.json");
  EXPECT_EQ(c.head_dim(), 64);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.qkv_layout(), QkvLayout::kGrouped);
  EXPECT_EQ(c.qkv_rows(), (128 + 16) * 64);
  EXPECT_EQ(c.ffn_hidden_size, 4 * 8192);
  EXPECT_TRUE(c.two_layernorms());
  EXPECT_EQ(c.max_position_embeddings, 2048);
}

TEST(Config, ReadsRwEraKeysOfTheSeed) {
  const json rw = {
      {"hidden_size", 8192},   {"n_head", 128},       {"n_head_kv", 8},
      {"n_layer", 60},         {"vocab_size", 65024}, {"new_decoder_architecture", true},
      {"parallel_attn", true}, {"bias", false},       {"model_type", "RefinedWeb"}};
  const ModelConfig c = ModelConfig::FromJson(rw, "cfg.json");
  EXPECT_EQ(c.n_head, 128);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.n_layers, 60);
}

TEST(Config, MultiQueryAndMultiHeadLayouts) {
  json mq = {{"hidden_size", 4544},
             {"num_attention_heads", 71},
             {"num_hidden_layers", 32},
             {"vocab_size", 65024},
             {"multi_query", true}};
  ModelConfig c = ModelConfig::FromJson(mq, "cfg.json");
  EXPECT_EQ(c.qkv_layout(), QkvLayout::kMultiQuery);
  EXPECT_EQ(c.n_kv_heads, 1);
  EXPECT_FALSE(c.two_layernorms());
  mq["multi_query"] = false;
  c = ModelConfig::FromJson(mq, "cfg.json");
  EXPECT_EQ(c.qkv_layout(), QkvLayout::kMultiHead);
  EXPECT_EQ(c.n_kv_heads, 71);
  EXPECT_EQ(c.qkv_rows(), 3 * 4544);
}

TEST(Config, RefusesInconsistentShapes) {
  json j = Falcon40bHF();
  j["hidden_size"] = 8000;
  ExpectConfigError(j, "hidden_size 8000 is not divisible by num_attention_heads 128");
  j = Falcon40bHF();
  j["num_kv_heads"] = 3;
  ExpectConfigError(j, "num_attention_heads 128 is not divisible by num_kv_heads 3");
  j = Falcon40bHF();
  j.erase("vocab_size");
  ExpectConfigError(j, "missing key 'vocab_size'");
  j = Falcon40bHF();
  j["num_hidden_layers"] = "sixty";
  ExpectConfigError(j, "key 'num_hidden_layers' must be an integer in [1, 1024]");
  j = Falcon40bHF();
  j["num_hidden_layers"] = 0;
  ExpectConfigError(j, "key 'num_hidden_layers' must be an integer in [1, 1024], got 0");
  j = Falcon40bHF();
  j["alibi"] = true;
  j["rotary"] = true;
  ExpectConfigError(j, "'alibi': true and 'rotary': true contradict each other");
  j["rotary"] = false;
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  ExpectConfigError(j, "'rope_scaling' with 'alibi': true contradicts it");
  j = Falcon40bHF();
  j["rope_scaling"] = {{"type", "linear"}};
  ExpectConfigError(j, "rope_scaling");
  j = Falcon40bHF();
  j["bos_token_id"] = 70000;
  ExpectConfigError(j, "must be below vocab_size");
  ExpectConfigError(json::array(), "expected a JSON object");
}

TEST(Config, FalconRwIsAlibiWithSequentialResiduals) {
  // tiiuae/falcon-rw-1b's config.json as published (no max_position_embeddings: HF's 2048).
  const json rw1b = {{"alibi", true},
                     {"apply_residual_connection_post_layernorm", false},
                     {"architectures", {"FalconForCausalLM"}},
                     {"attention_dropout", 0.0},
                     {"bias", true},
                     {"bos_token_id", 1},
                     {"eos_token_id", 2},
                     {"hidden_dropout", 0.0},
                     {"hidden_size", 2048},
                     {"initializer_range", 0.02},
                     {"layer_norm_epsilon", 1e-05},
                     {"model_type", "falcon"},
                     {"multi_query", false},
                     {"new_decoder_architecture", false},
                     {"num_attention_heads", 32},
                     {"num_hidden_layers", 24},
                     {"parallel_attn", false},
                     {"torch_dtype", "bfloat16"},
                     {"vocab_size", 50304}};
  const ModelConfig c = ModelConfig::FromJson(rw1b, "cfg.json");
  EXPECT_TRUE(c.alibi);
  EXPECT_FALSE(c.parallel_attn);
  EXPECT_TRUE(c.bias);
  EXPECT_EQ(c.qkv_layout(), QkvLayout::kMultiHead);
  EXPECT_EQ(c.n_kv_heads, 32);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_TRUE(c.mlp_norm());                     // post_attention_layernorm
  EXPECT_EQ(c.n_params(), int64_t{1311625216});  // Falcon-RW-1B's published count
  EXPECT_EQ(PresetConfig("falcon-rw-1b").n_params(), c.n_params());
  EXPECT_EQ(ModelConfig::FromJson(c.ToJson(), "again").ToJson(), c.ToJson());
  EXPECT_NE(c.LayoutSummary().find("ALiBi"), std::string::npos) << c.LayoutSummary();
}

TEST(Config, EveryFieldHasARangeSoDerivedSizesCannotOverflow) {
  // Issue 15, defect 6: values that made 4 * hidden, qkv_rows or the parameter count overflow
  // are refused by name, whatever their JSON form (huge, negative, fractional, unsigned 2^64 - 1).
  const std::vector<std::pair<const char*, json>> bad = {
      {"hidden_size", 1 << 29},
      {"hidden_size", 65537},
      {"num_attention_heads", 5000},
      {"num_kv_heads", -1},
      {"num_hidden_layers", 100000000},
      {"vocab_size", 1LL << 40},
      {"vocab_size", 18446744073709551615ULL},
      {"ffn_hidden_size", 1 << 21},
      {"max_position_embeddings", 1 << 25},
      {"num_ln_in_parallel_attn", 3},
      {"bos_token_id", -5},
      {"hidden_size", 8192.5},
      {"layer_norm_epsilon", 2.0},
      {"rope_theta", 1e300},
      {"rope_theta", -1.0},
  };
  for (const auto& [key, value] : bad) {
    json j = Falcon40bHF();
    j[key] = value;
    ExpectConfigError(j, Cat("'", key, "' must be"));
  }
  // The largest accepted shape's derived sizes fit their types.
  ModelConfig c = PresetConfig("falcon-40b");
  c.hidden_size = 1 << 16;
  c.n_head = 1 << 8;
  c.n_kv_heads = 1 << 8;
  c.n_layers = 1 << 10;
  c.vocab_size = 1 << 24;
  c.ffn_hidden_size = 1 << 20;
  c.Validate("largest");
  EXPECT_EQ(c.qkv_rows(), 3 * (1 << 16));
  EXPECT_GT(c.n_params(), int64_t{1} << 47);
}

TEST(Config, OutOfRangeAndHugeJsonFilesNameTheFile) {
  // Issue 15, defects 4 and 8: 1e400 is a JSON parse error naming config.json; a config.json over
  // 16 MiB is refused before it is parsed; a directory named config.json is an error too.
  test::TempDir dir;
  const std::string path = dir.File("config.json");
  json j = Falcon40bHF();
  test::WriteFile(path, "{\"hidden_size\": 1e400, \"num_attention_heads\": 128}");
  try {
    LoadConfig(dir.path());
    FAIL() << "1e400 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  test::WriteFile(path, j.dump() + std::string(17 << 20, ' '));
  try {
    LoadConfig(dir.path());
    FAIL() << "a 17 MiB config accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at most 16777216 bytes"), std::string::npos) << e.what();
  }
}

TEST(Config, PresetsAndTheSeedsKvFigures) {
  const ModelConfig c = PresetConfig("falcon-40b");
  EXPECT_EQ(c.n_layers, 60);
  EXPECT_EQ(c.hidden_size, 8192);
  EXPECT_EQ(c.n_head, 128);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim(), 64);
  EXPECT_EQ(c.vocab_size, 65024);
  KVCacheShape s{c.n_layers, 32, c.n_kv_heads, 2048, c.head_dim()};
  // seed 001 (docs/references.md): K and V caches are 64 MB each per layer, 7680 MB for 60 layers.
  EXPECT_EQ(KVBytesPerLayerK(s, KVDType::kBF16, ScaleMode::kTokenHead), 64LL << 20);
  EXPECT_EQ(2 * KVBytesPerLayerK(s, KVDType::kBF16, ScaleMode::kTokenHead) * c.n_layers,
            7680LL << 20);
  EXPECT_EQ(PresetConfig("falcon-7b").qkv_layout(), QkvLayout::kMultiQuery);
  EXPECT_EQ(PresetConfig("falcon-7b").head_dim(), 64);
  EXPECT_THROW(PresetConfig("falcon-1t"), Error);
}

TEST(Config, RoundTripsThroughJson) {
  const ModelConfig a = PresetConfig("tiny");
  const ModelConfig b = ModelConfig::FromJson(a.ToJson(), "x");
  EXPECT_EQ(a.ToJson(), b.ToJson());
}

}  // namespace
}  // namespace wc
