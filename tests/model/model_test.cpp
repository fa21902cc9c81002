// The decoder against the independent references (tests/fixtures: Falcon's PyTorch reference,
// tools/python/make_fixtures.py; Llama's numpy reference, tools/python/make_llama_fixtures.py), and
// the decoder's own invariants: token-by-token == whole prompt, fractured == unfractured LM head,
// any thread count gives the same bits.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "kernels/gemm/gemm_profile.h"
#include "model/decoder_model.h"
#include "tests/test_util.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "util/error.h"
#include "util/npy.h"

namespace wc {
namespace {

// Logits [n, vocab] of `ids` fed as one batch (or one token per call).
std::vector<float> RunLogits(const DecoderModel& model, const std::vector<int>& ids, KVDType kv,
                             bool one_at_a_time) {
  KVCache cache(model.CacheShape(1, model.config().max_position_embeddings), kv);
  std::vector<float> all, logits;
  if (one_at_a_time) {
    for (size_t i = 0; i < ids.size(); ++i) {
      TokenBatch b;
      b.Add(ids[i], 0, static_cast<int>(i), true);
      model.Forward(b, cache, &logits);
      all.insert(all.end(), logits.begin(), logits.end());
    }
  } else {
    TokenBatch b;
    for (size_t i = 0; i < ids.size(); ++i) b.Add(ids[i], 0, static_cast<int>(i), true);
    model.Forward(b, cache, &all);
  }
  return all;
}

// Every layout of every architecture: Falcon's (tools/python/make_fixtures.py) and Llama's
// (tools/python/make_llama_fixtures.py: GQA 4:1 with head_dim != hidden / heads, GQA 2:1 tied with
// biases and llama3 rope scaling, one KV head with linear scaling) and Falcon-RW's
// (tools/python/make_rw_fixtures.py: ALiBi over 4 and 6 heads, and 12 heads over 300 positions,
// where HF's bf16 rounding of the bias moves the logits by 0.4).
const char* kFixtures[] = {"newarch_gqa_f32",
                           "newarch_gqa_bias_bf16",
                           "newarch_1ln_f16",
                           "mq_f32",
                           "mq_bias_bf16",
                           "mha_bias_f32",
                           "mha_seq_bf16",
                           "llama_gqa4_f32",
                           "llama_gqa2_tied_bias_bf16",
                           "llama_mqa_linear_f16"};

class FixtureTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = test::FixtureDir(GetParam());
    ModelOptions exact;  // f32 activations for BF16 weights: products exact, as the reference's
    exact.matmul_precision = ActivationPrecision::kF32;
    model_ = DecoderModel::Load(dir_, exact);
    ids_ = test::ReadFixtureIds(dir_);
    ref_ = ReadNpyF32(dir_ + "/logits.npy");
    ASSERT_EQ(ref_.shape, (std::vector<int64_t>{static_cast<int64_t>(ids_.size()),
                                                model_->config().vocab_size}));
  }
  std::string dir_;
  std::unique_ptr<DecoderModel> model_;
  std::vector<int> ids_;
  NpyArray ref_;
};

TEST_P(FixtureTest, MatchesPyTorchReferenceWithF32Cache) {
  // The weights as stored are exact in FP32, so only accumulation order differs: the F32 bound.
  const double err = test::RelMaxError(RunLogits(*model_, ids_, KVDType::kF32, false), ref_.data);
  EXPECT_LE(err, 1e-4) << GetParam();
}

TEST_P(FixtureTest, Bf16ActivationsStayWithinTheBf16Bound) {
  // The default for BF16 weights rounds each matmul's activations to bf16 (2^-9 relative) for the
  // CPU's bf16 dot products: the BF16 bound; F32 and F16 weights are unaffected (bit-identical).
  auto fast = DecoderModel::Load(dir_, ModelOptions{});
  const std::vector<float> logits = RunLogits(*fast, ids_, KVDType::kF32, false);
  const double err = test::RelMaxError(logits, ref_.data);
  EXPECT_LE(err, 2e-2) << GetParam();
  if (fast->weights().matrix_dtype() == DType::kBF16) {
    EXPECT_GT(err, 0.0) << "bf16 activations that change nothing are suspicious";
  } else {
    EXPECT_EQ(logits, RunLogits(*model_, ids_, KVDType::kF32, false)) << GetParam();
  }
}

