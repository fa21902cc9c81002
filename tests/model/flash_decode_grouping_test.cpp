// DecoderModel's FlashDecode attention groups the consecutive tokens of one user row at consecutive
// positions (a prompt chunk, a speculative verify chunk) into one user of the op with several
// queries - its cached K/V read once - and every token's logits stay those it gets fed alone.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "model/decoder_model.h"
#include "tests/test_util.h"

namespace wc {
namespace {

// Each op's users, their query counts and the K/V bytes its trace read.
class OpRecorder final : public FlashDecodeObserver {
 public:
  struct Op {
    int bsz = 0, tokens = 0;
    std::vector<int> q_len;
    double dram_bytes = 0;
  };
  void OnFlashDecode(const FlashDecodeRun& run) override {
    Op op;
    op.bsz = run.op.bsz;
    op.tokens = run.op.tokens();
    for (int b = 0; b < run.op.bsz; ++b)
      op.q_len.push_back(run.op.q_len == nullptr ? 1 : run.op.q_len[b]);
    op.dram_bytes = run.trace.dram_bytes;
    ops.push_back(op);
  }
  std::vector<Op> ops;
};

// Two rows: row 0 has a 4-token prompt, row 1 a 2-token prompt (one token at a time), then one
// step carries row 0's verify chunk (positions 4..7), row 1's single decode token (position 2) and
// row 0's chunk again out of order (position 9 after 7: not consecutive, its own user).
TEST(FlashDecodeGrouping, AChunkOfOneRowIsOneUserAndEachTokenKeepsItsLogits) {
  std::unique_ptr<DecoderModel> model =
      DecoderModel::Load(test::FixtureDir("newarch_gqa_f32"), ModelOptions{});
  const int layers = model->config().n_layers;
  auto prefill = [&](KVCache& cache) {
    std::vector<float> logits;
    for (int p = 0; p < 4; ++p) {
      TokenBatch b;
      b.Add(10 + p, 0, p, false);
      if (p < 2) b.Add(20 + p, 1, p, false);
      ASSERT_TRUE(model->Forward(b, cache, &logits));
    }
  };
  TokenBatch step;  // [7 tokens]
  for (int p = 4; p < 8; ++p) step.Add(30 + p, 0, p, true);
  step.Add(40, 1, 2, true);
  step.Add(41, 0, 9, true);  // position 8 left empty: attention reads only what was written
  KVCache grouped(model->CacheShape(2, 16), KVDType::kBF16);
  prefill(grouped);
  OpRecorder rec;
  model->set_flash_decode_observer(&rec);
  std::vector<float> together;
  ASSERT_TRUE(model->Forward(step, grouped, &together));
  model->set_flash_decode_observer(nullptr);
  ASSERT_EQ(rec.ops.size(), static_cast<size_t>(layers));
  for (const auto& op : rec.ops) {
    EXPECT_EQ(op.bsz, 3);
    EXPECT_EQ(op.tokens, 6);
    EXPECT_EQ(op.q_len, (std::vector<int>{4, 1, 1}));
  }

  // The same tokens fed one per Forward, in order: each token its own op user (read each time).
  KVCache alone(model->CacheShape(2, 16), KVDType::kBF16);
  prefill(alone);
  OpRecorder one;
  model->set_flash_decode_observer(&one);
  std::vector<float> each, logits;
  for (size_t t = 0; t < step.size(); ++t) {
    TokenBatch b;
    b.Add(step.tokens[t], step.user_rows[t], step.positions[t], true);
    ASSERT_TRUE(model->Forward(b, alone, &logits));
    each.insert(each.end(), logits.begin(), logits.end());
  }
  model->set_flash_decode_observer(nullptr);
  ASSERT_EQ(together.size(), each.size());
  EXPECT_EQ(0, std::memcmp(together.data(), each.data(), each.size() * sizeof(float)));
  double bytes_together = 0, bytes_each = 0;
  for (const auto& op : rec.ops) bytes_together += op.dram_bytes;
  for (const auto& op : one.ops) bytes_each += op.dram_bytes;
  EXPECT_LT(bytes_together, bytes_each) << "row 0's chunk must read its cached K/V once";
}

}  // namespace
}  // namespace wc
