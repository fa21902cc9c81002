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
#include "model/falcon.h"
#include "tests/test_util.h"
#include "util/error.h"

namespace wc {
namespace {

std::vector<int> Ids(const std::string& dir) {
  std::istringstream in(test::ReadFile(dir + "/ids.txt"));
  std::vector<int> ids;
  int id;
  while (in >> id) ids.push_back(id);
  return ids;
}

ModelOptions Exact() {
  ModelOptions o;
  o.matmul_precision = ActivationPrecision::kF32;
  return o;
}

// Logits of the prompt fed whole (all positions' logits), then of 3 decode steps feeding the
// argmax, for one rank's model.
std::vector<float> RunModel(const FalconModel& model, const std::vector<int>& ids) {
  KVCache cache(model.CacheShape(1, model.config().max_position_embeddings), KVDType::kF32);
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
  return all;
}

// Each rank's logits from Run, the ranks on threads. [ranks]
std::vector<std::vector<float>> RunRanks(const std::string& dir, int ranks,
                                         std::vector<int64_t>* held = nullptr) {
  auto group = MakeThreadGroup(ranks);
  std::vector<std::vector<float>> out(static_cast<size_t>(ranks));
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  if (held) held->assign(static_cast<size_t>(ranks), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        ModelOptions o = Exact();
        o.tensor_group = group[static_cast<size_t>(r)].get();
        auto model = FalconModel::Load(dir, o);
        if (held) (*held)[static_cast<size_t>(r)] = model->weights().HeldBytes();
        out[static_cast<size_t>(r)] = RunModel(*model, Ids(dir));
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  return out;
}

int Argmax(const float* row, int n) {
  return static_cast<int>(std::max_element(row, row + n) - row);
}

class TensorParallelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TensorParallelTest, TwoRanksGiveTheWholeModelsLogitsAndTokens) {
  const std::string dir = test::FixtureDir(GetParam());
  auto whole = FalconModel::Load(dir, Exact());
  const std::vector<float> ref = RunModel(*whole, Ids(dir));
  std::vector<int64_t> held;
  const auto ranks = RunRanks(dir, 2, &held);
  ASSERT_EQ(ranks[0].size(), ref.size());
  EXPECT_LE(test::RelMaxError(ranks[0], ref), 1e-5) << GetParam();
  EXPECT_EQ(0, std::memcmp(ranks[0].data(), ranks[1].data(), ref.size() * sizeof(float)))
      << "every rank gets the same logits";
  const int vocab = whole->config().vocab_size;
  for (size_t row = 0; row < ref.size() / vocab; ++row)
    EXPECT_EQ(Argmax(&ranks[0][row * vocab], vocab), Argmax(&ref[row * vocab], vocab))
        << GetParam() << " row " << row;
  // Run to run: the same bits (the ranks' sum is in rank order).
  EXPECT_EQ(RunRanks(dir, 2)[0], ranks[0]) << GetParam();
  // Each rank holds its slice: together about the whole model's matrices, each about half.
  const int64_t all = whole->weights().HeldBytes();
  EXPECT_LT(held[0], all * 0.62) << GetParam();
  EXPECT_LT(held[1], all * 0.62) << GetParam();
  EXPECT_GT(held[0] + held[1], all * 0.98) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Layouts, TensorParallelTest,
                         ::testing::Values("newarch_gqa_f32", "newarch_gqa_bias_bf16",
                                           "newarch_1ln_f16", "mq_f32", "mha_bias_f32",
                                           "mha_seq_bf16"));  // (mq_bias_bf16: 5 heads)

TEST(TensorParallel, AnInterruptOnRankZeroStopsEveryRank) {
  const std::string dir = test::FixtureDir("newarch_gqa_f32");
  auto group = MakeThreadGroup(2);
  bool returned[2] = {true, true};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      ModelOptions o = Exact();
      o.tensor_group = group[static_cast<size_t>(r)].get();
      auto model = FalconModel::Load(dir, o);
      KVCache cache(model->CacheShape(1, 64), KVDType::kF32);
      TokenBatch b;
      for (int i = 0; i < 8; ++i) b.Add(i + 3, 0, i, i == 7);
      std::vector<float> logits;
      int polls = 0;
      FalconModel::Interrupt stop = [&polls] { return ++polls == 2; };  // in the second layer
      returned[r] = model->Forward(b, cache, &logits, r == 0 ? stop : nullptr);
    });
  for (auto& t : threads) t.join();
  EXPECT_FALSE(returned[0]);
  EXPECT_FALSE(returned[1]);
}

TEST(TensorParallel, ASplitThatDoesNotDivideTheHeadsIsAClearError) {
  const FalconConfig c = LoadConfig(test::FixtureDir("newarch_gqa_f32"));  // 2 KV heads
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
