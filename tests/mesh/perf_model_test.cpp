// The performance model (mesh/perf_model.h) against the seed's findings (seed 000 §4;
// docs/references.md), and the mesh-bench experiments and their CSV (`wormchat mesh-bench` end to
// end, the gnuplot PNG included: tests/app/mesh_cli_test.cpp). No host timing is asserted
// anywhere: the model's time is deterministic.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "attention/flash_decode.h"
#include "kvcache/kv_view.h"
#include "mesh/experiments.h"
#include "mesh/perf_model.h"
#include "util/error.h"

namespace wc {
namespace {

// Model time of one FlashDecode op (a planning run, no math).
PerfEstimate FlashDecodeTime(const std::string& mesh_name, int bsz, int n_q, int n_kv, int head_dim,
                             int kv_len, double row_bytes, int max_cores,
                             Reduction reduction = Reduction::kFlat,
                             MathFidelity fidelity = MathFidelity::kHiFi2,
                             const float* alibi_slopes = nullptr, bool causal = false) {
  const MeshSpec mesh = MeshPreset(mesh_name);
  const ShapeOnlyKV kv(row_bytes, head_dim);
  DecodeAttentionOp op;
  op.bsz = bsz;
  op.n_q_heads = n_q;
  op.n_kv_heads = n_kv;
  op.head_dim = head_dim;
  op.kv_len = kv_len;
  op.kv = &kv;
  op.causal = false;
  const std::vector<int32_t> last(static_cast<size_t>(bsz), kv_len - 1);
  if (causal) {  // every user at the cache's last position: the whole cache seen
    op.causal = true;
    op.cur_pos = last.data();
  }
  op.alibi = AlibiBias{alibi_slopes, true};  // needs causal
  const FlashDecodeConfig cfg{0, max_cores, reduction, fidelity};
  const OpTrace trace = FlashDecodeEngine(mesh, cfg).Run(op, /*compute=*/false);
  return EstimateFlashDecode(trace, mesh, ShapeOf(op), fidelity);
}

double Bfp8Row(int head_dim) {
  return head_dim * 1088.0 / 1024.0;
}

// Rows of an experiment keyed by (experiment, mesh, bsz, head_dim, kv_len, max_cores, reduction).
using Key = std::tuple<std::string, std::string, int, int, int, int, std::string>;
std::map<Key, MeshBenchRow> Index(const std::vector<MeshBenchRow>& rows) {
  std::map<Key, MeshBenchRow> m;
  for (const auto& r : rows) {
    const MeshBenchConfig& c = r.config;
    m[{c.experiment, c.mesh, c.bsz, c.head_dim, c.kv_len, c.max_cores_per_head,
       c.baseline ? "none" : ReductionName(c.reduction)}] = r;
  }
  return m;
}

class SeedExperiments : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fig34_ = new std::vector<MeshBenchRow>(RunMeshExperiment("seed-fig3-4"));
    fig5_ = new std::vector<MeshBenchRow>(RunMeshExperiment("seed-fig5"));
  }
  static void TearDownTestSuite() {
    delete fig34_;
    delete fig5_;
  }
  static std::vector<MeshBenchRow>* fig34_;
  static std::vector<MeshBenchRow>* fig5_;
};
std::vector<MeshBenchRow>* SeedExperiments::fig34_ = nullptr;
std::vector<MeshBenchRow>* SeedExperiments::fig5_ = nullptr;

// Seed §4.1: "on average 2-10x faster than the baseline". The baseline is TTNN's unfused decode
// attention as tt-metal's Falcon-7B ran it (K sliced and transposed, a KV head's query heads as the
// rows of one tile row, the scores' DRAM round trips through scale, mask and softmax): every
// Figure 3/4 shape lands inside the seed's range.
TEST_F(SeedExperiments, FlashDecodeBeatsTheBaselineOnEveryFig34Shape) {
  const auto idx = Index(*fig34_);
  int pairs = 0;
  double log_sum = 0;
  for (const auto& b : *fig34_) {
    if (!b.config.baseline) continue;
    const MeshBenchConfig& c = b.config;
    const auto f = idx.find({"seed-fig3-4", "n150", c.bsz, c.head_dim, c.kv_len, 16, "flat"});
    ASSERT_NE(f, idx.end());
    const double speedup = b.emulated_us / f->second.emulated_us;
    EXPECT_GE(speedup, 2.0) << "bsz " << c.bsz << " head_dim " << c.head_dim << " kv " << c.kv_len;
    EXPECT_LE(speedup, 10.0) << "bsz " << c.bsz << " head_dim " << c.head_dim << " kv " << c.kv_len;
    log_sum += std::log(speedup);
    ++pairs;
  }
  EXPECT_EQ(pairs, 45);  // 3 bsz x 3 head_dim x 5 lengths (1k-16k)
  const double mean = std::exp(log_sum / pairs);
  EXPECT_GE(mean, 2.0);
  EXPECT_LE(mean, 10.0);
}

