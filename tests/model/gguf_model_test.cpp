// GGUF files as models: the same layouts as the fixtures' checkpoint directories, converted by
// tools/python/to_gguf.py (llama.cpp's gguf-py; the converter's q/k permutation and Falcon QKV
// regrouping, checked against llama.cpp's own graph by tools/bench/compare.sh), load into the same
// config and give the same logits bit for bit; and every tensor problem is one line naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/decoder_model.h"
#include "model/gguf/gguf_config.h"
#include "model/gguf/gguf_tensors.h"
#include "model/tensor_table.h"
#include "tests/model/gguf_writer.h"
#include "tests/model/prompt_logits.h"
#include "tests/test_util.h"
#include "util/error.h"

namespace wc {
namespace {

using test::GgufWriter;

class GgufFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufFixture, LoadsAsItsCheckpointDirectoryBitForBit) {
  const std::string dir = test::FixtureDir(GetParam());
  const std::string gguf = test::FixtureDir("gguf") + "/" + GetParam() + ".gguf";
  ASSERT_TRUE(IsGgufModel(gguf));
  EXPECT_FALSE(IsGgufModel(dir));
  const ModelConfig a = LoadConfig(dir), b = LoadConfig(gguf);
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_head, b.n_head);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim(), b.head_dim());
  EXPECT_EQ(a.qkv_layout(), b.qkv_layout());
  EXPECT_EQ(a.ffn_hidden_size, b.ffn_hidden_size);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_TRUE(a.rope_scaling == b.rope_scaling);
  EXPECT_EQ(a.two_layernorms(), b.two_layernorms());
  const auto from_dir = DecoderModel::Load(dir, ModelOptions());
  const auto from_gguf = DecoderModel::Load(gguf, ModelOptions());
  const std::vector<int> ids = test::ReadFixtureIds(dir);
  const std::vector<float> want = test::PromptLogits(*from_dir, ids);
  EXPECT_TRUE(test::SameBits(want, test::PromptLogits(*from_gguf, ids)));
}

// Falcon-7B's multi-query layout, Falcon-40B's grouped one (QKV regrouped), Llama GQA 4:1 with
// head_dim != hidden / heads in F32, one KV head with linear rope scaling in F16.
INSTANTIATE_TEST_SUITE_P(Layouts, GgufFixture,
                         ::testing::Values("mq_f32", "newarch_gqa_f32", "llama_gqa4_f32",
                                           "llama_mqa_linear_f16"));

TEST(GgufTensors, RopeRowsReturnToHalvesAsTheConverterPermutedThem) {
  // Two heads of 4 rows of 1 byte: the converter's permute (W.reshape(nh, 2, hd / 2, ...)
  // .swapaxes(1, 2)) puts HF row j * hd / 2 + i of a head at 2 i + j.
  const std::vector<uint8_t> hf = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<uint8_t> gguf(8);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) gguf[h * 4 + 2 * i + j] = hf[h * 4 + j * 2 + i];
  EXPECT_EQ(gguf, (std::vector<uint8_t>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(RopePairsToHalves(gguf.data(), 8, 1, 4), hf);
}

TEST(GgufTensors, QkvBlocksReturnToKvGroups) {
  // 4 query heads, 2 KV heads, heads of one row: GGUF q0 q1 q2 q3 k0 k1 v0 v1; HF groups
  // [q0 q1 k0 v0] [q2 q3 k1 v1].
  const std::vector<uint8_t> gguf = {10, 11, 12, 13, 20, 21, 30, 31};
  EXPECT_EQ(QkvBlocksToGroups(gguf.data(), 1, 4, 2, 1),
            (std::vector<uint8_t>{10, 11, 20, 30, 12, 13, 21, 31}));
}

// A llama file of every tensor its keys need (F32 zeros), `edit` applied to the tensor list.
struct Named {
  std::string name;
  uint32_t type;
  std::vector<uint64_t> ne;
};
std::string BindError(const std::function<void(std::vector<Named>&)>& edit) {
  GgufWriter w;
  w.Str("general.architecture", "llama");
  w.U32("llama.block_count", 1);
  w.U32("llama.context_length", 64);
  w.U32("llama.embedding_length", 8);
  w.U32("llama.feed_forward_length", 16);
  w.U32("llama.attention.head_count", 2);
  w.F32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  ModelConfig c = PresetConfig("falcon3-1b").Resized(1, 8, 2, 2, "falcon3-1b");
  c.head_dim_override = 4;
  c.vocab_size = 10;
  c.ffn_hidden_size = 16;
  c.tie_word_embeddings = true;
  std::vector<Named> tensors;
  for (const TensorEntry& e : ModelTensors(c))
    tensors.push_back({e.gguf_name, 0, std::vector<uint64_t>(e.shape.rbegin(), e.shape.rend())});
  edit(tensors);
  for (const Named& t : tensors) {
    uint64_t bytes = t.type == 8 ? 34 : 4;
    for (size_t i = 0; i < t.ne.size(); ++i)
      bytes *= t.type == 8 && i == 0 ? t.ne[0] / 32 : t.ne[i];
    w.Tensor(t.name, t.type, t.ne, std::vector<uint8_t>(bytes));
  }
  test::TempDir dir;
  const std::string path = dir.File("m.gguf");
  const std::vector<uint8_t> b = w.Bytes();
  test::WriteFile(path, std::string(b.begin(), b.end()));
  try {
    const ModelConfig read = LoadConfig(path);
    BindGgufTensors(path, read);
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m.substr(m.find("m.gguf: "));
  }
  return "";
}

TEST(GgufTensors, ProblemsNameTheTensor) {
  EXPECT_EQ(BindError([](std::vector<Named>&) {}), "");
  EXPECT_EQ(BindError([](std::vector<Named>& t) {
              t.erase(
                  std::remove_if(t.begin(), t.end(),
                                 [](const Named& n) { return n.name == "blk.0.attn_k.weight"; }),
                  t.end());
            }),
            "m.gguf: tensor 'blk.0.attn_k.weight' is missing");
  EXPECT_EQ(BindError([](std::vector<Named>& t) {
              t.push_back({"blk.0.extra.weight", 0, {8}});
            }),
            "m.gguf: tensor 'blk.0.extra.weight' is not one the llama layout of its keys has");
  EXPECT_EQ(BindError([](std::vector<Named>& t) {
              for (Named& n : t)
                if (n.name == "blk.0.ffn_up.weight") n.ne = {8, 12};
            }),
            "m.gguf: tensor 'blk.0.ffn_up.weight' is [8, 12], expected [8, 16]");
  EXPECT_EQ(BindError([](std::vector<Named>& t) {
              for (Named& n : t)
                if (n.name == "blk.0.ffn_down.weight") n = {n.name, 8, {32, 8}};
            }),
            "m.gguf: tensor 'blk.0.ffn_down.weight' is [32, 8], expected [16, 8]");
}

}  // namespace
}  // namespace wc