TEST_P(FixtureTest, InterruptibleSlicesGiveTheSameLogits) {
  // With an interrupt to poll, each matmul runs in slices of output rows (here of one 32-row
  // panel): every slice must land in its own columns, the logits bit-identical to one whole pass.
  ModelOptions sliced;
  sliced.matmul_precision = ActivationPrecision::kF32;
  sliced.interrupt_slice_macs = 1;
  auto model = DecoderModel::Load(dir_, sliced);
  KVCache cache(model->CacheShape(1, model->config().max_position_embeddings), KVDType::kF32);
  TokenBatch b;
  for (size_t i = 0; i < ids_.size(); ++i) b.Add(ids_[i], 0, static_cast<int>(i), true);
  std::vector<float> logits;
  int polls = 0;
  ASSERT_TRUE(model->Forward(b, cache, &logits, [&polls] {
    ++polls;
    return false;
  }));
  EXPECT_GT(polls, 4 * model->config().n_layers) << "the matmuls were not sliced";
  EXPECT_EQ(logits, RunLogits(*model_, ids_, KVDType::kF32, false)) << GetParam();
}

TEST_P(FixtureTest, MatchesPyTorchReferenceWithBf16Cache) {
  // The bf16 KV cache rounds K and V (2^-9 relative): the BF16 bound.
  const double err = test::RelMaxError(RunLogits(*model_, ids_, KVDType::kBF16, false), ref_.data);
  EXPECT_LE(err, 2e-2) << GetParam();
  EXPECT_GT(err, 0.0) << "a bf16 cache that changes nothing is suspicious";
}

TEST_P(FixtureTest, TokenByTokenEqualsWholePromptBitForBit) {
  for (KVDType kv : {KVDType::kBF16, KVDType::kF32}) {
    const auto whole = RunLogits(*model_, ids_, kv, false);
    const auto step = RunLogits(*model_, ids_, kv, true);
    ASSERT_EQ(whole.size(), step.size());
    EXPECT_EQ(0, std::memcmp(whole.data(), step.data(), whole.size() * sizeof(float)))
        << GetParam() << " kv " << KVDTypeName(kv);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, FixtureTest, ::testing::ValuesIn(kFixtures));

TEST(LmHead, FracturedEqualsUnfracturedAndPaddingIsDropped) {
  const std::string dir = test::FixtureDir("mq_bias_bf16");  // vocab 503 -> padded 512
  const std::vector<int> ids = test::ReadFixtureIds(dir);
  std::vector<float> base;
  for (int f : {1, 2, 4, 8, 16}) {
    ModelOptions o;
    o.lm_head_fractures = f;
    auto model = DecoderModel::Load(dir, o);
    EXPECT_EQ(model->lm_head().padded_vocab(), 512);
    const auto logits = RunLogits(*model, ids, KVDType::kBF16, false);
    ASSERT_EQ(logits.size(), ids.size() * 503);  // the real vocabulary only
    if (f == 1) {
      base = logits;
    } else {
      EXPECT_EQ(0, std::memcmp(base.data(), logits.data(), base.size() * sizeof(float))) << f;
    }
  }
  ModelOptions bad;
  bad.lm_head_fractures = 3;
  EXPECT_THROW(DecoderModel::Load(dir, bad), Error);
}

TEST(Determinism, SameBitsOnAnyThreadCount) {
  for (const char* name : {"newarch_gqa_bias_bf16", "llama_gqa2_tied_bias_bf16"}) {
    const std::string dir = test::FixtureDir(name);
    auto model = DecoderModel::Load(dir, ModelOptions{});
    const auto ids = test::ReadFixtureIds(dir);
    omp_set_num_threads(1);
    const auto one = RunLogits(*model, ids, KVDType::kBF16, false);
    for (int t : {2, 3, 8}) {
      omp_set_num_threads(t);
      const auto many = RunLogits(*model, ids, KVDType::kBF16, false);
      EXPECT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float))) << t;
    }
    omp_set_num_threads(omp_get_num_procs());
  }
}