// The same check from the committed CSV (mesh/plots/seed-fig3-4.csv), which the README's
// figures come from: it must agree with the model as built.
TEST(SeedPlots, CommittedFig34CsvShowsTwoToTenX) {
  std::ifstream in(std::string(WORMCHAT_TEST_DATA) + "/../mesh/plots/seed-fig3-4.csv");
  ASSERT_TRUE(in.good());
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  for (std::stringstream h(line); std::getline(h, line, ',');) header.push_back(line);
  auto col = [&](const char* name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  std::map<std::tuple<std::string, std::string, std::string>, double> fd, base;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    for (std::stringstream l(line); std::getline(l, line, ',');) f.push_back(line);
    ASSERT_EQ(f.size(), header.size());
    const auto key = std::make_tuple(f[col("bsz")], f[col("head_dim")], f[col("kv_len")]);
    const double us = std::stod(f[col("emulated_us")]);
    if (f[col("experiment")] == "seed-fig3-4-baseline")
      base[key] = us;
    else if (f[col("max_cores_per_head")] == "16" && f[col("reduction")] == "flat")
      fd[key] = us;
  }
  ASSERT_EQ(base.size(), 45u);
  for (const auto& [key, us] : base) {
    ASSERT_TRUE(fd.count(key));
    EXPECT_GE(us / fd[key], 2.0);
    EXPECT_LE(us / fd[key], 10.0);
  }
}

// Seed §4.1: "up to 180 GB/s ... ~70% of" the achievable bandwidth, at long kv_len.
TEST_F(SeedExperiments, DramBandwidthAt128kIsAbout180) {
  int n = 0;
  for (const auto& r : *fig34_) {
    if (r.config.experiment != "seed-fig3-4" || r.config.kv_len != 128 * 1024) continue;
    EXPECT_GT(r.dram_gbps, 165.0) << "bsz " << r.config.bsz << " head_dim " << r.config.head_dim;
    EXPECT_LT(r.dram_gbps, 195.0) << "bsz " << r.config.bsz << " head_dim " << r.config.head_dim;
    EXPECT_EQ(r.cores_used, 64);
    ++n;
  }
  EXPECT_EQ(n, 9);
}

// Once every core streams, time grows linearly in kv_len: doubling the length doubles the
// increment.
TEST_F(SeedExperiments, LinearInKvLenPastSaturation) {
  const auto idx = Index(*fig34_);
  for (int hd : {64, 128, 256}) {
    auto t = [&](int len) {
      return idx.at({"seed-fig3-4", "n150", 32, hd, len, 16, "flat"}).emulated_us;
    };
    const double d1 = t(64 * 1024) - t(32 * 1024), d2 = t(128 * 1024) - t(64 * 1024);
    EXPECT_NEAR(d2 / d1, 2.0, 0.1) << "head_dim " << hd;
  }
  const auto idx5 = Index(*fig5_);
  for (const char* red : {"flat", "tree"}) {
    auto t = [&](int len) {
      return idx5.at({"seed-fig5", "t3k", 1, 128, len, 16, red}).emulated_us;
    };
    const double d1 = t(64 * 1024) - t(32 * 1024), d2 = t(128 * 1024) - t(64 * 1024);
    EXPECT_NEAR(d2 / d1, 2.0, 0.1) << red;
  }
}

