// The speculative-decode what-if of the whole decode step (meshmodel/speculation.h): the verify
// step is the decode-step model with k + 1 tokens a user (rows in the matmuls, causal queries in
// FlashDecode reading each user's KV once), its time grows with k, k = 0 is the plain decode
// estimate, and the table's tokens/s/user follow E = (1 - a^(k+1)) / (1 - a) over the step times.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mesh/experiments.h"
#include "meshmodel/decode_step.h"
#include "meshmodel/speculation.h"
#include "meshmodel/tt_graph.h"
#include "model/config.h"
#include "util/error.h"

namespace wc {
namespace {

TEST(Speculation, ExpectedTokensFollowTheGeometricSum) {
  EXPECT_EQ(ExpectedTokensPerStep(0, 0.7), 1.0);
  EXPECT_EQ(ExpectedTokensPerStep(4, 0.0), 1.0);
  EXPECT_EQ(ExpectedTokensPerStep(4, 1.0), 5.0);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(2, 0.5), 1.75);  // 1 + 0.5 + 0.25
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(8, 0.9), (1 - std::pow(0.9, 9)) / 0.1);
  EXPECT_THROW(ExpectedTokensPerStep(-1, 0.5), Error);
  EXPECT_THROW(ExpectedTokensPerStep(2, 1.5), Error);
}

TEST(Speculation, AVerifyStepRunsUsersTimesKPlusOneRowsAndReadsTheKvOnce) {
  const ModelConfig c = PresetConfig("falcon-40b");
  TtGraphOptions g;
  g.chips = 8;
  g.flash_decode = true;
  const TtGraph plain = BuildTtGraph(c, g);
  g.tokens_per_user = 5;  // k = 4
  const TtGraph verify = BuildTtGraph(c, g);
  ASSERT_EQ(plain.ops.size(), verify.ops.size());
  for (size_t i = 0; i < plain.ops.size(); ++i) {
    const TtOp &p = plain.ops[i], &v = verify.ops[i];
    if (p.kind == TtOpKind::kMatmul) {
      EXPECT_EQ(p.m_tiles, 1) << p.name;                                  // 32 users: one tile row
      EXPECT_EQ(v.m_tiles, 5) << v.name;                                  // 160 rows
      EXPECT_EQ(v.k_tiles * v.n_tiles, p.k_tiles * p.n_tiles) << v.name;  // weights read once
    }
    if (p.kind == TtOpKind::kFlashDecode) {
      EXPECT_EQ(v.batch, 32);
      EXPECT_EQ(v.q_len, 5);
      EXPECT_EQ(p.q_len, 1);
    }
  }
  EXPECT_EQ(verify.weight_bytes, plain.weight_bytes);
  // The attention of 32 users x 5 queries costs less than 160 users' single queries (the KV of
  // each user read once), more than 32 users' single queries.
  MeshBenchConfig a;
  a.experiment = "decode-step";
  a.mesh = "n150";
  a.bsz = 32;
  a.n_q_heads = 16;
  a.n_kv_heads = 1;
  a.head_dim = 64;
  a.kv_len = 132;
  a.reduction = Reduction::kTree;
  MeshBenchConfig multi = a, many = a;
  multi.q_len = 5;
  many.bsz = 160;
  const double one_us = RunMeshBenchConfig(a).emulated_us;
  const double multi_us = RunMeshBenchConfig(multi).emulated_us;
  EXPECT_GT(multi_us, one_us);
  EXPECT_LT(multi_us, RunMeshBenchConfig(many).emulated_us);
  // A verify step needs decode's FlashDecode and at most 16 proposals.
  g.flash_decode = false;
  EXPECT_THROW(BuildTtGraph(c, g), Error);
  g.flash_decode = true;
  g.tokens_per_user = 18;
  EXPECT_THROW(BuildTtGraph(c, g), Error);
}

TEST(Speculation, StepTimeGrowsWithKAndTheTableFollowsTheFormula) {
  const ModelConfig c = PresetConfig("falcon-40b");
  DecodeStepOptions base;  // t3k, 32 users, ctx 128
  const std::vector<SpeculationPoint> t = DefaultSpeculationWhatIf(c, base);
  ASSERT_EQ(t.size(), 1u + 3 * 3);
  // k = 0 is the plain decode estimate (FlashDecode attention).
  DecodeStepOptions flash = base;
  flash.flash_decode = true;
  const DecodeStepEstimate plain = EstimateDecodeStep(c, flash);
  EXPECT_EQ(t[0].k, 0);
  EXPECT_EQ(t[0].step_us, plain.step_us);
  EXPECT_EQ(t[0].tokens_per_s_per_user, plain.tokens_per_s_per_user);
  EXPECT_EQ(t[0].expected_tokens, 1.0);
  double last_step = t[0].step_us;
  size_t i = 1;
  for (int k : {2, 4, 8}) {
    DecodeStepOptions v = flash;
    v.tokens_per_user = k + 1;
    const double step_us = EstimateDecodeStep(c, v).step_us;
    EXPECT_GT(step_us, last_step) << "k " << k;
    last_step = step_us;
    for (double a : {0.5, 0.7, 0.9}) {
      const SpeculationPoint& p = t[i++];
      EXPECT_EQ(p.k, k);
      EXPECT_EQ(p.acceptance, a);
      EXPECT_EQ(p.step_us, step_us);
      const double e = (1 - std::pow(a, k + 1)) / (1 - a);
      EXPECT_DOUBLE_EQ(p.expected_tokens, e);
      EXPECT_DOUBLE_EQ(p.tokens_per_s_per_user, e * 1e6 / step_us);
      EXPECT_DOUBLE_EQ(p.speedup, p.tokens_per_s_per_user / t[0].tokens_per_s_per_user);
    }
  }
  // Weight-bound decode: a verify step costs far less than k + 1 plain steps.
  EXPECT_LT(t.back().step_us, 9 * t[0].step_us);
  DecodeStepOptions prefill = base;
  prefill.phase = TtPhase::kPrefill;
  prefill.users = 1;
  EXPECT_THROW(DefaultSpeculationWhatIf(c, prefill), Error);
}

}  // namespace
}  // namespace wc