TEST(GemmProfile, NamesEachProjectionByItsRoleAndCountsItsWork) {
  // A profile of one forward pass keeps each projection under its role in every layer (a Llama
  // layer's q, k, v as one group), and the LM head; their FLOPs are the pass's, 2 per weight and
  // token (the LM head only for the tokens whose logits are asked for).
  const struct {
    const char* fixture;
    std::vector<std::string> roles;
  } cases[] = {
      {"newarch_gqa_f32",
       {"self_attention.query_key_value", "self_attention.dense", "mlp.dense_h_to_4h",
        "mlp.dense_4h_to_h", "lm_head"}},
      {"llama_gqa4_f32",
       {"self_attn.q_proj+self_attn.k_proj+self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj+mlp.up_proj", "mlp.down_proj", "lm_head"}},
  };
  for (const auto& c : cases) {
    const std::string dir = test::FixtureDir(c.fixture);
    auto model = DecoderModel::Load(dir, ModelOptions{});
    const auto ids = test::ReadFixtureIds(dir);
    const ModelConfig& cfg = model->config();
    KVCache cache(model->CacheShape(1, cfg.max_position_embeddings), KVDType::kBF16);
    TokenBatch b;
    for (size_t i = 0; i < ids.size(); ++i)
      b.Add(ids[i], 0, static_cast<int>(i), i + 1 == ids.size());
    std::vector<float> logits;
    const GemmProfile profile;
    model->Forward(b, cache, &logits);
    std::vector<std::string> roles;
    double layer_flops = 0, head_flops = 0;
    for (const GemmProfileEntry& e : profile.Entries()) {
      if (std::find(roles.begin(), roles.end(), e.matrix) == roles.end()) roles.push_back(e.matrix);
      (e.matrix == "lm_head" ? head_flops : layer_flops) += e.flops;
      EXPECT_GT(e.seconds, 0) << e.matrix;
    }
    EXPECT_EQ(roles, c.roles) << c.fixture;
    double layer_params = 0;
    for (const LayerWeights& l : model->weights().layers)
      for (const Linear* lin : l.Linears())
        layer_params += static_cast<double>(lin->p.rows()) * lin->p.cols();
    const double n = static_cast<double>(ids.size());
    EXPECT_DOUBLE_EQ(layer_flops, 2.0 * layer_params * n) << c.fixture;
    EXPECT_DOUBLE_EQ(head_flops, 2.0 * cfg.vocab_size * cfg.hidden_size) << c.fixture;
  }
}

TEST(Batch, RowsAtDifferentPositionsMatchSeparateRuns) {
  // Two user rows in one batch at different positions give the same logits as each alone.
  for (const char* name : {"newarch_gqa_f32", "llama_gqa4_f32"}) {
    const std::string dir = test::FixtureDir(name);
    auto model = DecoderModel::Load(dir, ModelOptions{});
    const auto ids = test::ReadFixtureIds(dir);
    const auto alone = RunLogits(*model, ids, KVDType::kBF16, true);
    KVCache cache(model->CacheShape(2, 64), KVDType::kBF16);
    std::vector<float> logits;
    TokenBatch first;  // row 1 gets a 3-token head start
    for (int i = 0; i < 3; ++i) first.Add(ids[i], 1, i, false);
    model->Forward(first, cache, &logits);
    const int64_t vocab = model->config().vocab_size;
    for (size_t step = 0; step + 3 < ids.size(); ++step) {
      TokenBatch b;
      b.Add(ids[step], 0, static_cast<int>(step), true);
      b.Add(ids[step + 3], 1, static_cast<int>(step + 3), true);
      model->Forward(b, cache, &logits);
      EXPECT_EQ(0, std::memcmp(&logits[0], &alone[step * vocab], vocab * sizeof(float))) << step;
      EXPECT_EQ(0, std::memcmp(&logits[vocab], &alone[(step + 3) * vocab], vocab * sizeof(float)));
    }
  }
}