// Seed §4.2: a steeper first slope while not every core has a chunk (the flat reducer merges one
// more partial per added core), then the DRAM-bound slope.
TEST_F(SeedExperiments, SteeperFirstSlopeWhileCoresFillUp) {
  const auto idx = Index(*fig5_);
  for (int cores : {16, 32, 64}) {
    auto t = [&](int len) {
      return idx.at({"seed-fig5", "t3k", 1, 128, len, cores, "flat"}).emulated_us;
    };
    const int full = cores * 512;  // 512-row chunks: every core busy from here on
    const double first = (t(full) - t(1024)) / (full - 1024);
    const double second = (t(128 * 1024) - t(64 * 1024)) / (64 * 1024);
    EXPECT_GT(first, 1.5 * second) << cores << " cores";
  }
}

// Seed §4.2: on t3k (4 q / 1 KV head per chip) 16 cores per head beat 64.
TEST_F(SeedExperiments, T3kSixteenCoresPerHeadBeatSixtyFour) {
  const auto idx = Index(*fig5_);
  for (const char* red : {"flat", "tree"}) {
    for (int len : {64 * 1024, 128 * 1024}) {
      const double t16 = idx.at({"seed-fig5", "t3k", 1, 128, len, 16, red}).emulated_us;
      const double t64 = idx.at({"seed-fig5", "t3k", 1, 128, len, 64, red}).emulated_us;
      EXPECT_LT(t16, t64) << red << " kv_len " << len;
    }
  }
  // The flat reducer is where 64 cores hurt most: it merges 63 partials after the last arrives.
  const double flat64 = idx.at({"seed-fig5", "t3k", 1, 128, 128 * 1024, 64, "flat"}).emulated_us;
  const double tree64 = idx.at({"seed-fig5", "t3k", 1, 128, 128 * 1024, 64, "tree"}).emulated_us;
  EXPECT_GT(flat64, tree64);
}

// More chips for the same heads: each chip streams fewer bytes, so the op is faster.
TEST_F(SeedExperiments, TensorParallelismHelps) {
  const auto idx = Index(*fig5_);
  double prev = 1e30;
  for (const char* mesh : {"n150", "n300", "n300x2", "t3k"}) {
    const double t = idx.at({"seed-fig5", mesh, 1, 128, 128 * 1024, 16, "flat"}).emulated_us;
    EXPECT_LT(t, prev) << mesh;
    prev = t;
  }
}

TEST(PerfModel, MoreDramBytesTakeLonger) {
  // The same shape with bf16 K/V (2 bytes a value) against BFP8 (1.0625).
  const PerfEstimate bfp8 = FlashDecodeTime("n150", 16, 8, 1, 128, 32768, Bfp8Row(128), 16);
  const PerfEstimate bf16 = FlashDecodeTime("n150", 16, 8, 1, 128, 32768, 2.0 * 128, 16);
  EXPECT_GT(bf16.dram_bytes, bfp8.dram_bytes);
  EXPECT_GT(bf16.emulated_us, 1.5 * bfp8.emulated_us);
  // Longer caches, wider heads: more bytes, more time.
  double prev = 0;
  for (int len = 1024; len <= 65536; len *= 2) {
    const double t = FlashDecodeTime("n150", 8, 8, 1, 64, len, Bfp8Row(64), 16).emulated_us;
    EXPECT_GT(t, prev) << len;
    prev = t;
  }
  EXPECT_GT(FlashDecodeTime("n150", 8, 8, 1, 256, 8192, Bfp8Row(256), 16).emulated_us,
            FlashDecodeTime("n150", 8, 8, 1, 128, 8192, Bfp8Row(128), 16).emulated_us);
  const WormholeChipSpec chip;
  EXPECT_GT(DramReadNs(chip, 200, 1088, 64, 64), DramReadNs(chip, 100, 1088, 64, 64));
  EXPECT_GT(DramReadNs(chip, 100, 1088, 64, 64), DramReadNs(chip, 100, 1088, 8, 64));
}

// Falcon-RW's ALiBi adds one bias tile op per score tile, made on the core (no mask read): the
// same bytes, a longer compute where compute bounds the op (8 cores per head on t3k at 128k).
TEST(PerfModel, AlibiCostsComputeNotBytes) {
  const std::vector<float> slopes = AlibiSlopes(32);
  const PerfEstimate plain = FlashDecodeTime("t3k", 1, 32, 32, 64, 131072, 2.0 * 64, 8,
                                             Reduction::kFlat, MathFidelity::kHiFi2, nullptr, true);
  const PerfEstimate alibi =
      FlashDecodeTime("t3k", 1, 32, 32, 64, 131072, 2.0 * 64, 8, Reduction::kFlat,
                      MathFidelity::kHiFi2, slopes.data(), true);
  EXPECT_EQ(alibi.dram_bytes, plain.dram_bytes);
  EXPECT_GT(alibi.emulated_us, plain.emulated_us);
  EXPECT_LT(alibi.emulated_us, 1.5 * plain.emulated_us);
}

