// AttentionMeter (mesh/attention_meter.h) as a model's FlashDecodeObserver: one op per layer per
// Forward, the totals the performance model gives those ops, the last op copied for the
// core-grid panel; nothing with the reference attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "mesh/attention_meter.h"
#include "mesh/perf_model.h"
#include "model/decoder_model.h"
#include "tests/test_util.h"

namespace wc {
namespace {

// Records every op it is told of, and passes it on to a meter.
class Recorder final : public FlashDecodeObserver {
 public:
  void OnFlashDecode(const FlashDecodeRun& run) override {
    layers.push_back(run.layer);
    us +=
        EstimateFlashDecode(run.trace, run.mesh, ShapeOf(run.op), run.config.fidelity).emulated_us;
    dram += run.trace.dram_bytes;
    meter.OnFlashDecode(run);
  }
  std::vector<int> layers;
  double us = 0, dram = 0;
  AttentionMeter meter;
};

// Two Forwards (a 3-token prompt, then one decode token) of a fixture model.
void RunTwoSteps(const DecoderModel& model) {
  KVCache cache(model.CacheShape(1, 16), KVCacheOptions{});
  std::vector<float> logits;
  TokenBatch prompt;
  for (int i = 0; i < 3; ++i) prompt.Add(i + 1, 0, i, i == 2);
  ASSERT_TRUE(model.Forward(prompt, cache, &logits));
  TokenBatch next;
  next.Add(4, 0, 3, true);
  ASSERT_TRUE(model.Forward(next, cache, &logits));
}

TEST(AttentionMeter, CountsOneOpPerLayerPerForwardAndKeepsTheLast) {
  std::unique_ptr<DecoderModel> model =
      DecoderModel::Load(test::FixtureDir("newarch_gqa_f32"), ModelOptions{});
  Recorder rec;
  model->set_flash_decode_observer(&rec);
  RunTwoSteps(*model);
  model->set_flash_decode_observer(nullptr);
  const int layers = model->config().n_layers;
  ASSERT_EQ(rec.layers.size(), static_cast<size_t>(2 * layers));
  for (size_t i = 0; i < rec.layers.size(); ++i)
    EXPECT_EQ(rec.layers[i], static_cast<int>(i) % layers);
  const AttentionTotals t = rec.meter.totals();
  EXPECT_EQ(t.ops, 2 * layers);
  EXPECT_EQ(t.emulated_us, rec.us);
  EXPECT_EQ(t.dram_bytes, rec.dram);
  EXPECT_GT(t.emulated_us, 0);
  EXPECT_GT(t.max_cores_used, 0);
  const LastAttention last = rec.meter.last();
  EXPECT_TRUE(last.valid);
  EXPECT_EQ(last.layer, layers - 1);
  EXPECT_EQ(last.bsz, 1);
  EXPECT_GT(last.kv_row_bytes, 0);
  EXPECT_GT(last.trace.cores_used, 0);
}

TEST(AttentionMeter, TheReferenceAttentionReportsNoOp) {
  ModelOptions o;
  o.attention = AttentionImpl::kReference;
  std::unique_ptr<DecoderModel> model = DecoderModel::Load(test::FixtureDir("newarch_gqa_f32"), o);
  AttentionMeter meter;
  model->set_flash_decode_observer(&meter);
  RunTwoSteps(*model);
  EXPECT_EQ(meter.totals().ops, 0);
  EXPECT_FALSE(meter.last().valid);
}

}  // namespace
}  // namespace wc