// One fixture's forward pass interrupted at each of its poll points in turn, with matmuls in
// slices of slice_macs (TEST(Forward, AnInterruptedForwardLeavesNothingTheRerunCanSee)).
void ExpectInterruptsLeaveNothing(const char* name, int64_t slice_macs) {
  const std::string dir = test::FixtureDir(name);
  ModelOptions options;
  options.interrupt_slice_macs = slice_macs;
  auto model = DecoderModel::Load(dir, options);
  const auto ids = test::ReadFixtureIds(dir);
  ASSERT_GE(ids.size(), 6u);
  const size_t half = ids.size() / 2;
  auto batch = [&](size_t from, size_t to) {
    TokenBatch b;
    for (size_t i = from; i < to; ++i) b.Add(ids[i], 1, static_cast<int>(i), true);
    return b;
  };
  for (int block_size : {0, 4}) {
    for (KVDType dtype : {KVDType::kBF16, KVDType::kInt8}) {
      KVCacheOptions o;
      o.dtype = dtype;
      o.block_size = block_size;
      const KVCacheShape shape = model->CacheShape(2, 64);
      std::vector<float> want, logits;
      int polls = 0;
      {
        KVCache cache(shape, o);
        model->Forward(batch(0, half), cache, &logits);
        ASSERT_TRUE(model->Forward(batch(half, ids.size()), cache, &want, [&] {
          ++polls;
          return false;
        }));
      }
      ASSERT_GT(polls, model->config().n_layers);  // between layers and within them
      // Pieces go to whichever thread is free and only the calling thread polls, so with
      // one-panel pieces a pass's poll count varies: a poll k past this pass's last lets it
      // finish (with the uninterrupted logits).
      const bool pieces = slice_macs == 1 && omp_get_max_threads() > 1;
      int interrupted = 0;
      for (int k = 0; k < polls; ++k) {
        KVCache cache(shape, o);
        model->Forward(batch(0, half), cache, &logits);
        logits.assign(3, 7.0f);
        int seen = 0;
        const bool finished =
            model->Forward(batch(half, ids.size()), cache, &logits, [&] { return seen++ == k; });
        if (finished) {
          EXPECT_TRUE(pieces) << "poll " << k << " never came";
          EXPECT_EQ(logits, want);
        } else {
          ++interrupted;
          EXPECT_EQ(logits, std::vector<float>(3, 7.0f)) << "logits written by an interrupted pass";
        }
        ASSERT_TRUE(model->Forward(batch(half, ids.size()), cache, &logits));
        ASSERT_EQ(logits.size(), want.size());
        EXPECT_EQ(0, std::memcmp(logits.data(), want.data(), want.size() * sizeof(float)))
            << name << ", block size " << block_size << ", " << KVDTypeName(dtype) << ", poll " << k
            << ", slices of " << slice_macs;
      }
      EXPECT_GT(interrupted, 2 * model->config().n_layers);  // within the matmuls too
    }
  }
}

TEST(Forward, AnInterruptedForwardLeavesNothingTheRerunCanSee) {
  // Interrupted at each of its poll points in turn (between layers, between matmul slices), the
  // forward pass returns false and leaves logits untouched; feeding the same positions again gives
  // the logits of a run that was never interrupted, bit for bit, contiguous and paged, bf16 and
  // int8 (the K/V written before the interrupt is overwritten), for each architecture. With
  // slices of one multiply-add, every matmul of more than one panel hands its panels out to the
  // threads in one region, and the interrupt lands between pieces inside it.
  for (const int64_t slice_macs : {ModelOptions{}.interrupt_slice_macs, int64_t{1}})
    for (const char* name : {"newarch_gqa_bias_bf16", "llama_gqa2_tied_bias_bf16"})
      ExpectInterruptsLeaveNothing(name, slice_macs);
}

TEST(Forward, RejectsOutOfRangeTokenAndPosition) {
  auto model = DecoderModel::Load(test::FixtureDir("mq_f32"), ModelOptions{});
  KVCache cache(model->CacheShape(1, 8), KVDType::kBF16);
  std::vector<float> logits;
  TokenBatch bad_token;
  bad_token.Add(model->config().vocab_size, 0, 0, true);
  EXPECT_THROW(model->Forward(bad_token, cache, &logits), Error);
  TokenBatch bad_pos;
  bad_pos.Add(1, 0, 8, true);
  EXPECT_THROW(model->Forward(bad_pos, cache, &logits), Error);
}

TEST(Tokenizer, RoundTripsTextIncludingBytesOutsideTheVocabulary) {
  SentencePieceTokenizer tok(test::FixtureDir("tokenizer") + "/tokenizer.model");
  for (const std::string text : {"a harbor is a sheltered port", "Hello, world!",
                                 "naïve café — 日本語 🦅", "x\ty\nz"}) {
    const auto ids = tok.Encode(text);
    ASSERT_FALSE(ids.empty());
    std::string decoded = tok.Decode(ids);
    ASSERT_FALSE(decoded.empty());
    if (decoded[0] == ' ') decoded.erase(0, 1);  // the dummy-prefix word boundary
    EXPECT_EQ(decoded, text);
  }
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.TokenBytes(2), "");        // control tokens print nothing
  EXPECT_EQ(tok.TokenBytes(1 << 20), "");  // ids past the tokenizer print nothing
}

TEST(Tokenizer, MissingOrCorruptModelIsAClearError) {
  test::TempDir dir;
  try {
    Tokenizer::FromModelDir(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.model: missing"), std::string::npos)
        << e.what();
  }
  test::WriteFile(dir.File("tokenizer.model"), "not a model");
  EXPECT_THROW(Tokenizer::FromModelDir(dir.path()), Error);
}

}  // namespace
}  // namespace wc
