// A GGUF file's keys and tensors read into the config its architecture's parser gives for the
// same model's config.json (model/gguf/gguf_config.h), and every refusal naming its key.
#include "model/gguf/gguf_config.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "model/tensor_table.h"
#include "tests/model/gguf_writer.h"
#include "tests/test_util.h"
#include "util/error.h"

namespace wc {
namespace {

using test::GgufWriter;

constexpr uint32_t kF32 = 0;

// token_embd.weight [hidden, vocab] (GGML order) of zeros, and the other tensors named.
void Tensors(GgufWriter& w, uint64_t hidden, uint64_t vocab, const std::vector<std::string>& more) {
  w.Tensor("token_embd.weight", kF32, {hidden, vocab}, std::vector<uint8_t>(hidden * vocab * 4));
  for (const std::string& name : more)
    w.Tensor(name, kF32, {hidden}, std::vector<uint8_t>(hidden * 4));
}

// A Falcon3-shaped llama file, scaled down (hidden 64, 4 heads of 32, 2 KV heads): every key but
// `skip`, then `extra`'s.
GgufWriter Llama(const std::string& skip = "",
                 const std::function<void(GgufWriter&)>& extra = nullptr) {
  GgufWriter w;
  const auto u32 = [&](const std::string& k, uint32_t v) {
    if (k != skip) w.U32(k, v);
  };
  if (skip != "general.architecture") w.Str("general.architecture", "llama");
  u32("llama.block_count", 3);
  u32("llama.context_length", 8192);
  u32("llama.embedding_length", 64);
  u32("llama.feed_forward_length", 96);
  u32("llama.attention.head_count", 4);
  u32("llama.attention.head_count_kv", 2);
  u32("llama.attention.key_length", 32);
  u32("llama.attention.value_length", 32);
  u32("llama.rope.dimension_count", 32);
  w.F32("llama.rope.freq_base", 1000042.0f);
  if (skip != "llama.attention.layer_norm_rms_epsilon")
    w.F32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  u32("tokenizer.ggml.bos_token_id", 11);
  u32("tokenizer.ggml.eos_token_id", 11);
  if (extra) extra(w);
  return w;
}

ModelConfig Read(const GgufWriter& w) {
  test::TempDir dir;
  const std::string path = dir.File("m.gguf");
  const std::vector<uint8_t> b = w.Bytes();
  test::WriteFile(path, std::string(b.begin(), b.end()));
  return ConfigFromGguf(GgufFile(path));
}

// The one-line error reading `w` gives (its path's directory stripped).
std::string ErrorOf(const GgufWriter& w) {
  try {
    Read(w);
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    const size_t at = m.find("m.gguf: ");
    return at == std::string::npos ? m : m.substr(at);
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(GgufConfig, LlamaKeysGiveTheConfigOfTheSameConfigJson) {
  GgufWriter w = Llama();
  Tensors(w, 64, 100, {"output.weight"});
  const ModelConfig c = Read(w);
  const ModelConfig want = ModelConfig::FromJson({{"model_type", "llama"},
                                                  {"hidden_size", 64},
                                                  {"intermediate_size", 96},
                                                  {"num_hidden_layers", 3},
                                                  {"num_attention_heads", 4},
                                                  {"num_key_value_heads", 2},
                                                  {"head_dim", 32},
                                                  {"max_position_embeddings", 8192},
                                                  {"rms_norm_eps", 1e-6},
                                                  {"rope_theta", 1000042},
                                                  {"vocab_size", 100},
                                                  {"tie_word_embeddings", false},
                                                  {"bos_token_id", 11},
                                                  {"eos_token_id", 11}},
                                                 "config.json");
  EXPECT_EQ(c.ToJson(), want.ToJson());
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.head_dim(), 32);
  EXPECT_EQ(c.norm_eps, 1e-6f);
}

TEST(GgufConfig, LlamaTiedHeadBiasesAndLinearScalingComeFromTheFile) {
  GgufWriter w = Llama();
  w.Str("llama.rope.scaling.type", "linear");
  w.F32("llama.rope.scaling.factor", 4.0f);
  Tensors(w, 64, 100, {"blk.0.attn_q.bias", "blk.0.ffn_gate.bias"});
  const ModelConfig c = Read(w);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::kLinear);
  EXPECT_EQ(c.rope_scaling.factor, 4.0);
}

// A Falcon file's keys: 2 layers, hidden 64, 4 heads, `kv` KV heads, feed_forward_length 256
// unless `ffn` is false (then 4 x hidden by default).
GgufWriter Falcon(uint32_t kv, bool ffn) {
  GgufWriter w;
  w.Str("general.architecture", "falcon");
  w.U32("falcon.block_count", 2);
  w.U32("falcon.context_length", 2048);
  w.U32("falcon.embedding_length", 64);
  if (ffn) w.U32("falcon.feed_forward_length", 256);
  w.U32("falcon.attention.head_count", 4);
  w.U32("falcon.attention.head_count_kv", kv);
  w.F32("falcon.attention.layer_norm_epsilon", 1e-5f);
  return w;
}

TEST(GgufConfig, FalconSevenBAndFortyBLayouts) {
  GgufWriter seven = Falcon(1, true);
  Tensors(seven, 64, 50, {"output_norm.weight"});
  const ModelConfig c7 = Read(seven);
  EXPECT_EQ(c7.arch, Architecture::kFalcon);
  EXPECT_TRUE(c7.multi_query);
  EXPECT_FALSE(c7.new_decoder_architecture);
  EXPECT_EQ(c7.n_kv_heads, 1);
  EXPECT_TRUE(c7.tie_word_embeddings);
  EXPECT_EQ(c7.vocab_size, 50);
  EXPECT_EQ(c7.ffn_hidden_size, 256);

  GgufWriter f40 = Falcon(2, false);
  Tensors(f40, 64, 50, {"blk.0.attn_norm_2.weight", "output.weight"});
  const ModelConfig c40 = Read(f40);
  EXPECT_TRUE(c40.new_decoder_architecture);
  EXPECT_TRUE(c40.two_layernorms());
  EXPECT_EQ(c40.n_kv_heads, 2);
  EXPECT_EQ(c40.ffn_hidden_size, 256);  // 4 x hidden when the key is absent
  EXPECT_FALSE(c40.tie_word_embeddings);
}

TEST(GgufConfig, TheTablesNameEveryTensorOfTheGgufLayouts) {
  // Falcon-40B: its attention norm (ln_attn) is llama.cpp's attn_norm_2, the MLP's (ln_mlp)
  // attn_norm.
  for (const TensorEntry& e : ModelTensors(PresetConfig("falcon-40b"))) {
    if (e.layer != 0) continue;
    if (e.role == TensorRole::kAttnNorm) {
      EXPECT_EQ(e.gguf_name, "blk.0.attn_norm_2.weight");
    }
    if (e.role == TensorRole::kMlpNorm) {
      EXPECT_EQ(e.gguf_name, "blk.0.attn_norm.weight");
    }
    if (e.role == TensorRole::kQkv) {
      EXPECT_EQ(e.gguf_name, "blk.0.attn_qkv.weight");
    }
  }
  for (const char* preset : {"falcon-7b", "falcon3-7b"})
    for (const TensorEntry& e : ModelTensors(PresetConfig(preset)))
      EXPECT_FALSE(e.gguf_name.empty()) << preset << " " << e.name;
}

TEST(GgufConfig, PerLayerCountsOfOneValueAreRead) {
  GgufWriter w = Llama("llama.attention.head_count", [](GgufWriter& w) {
    w.I32s("llama.attention.head_count", {4, 4, 4});
  });
  Tensors(w, 64, 100, {});
  EXPECT_EQ(Read(w).n_head, 4);
}

TEST(GgufConfig, BadKeysAreOneLineNamingTheKey) {
  // Llama() without `skip`, `extra` added, the tensors a config reads.
  const auto llama = [](const std::string& skip, const std::function<void(GgufWriter&)>& extra,
                        uint64_t embd_cols = 64) {
    GgufWriter w = Llama(skip, extra);
    Tensors(w, embd_cols, 100, {});
    return ErrorOf(w);
  };
  EXPECT_EQ(llama("general.architecture", nullptr),
            "m.gguf: key 'general.architecture' is missing");
  EXPECT_EQ(
      llama("general.architecture", [](GgufWriter& w) { w.Str("general.architecture", "qwen2"); }),
      "m.gguf: general.architecture 'qwen2' is not one wormchat runs (falcon, llama)");
  EXPECT_EQ(llama("llama.embedding_length", nullptr),
            "m.gguf: key 'llama.embedding_length' is missing");
  EXPECT_EQ(
      llama("llama.embedding_length", [](GgufWriter& w) { w.U32("llama.embedding_length", 0); }),
      "m.gguf: key 'llama.embedding_length' is 0, expected 1..65536");
  EXPECT_EQ(llama("llama.block_count", [](GgufWriter& w) { w.Str("llama.block_count", "3"); }),
            "m.gguf: key 'llama.block_count' is string, expected an integer");
  EXPECT_EQ(llama("llama.attention.layer_norm_rms_epsilon", nullptr),
            "m.gguf: key 'llama.attention.layer_norm_rms_epsilon' is missing");
  EXPECT_EQ(llama("llama.rope.dimension_count",
                  [](GgufWriter& w) { w.U32("llama.rope.dimension_count", 16); }),
            "m.gguf: key 'llama.rope.dimension_count' differs from the head width 32; wormchat "
            "rotates the whole head");
  EXPECT_EQ(llama("llama.attention.head_count",
                  [](GgufWriter& w) {
                    w.I32s("llama.attention.head_count", {4, 8, 4});
                  }),
            "m.gguf: key 'llama.attention.head_count' differs between layers (4 and 8); "
            "wormchat runs layers of one shape");
  EXPECT_EQ(llama("llama.attention.head_count",
                  [](GgufWriter& w) {
                    w.I32s("llama.attention.head_count", {4, 4});
                  }),
            "m.gguf: key 'llama.attention.head_count' has 2 values for 3 layers");
  EXPECT_EQ(llama("",
                  [](GgufWriter& w) {
                    w.Str("llama.rope.scaling.type", "yarn");
                    w.F32("llama.rope.scaling.factor", 4.0f);
                  }),
            "m.gguf: key 'llama.rope.scaling.type' is \"yarn\"; wormchat runs none and linear "
            "rope scaling from GGUF");
  EXPECT_EQ(llama("", [](GgufWriter& w) { w.U32("llama.expert_count", 8); }),
            "m.gguf: key 'llama.expert_count' is above 0: wormchat runs no mixture of experts");
  EXPECT_EQ(llama("", nullptr, 32),
            "m.gguf: tensor 'token_embd.weight' is [32, 100], expected [64, vocab]");
  // A GQA ratio that does not divide: the shared checks, naming the file.
  const std::string kv = llama("llama.attention.head_count_kv",
                               [](GgufWriter& w) { w.U32("llama.attention.head_count_kv", 3); });
  EXPECT_EQ(kv.rfind("m.gguf: ", 0), 0u) << kv;
  EXPECT_NE(kv.find("3"), std::string::npos) << kv;
}

// A vocabulary's end-of-generation ids (llama.cpp's EOG set) end generation as EOS does: the
// config carries them beside eos_token_id, those the model's vocab_size can sample.
TEST(GgufConfig, TheVocabularysEndOfGenerationIdsEndGeneration) {
  const auto with_vocab = [](const std::string& model) {
    return Llama("", [model](GgufWriter& w) {
      std::vector<std::string> tokens;
      for (int i = 0; i < 110; ++i) tokens.push_back("t" + std::to_string(i));
      tokens[5] = "<|im_end|>";       // an EOT text: found by text, the lowest id
      tokens[7] = "<|eot_id|>";       // another EOG text
      tokens[9] = "<|fim_prefix|>";   // a role, not an end
      tokens[105] = "<|endoftext|>";  // past token_embd's 100 rows: never sampled
      w.Str("tokenizer.ggml.model", model);
      w.Strs("tokenizer.ggml.tokens", tokens);
    });
  };
  GgufWriter w = with_vocab("llama");
  Tensors(w, 64, 100, {"output.weight"});
  const ModelConfig c = Read(w);
  EXPECT_EQ(c.eos_token_id, 11);
  EXPECT_EQ(c.end_token_ids, (std::vector<int>{5, 7}));
  for (int id : {5, 7, 11}) EXPECT_TRUE(c.EndsGeneration(id)) << id;
  for (int id : {0, 9, 12, 105}) EXPECT_FALSE(c.EndsGeneration(id)) << id;

  // A vocabulary wormchat does not build runs on ids, ended by EOS alone; so does a file without
  // one.
  GgufWriter t5 = with_vocab("t5");
  Tensors(t5, 64, 100, {"output.weight"});
  EXPECT_TRUE(Read(t5).end_token_ids.empty());
  GgufWriter none = Llama();
  Tensors(none, 64, 100, {"output.weight"});
  EXPECT_TRUE(Read(none).end_token_ids.empty());

  // An EOT the file names by key (tokenizer.ggml.eot_token_id) counts too.
  GgufWriter keyed = with_vocab("llama");
  keyed.U32("tokenizer.ggml.eot_token_id", 42);
  Tensors(keyed, 64, 100, {"output.weight"});
  EXPECT_EQ(Read(keyed).end_token_ids, (std::vector<int>{5, 7, 42}));
}

}  // namespace
}  // namespace wc
