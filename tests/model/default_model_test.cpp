// The shipped default model (assets/default-model): its logits against the PyTorch reference
// (tests/fixtures/default_model, made by tools/python/falcon_logits.py), its tokenizer and chat
// format.
#include <cmath>
#include <sstream>

#include <gtest/gtest.h>

#include "model/chat/chat_format.h"
#include "model/decoder_model.h"
#include "tests/test_util.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "util/npy.h"

namespace wc {
namespace {

const std::string kModel = std::string(WORMCHAT_ASSETS_DIR) + "/default-model";

TEST(DefaultModel, IsTheFalcon40bShapeScaledDown) {
  const ModelConfig c = LoadConfig(kModel);
  EXPECT_TRUE(c.new_decoder_architecture);
  EXPECT_TRUE(c.two_layernorms());
  EXPECT_TRUE(c.parallel_attn);
  EXPECT_FALSE(c.bias);
  EXPECT_EQ(c.head_dim(), 64);
  EXPECT_GE(c.n_head / c.n_kv_heads, 4);
  EXPECT_GE(c.n_params(), 5'000'000);
  EXPECT_LE(c.n_params(), 20'000'000);
  EXPECT_EQ(c.ToJson(), PresetConfig("tiny").ToJson()) << "keep the 'tiny' preset in step";
}

TEST(DefaultModel, LogitsMatchThePyTorchReference) {
  const std::string fixture = test::FixtureDir("default_model");
  std::istringstream ids_in(test::ReadFile(fixture + "/ids.txt"));
  std::vector<int> ids;
  for (int id; ids_in >> id;) ids.push_back(id);
  ASSERT_GE(ids.size(), 8u);
  const NpyArray ref = ReadNpyF32(fixture + "/logits.npy");
  for (AttentionImpl impl : {AttentionImpl::kFlashDecode, AttentionImpl::kReference}) {
    ModelOptions o;
    o.attention = impl;
    auto model = DecoderModel::Load(kModel, o);
    ASSERT_EQ(ref.shape,
              (std::vector<int64_t>{static_cast<int64_t>(ids.size()), model->config().vocab_size}));
    KVCache cache(model->CacheShape(1, model->config().max_position_embeddings), KVDType::kF32);
    TokenBatch batch;
    for (size_t i = 0; i < ids.size(); ++i) batch.Add(ids[i], 0, static_cast<int>(i), true);
    std::vector<float> logits;
    model->Forward(batch, cache, &logits);
    // The shipped weights are F32: the F32 bound.
    EXPECT_LE(test::RelMaxError(logits, ref.data), 1e-4);
  }
}

TEST(DefaultModel, TokenizerAndChatFormatAgreeWithTheConfig) {
  const ModelConfig c = LoadConfig(kModel);
  SentencePieceTokenizer tok(kModel + "/tokenizer.model");
  EXPECT_EQ(tok.piece_count(), c.vocab_size);
  EXPECT_EQ(tok.bos_id(), c.bos_token_id);
  EXPECT_EQ(tok.eos_id(), c.eos_token_id);
  for (const std::string text : {"What is a falcon?", "Define harbor.", "naïve café 🦅\ttab"}) {
    std::string back = tok.Decode(tok.Encode(text));
    if (!back.empty() && back[0] == ' ') back.erase(0, 1);
    EXPECT_EQ(back, text);
  }
  const auto format = ChatFormat::Load(kModel);
  ASSERT_TRUE(format.has_value()) << "assets/default-model/chat_format.json";
  EXPECT_TRUE(format->add_bos);
  EXPECT_TRUE(format->eos_ends_turn);
  EXPECT_EQ(format->user_prefix, "User: ");
  EXPECT_EQ(format->assistant_prefix, "Assistant:");
  const auto ids = EncodePrompt(tok, format, "Define harbor.", false, c.bos_token_id);
  EXPECT_EQ(ids.front(), c.bos_token_id);
  EXPECT_EQ(tok.Decode(ids), " User: Define harbor.\nAssistant:");
}

}  // namespace
}  // namespace wc