TEST(PerfModel, FidelityAndLaunchBound) {
  // 8 cores per head on t3k are compute-bound at long kv_len: fidelity shows.
  const double lofi = FlashDecodeTime("t3k", 1, 32, 8, 128, 131072, Bfp8Row(128), 8,
                                      Reduction::kFlat, MathFidelity::kLoFi)
                          .emulated_us;
  const double hifi4 = FlashDecodeTime("t3k", 1, 32, 8, 128, 131072, Bfp8Row(128), 8,
                                       Reduction::kFlat, MathFidelity::kHiFi4)
                           .emulated_us;
  EXPECT_GT(hifi4, lofi);
  // Never faster than a kernel launch.
  const WormholeChipSpec chip;
  const PerfEstimate tiny = FlashDecodeTime("n150", 1, 8, 1, 64, 32, Bfp8Row(64), 16);
  EXPECT_GT(tiny.emulated_us, chip.kernel_launch_cycles / chip.clock_ghz / 1000.0);
  EXPECT_GT(tiny.reduced_us, tiny.launch_us);
}

TEST(PerfModel, BaselineStopsWhereItsScoreRowOverflowsL1) {
  const MeshSpec mesh = MeshPreset("n150");
  AttentionShape s;
  s.bsz = 8;
  s.n_q_heads = 8;
  s.n_kv_heads = 1;
  s.head_dim = 128;
  s.kv_row_bytes = Bfp8Row(128);
  s.kv_len = 16384;
  EXPECT_TRUE(EstimateBaselineAttention(mesh, s, MathFidelity::kHiFi2).feasible);
  s.kv_len = 32768;
  const PerfEstimate e = EstimateBaselineAttention(mesh, s, MathFidelity::kHiFi2);
  EXPECT_FALSE(e.feasible);
  EXPECT_NE(e.note.find("L1"), std::string::npos) << e.note;
  MeshBenchConfig c;
  c.baseline = true;
  c.mesh = "n150";
  c.kv_len = 32768;
  EXPECT_THROW(RunMeshBenchConfig(c), Error);
}

TEST(MeshBench, CsvHasExactlyTheHeaderAndOneRowPerConfiguration) {
  EXPECT_STREQ(MeshBenchCsvHeader(),
               "experiment,mesh,chips,bsz,n_q_heads,n_kv_heads,head_dim,kv_len,kv_dtype,"
               "max_cores_per_head,cores_used,reduction,emulated_us,dram_gbps,tflops,noc_bytes");
  for (const char* name : {"seed-fig3-4", "seed-fig5"}) {
    const auto configs = MeshExperimentConfigs(name);
    const auto rows = RunMeshExperiment(name);
    ASSERT_EQ(rows.size(), configs.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string line = MeshBenchCsvLine(rows[i]);
      EXPECT_EQ(std::count(line.begin(), line.end(), ','), 15) << line;
      EXPECT_EQ(line.rfind(configs[i].experiment + "," + configs[i].mesh + ",", 0), 0u) << line;
    }
  }
  EXPECT_EQ(MeshExperimentConfigs("all").size(), MeshExperimentConfigs("seed-fig3-4").size() +
                                                     MeshExperimentConfigs("seed-fig5").size());
  try {
    MeshExperimentConfigs("fig9");
    FAIL() << "accepted an unknown experiment";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--experiment 'fig9'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("seed-fig3-4, seed-fig5"), std::string::npos);
  }
}

TEST(MeshBench, PlanningRunsAreDeterministic) {
  const auto a = RunMeshExperiment("seed-fig5");
  const auto b = RunMeshExperiment("seed-fig5");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(MeshBenchCsvLine(a[i]), MeshBenchCsvLine(b[i]));
}

}  // namespace
}  // namespace wc
