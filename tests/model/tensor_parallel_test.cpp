// Tensor parallel inside one process: R ranks as threads (dist/thread_group.h), each loading only
// its slice of a fixture checkpoint (all three QKV layouts, sequential and parallel layers,
// biases, one KV head), against the whole model: F32 logits within 1e-5 relative, the same argmax,
// the same bits on every rank and on every run, an interrupt from rank 0 that stops every rank,
// and each rank holding about 1/R of the matrices.
#include <cmath>
#include <cstring>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "dist/thread_group.h"
#include "model/decoder_model.h"
#include "model/tensor_parallel.h"
#include "tests/model/on_ranks.h"
#include "tests/test_util.h"
#include "util/error.h"

namespace wc {
namespace {

ModelOptions Exact(const std::string& weights = "auto") {
  ModelOptions o;
  o.matmul_precision = ActivationPrecision::kF32;
  o.weights = WeightSpec::Parse(weights);
  return o;
}

// Logits of the prompt fed whole (all positions' logits), then of 3 decode steps feeding the
// argmax. With a tensor-parallel model this is rank 0's side: the cache journals its operations.
std::vector<float> RunModel(const DecoderModel& model, const std::vector<int>& ids) {
  KVCacheOptions kv;
  kv.dtype = KVDType::kF32;
  kv.block_size = 16;  // paged: the followers' block tables must follow rank 0's
  kv.journal = !model.split().whole();
  KVCache cache(model.CacheShape(1, model.config().max_position_embeddings), kv);
  TokenBatch prompt;
  for (size_t i = 0; i < ids.size(); ++i) prompt.Add(ids[i], 0, static_cast<int>(i), true);
  std::vector<float> all, logits;
  EXPECT_TRUE(model.Forward(prompt, cache, &all));
  const int vocab = model.config().vocab_size;
  int pos = static_cast<int>(ids.size());
  std::vector<float> last(all.end() - vocab, all.end());
  for (int step = 0; step < 3; ++step, ++pos) {
    const int next = static_cast<int>(std::max_element(last.begin(), last.end()) - last.begin());
    TokenBatch b;
    b.Add(next, 0, pos, true);
    EXPECT_TRUE(model.Forward(b, cache, &logits));
    all.insert(all.end(), logits.begin(), logits.end());
    last = logits;
  }
  // A fresh prompt in the same row after a reset (replayed by the followers) gives the same
  // logits as the first time.
  cache.ResetUser(0);
  std::vector<float> again;
  EXPECT_TRUE(model.Forward(prompt, cache, &again));
  EXPECT_EQ(again,
            std::vector<float>(all.begin(), all.begin() + static_cast<int64_t>(again.size())));
  return all;
}

// Runs `body(model)` on rank 0 of a `ranks`-thread group (test::OnRanks) with Exact(weights).
template <typename Body>
void OnRanks(const std::string& dir, int ranks, Body body, std::vector<int64_t>* held = nullptr,
             const std::string& weights = "auto") {
  test::OnRanks(dir, ranks, Exact(weights), body, held);
}

// Rank 0's RunModel over a group of `ranks`.
std::vector<float> RunRanks(const std::string& dir, int ranks, std::vector<int64_t>* held = nullptr,
                            const std::string& weights = "auto") {
  std::vector<float> out;
  OnRanks(
      dir, ranks,
      [&](const DecoderModel& model) { out = RunModel(model, test::ReadFixtureIds(dir)); }, held,
      weights);
  return out;
}

int Argmax(const float* row, int n) {
  return static_cast<int>(std::max_element(row, row + n) - row);
}

class TensorParallelTest : public ::testing::TestWithParam<const char*> {};

// Two ranks of fixture `name` against the whole model: logits, tokens, and (check_held) the bytes
// each rank holds against info's prediction.
void CheckTwoRanks(const char* name, bool check_held = true) {
  SCOPED_TRACE(name);
  const std::string dir = test::FixtureDir(name);
  auto whole = DecoderModel::Load(dir, Exact());
  const std::vector<float> ref = RunModel(*whole, test::ReadFixtureIds(dir));
  std::vector<int64_t> held;
  const std::vector<float> two = RunRanks(dir, 2, &held);
  ASSERT_EQ(two.size(), ref.size());
  EXPECT_LE(test::RelMaxError(two, ref), 1e-5) << name;
  const int vocab = whole->config().vocab_size;
  for (size_t row = 0; row < ref.size() / vocab; ++row)
    EXPECT_EQ(Argmax(&two[row * vocab], vocab), Argmax(&ref[row * vocab], vocab))
        << name << " row " << row;
  // Run to run: the same bits (the ranks' sum is in rank order).
  EXPECT_EQ(RunRanks(dir, 2), two) << name;
  if (!check_held) return;
  // What `info --tensor-parallel` predicts a rank holds, within the packing's row padding.
  const int bytes = static_cast<int>(DTypeSize(whole->weights().matrix_dtype()));
  const double predicted = static_cast<double>(
      RankWeightBytes(whole->config(), TensorSplit::Make(whole->config(), 8, 0, 2), bytes));
  EXPECT_NEAR(static_cast<double>(held[0]), predicted, predicted * 0.1) << name;
  // Each rank holds its slice: together about the whole model's matrices, each about half.
  const int64_t all = whole->weights().HeldBytes();
  EXPECT_LT(held[0], all * 0.62) << name;
  EXPECT_LT(held[1], all * 0.62) << name;
  EXPECT_GT(held[0] + held[1], all * 0.98) << name;
}

TEST_P(TensorParallelTest, TwoRanksGiveTheWholeModelsLogitsAndTokens) {
  CheckTwoRanks(GetParam());
}

// Block-float weights: each rank holds whole tiles of the whole packing (CheckBfpSlices), so the
// ranks multiply exactly as one process; info's per-group bytes are what the ranks' formats take.
TEST_P(TensorParallelTest, TwoRanksInBfp8GiveTheWholeModelsLogits) {
  const std::string dir = test::FixtureDir(GetParam());
  for (const char* weights : {"bfp8", "attn=bfp4,mlp=bfp8,lm_head=bf16"}) {
    auto whole = DecoderModel::Load(dir, Exact(weights));
    const std::vector<float> ref = RunModel(*whole, test::ReadFixtureIds(dir));
    std::vector<int64_t> held;
    const std::vector<float> two = RunRanks(dir, 2, &held, weights);
    ASSERT_EQ(two.size(), ref.size());
    EXPECT_LE(test::RelMaxError(two, ref), 1e-5) << GetParam() << " " << weights;
    const int vocab = whole->config().vocab_size;
    for (size_t row = 0; row < ref.size() / vocab; ++row)
      EXPECT_EQ(Argmax(&two[row * vocab], vocab), Argmax(&ref[row * vocab], vocab))
          << GetParam() << " row " << row;
    EXPECT_GT(held[0] + held[1], whole->weights().HeldBytes() * 0.98) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, TensorParallelTest,
                         ::testing::Values("newarch_gqa_f32", "newarch_gqa_bias_bf16",
                                           "newarch_1ln_f16", "mq_f32", "mha_bias_f32",
                                           "mha_seq_bf16",  // (mq_bias_bf16: 5 heads)
                                           "llama_gqa4_f32", "rw_alibi_f32"));

// Llama layouts whose 16-wide heads split into slices no block-float tile can hold: plain weights.
// (llama_gqa2_tied_bias_bf16's rank holds one 16-row KV head of k_proj and v_proj, each packed
// into a 32-row panel: twice the bytes info predicts, so its bytes are not compared.)
TEST(TensorParallel, TwoRanksOfLlamaLayoutsGiveTheWholeModelsLogits) {
  CheckTwoRanks("llama_gqa2_tied_bias_bf16", /*check_held=*/false);
  CheckTwoRanks("llama_mqa_linear_f16");
  CheckTwoRanks("rw_alibi6_bf16");  // each rank's 3 heads keep their own ALiBi slopes
}

TEST(TensorParallel, AnInterruptOnRankZeroStopsEveryRankAndTheGroupGoesOn) {
  const std::string dir = test::FixtureDir("newarch_gqa_f32");
  OnRanks(dir, 2, [](const DecoderModel& model) {
    KVCacheOptions kv;
    kv.dtype = KVDType::kF32;
    kv.journal = true;
    KVCache cache(model.CacheShape(1, 64), kv);
    TokenBatch b;
    for (int i = 0; i < 8; ++i) b.Add(i + 3, 0, i, i == 7);
    std::vector<float> logits, whole;
    int polls = 0;
    // Fires in the second layer's sum: rank 1 stops there too, else it would wait in the next.
    EXPECT_FALSE(model.Forward(b, cache, &logits, [&polls] { return ++polls == 2; }));
    EXPECT_GE(polls, 2);
    EXPECT_TRUE(logits.empty());
    // The same pass again runs to the end on both ranks.
    EXPECT_TRUE(model.Forward(b, cache, &whole));
    EXPECT_EQ(whole.size(), static_cast<size_t>(model.config().vocab_size));
  });
}

TEST(TensorParallel, ABfpSliceThatCutsATileIsAClearError) {
  const ModelConfig c = LoadConfig(test::FixtureDir("mha_seq_bf16"));  // 4 heads of 16
  try {  // 4 ranks: one head each, 48 QKV rows
    CheckBfpSlices(c, 8, 4, WeightSpec::Parse("bfp8"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "--weights bfp8 with --tensor-parallel 4: rank 0's slice "
                  "of transformer.h.0.self_attention.query_key_value.weight (rows [0, 48) of 192)"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--weights attn=bf16"), std::string::npos) << e.what();
  }
  CheckBfpSlices(c, 8, 4, WeightSpec::Parse("mlp=bfp8,lm_head=bfp4"));  // 64 MLP units a rank
  CheckBfpSlices(c, 8, 4, WeightSpec::Parse("bf16"));
  CheckBfpSlices(c, 8, 2, WeightSpec::Parse("bfp4"));
  // The loader refuses it on every rank alike, before reading the weights.
  auto group = MakeThreadGroup(4);
  ModelOptions o = Exact("bfp4");
  o.tensor_group = group[2].get();
  EXPECT_THROW(DecoderModel::Load(test::FixtureDir("mha_seq_bf16"), o), Error);
}

TEST(TensorParallel, ASplitThatDoesNotDivideTheHeadsIsAClearError) {
  const ModelConfig c = LoadConfig(test::FixtureDir("newarch_gqa_f32"));  // 2 KV heads
  try {
    TensorSplit::Make(c, 8, 0, 3);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tensor-parallel 3 must divide the model's 2 KV heads"),
              std::string::npos)
        << e.what();
  }
  try {  // one KV head and 5 query heads
    TensorSplit::Make(LoadConfig(test::FixtureDir("mq_bias_bf16")), 8, 1, 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("with one KV head, its 5 query heads"), std::string::npos)
        << e.what();
  }
  try {
    TensorSplit::Make(c, 1, 0, 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--lm-head-fractures 1 must be a multiple of"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace wc

namespace wc {
namespace {

// A GGUF file's quantized blocks split along whole blocks (the format table's tp_cols): two ranks
// of a Q8_0 file against the whole model; four would cut the 32-value blocks of the 64-wide rows,
// which every rank refuses in one line naming the tensor.
TEST(TensorParallel, AGgufFileSplitsOnWholeBlocks) {
  const std::string file = test::FixtureDir("gguf/mq_q8_0.gguf");
  const std::vector<int> ids = {1, 5, 9, 2, 7, 3};
  auto whole = DecoderModel::Load(file, Exact());
  const std::vector<float> ref = RunModel(*whole, ids);
  std::vector<float> two;
  OnRanks(file, 2, [&](const DecoderModel& model) { two = RunModel(model, ids); });
  ASSERT_EQ(two.size(), ref.size());
  EXPECT_LE(test::RelMaxError(two, ref), 1e-5);
  const int vocab = whole->config().vocab_size;
  for (size_t row = 0; row < ref.size() / vocab; ++row)
    EXPECT_EQ(Argmax(&two[row * vocab], vocab), Argmax(&ref[row * vocab], vocab)) << row;

  // Four ranks: each refuses its own slice while loading, before any collective.
  auto group = MakeThreadGroup(4);
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      ModelOptions o = Exact();
      o.tensor_group = group[static_cast<size_t>(r)].get();
      try {
        DecoderModel::Load(file, o);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_NE(errors[1].find("is Q8_0, whose blocks hold 32 columns; this rank's columns [16, 32) "
                           "would cut a block"),
            std::string::npos)
      << errors[1];
  for (const std::string& e : errors) {
    EXPECT_NE(e, "");
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace wc
