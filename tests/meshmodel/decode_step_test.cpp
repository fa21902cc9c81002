// The whole-model decode step on the emulated mesh (mesh/): each cost formula against a
// hand-computed example, the ring collectives against a hand-computed ring, the step's
// bookkeeping, and the mesh-bench experiment's CSV / JSON (the committed CSV included).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshmodel/collectives.h"
#include "meshmodel/decode_step.h"
#include "meshmodel/model_estimate.h"
#include "meshmodel/op_costs.h"
#include "model/config.h"
#include "model/falcon.h"
#include "tests/test_util.h"
#include "util/error.h"

namespace wc {
namespace {

TEST(Collectives, RingAllGatherReduceScatterAndAllReduceByHand) {
  RingSpec ring;  // 12.5 GB/s per direction, 0.7 us a hop
  ring.chips = 8;
  ring.links = 1;
  const double s = 278528;  // [32, 8192] in bfp8 tiles: 256 x 1088 bytes
  // Bidirectional all-gather: 4 steps; 7/8 of S, half each way, on one link.
  const CollectiveCost ag = RingCollective(CollectiveKind::kAllGather, ring, s);
  EXPECT_EQ(ag.steps, 4);
  EXPECT_NEAR(ag.bytes_per_link, 121856.0, 1e-6);
  EXPECT_NEAR(ag.us, 4 * 0.7 + 121856.0 / 12.5 / 1000.0, 1e-9);
  // Unidirectional reduce-scatter: 7 steps, all 7/8 of S one way.
  ring.bidirectional = false;
  const CollectiveCost rs = RingCollective(CollectiveKind::kReduceScatter, ring, s);
  EXPECT_EQ(rs.steps, 7);
  EXPECT_NEAR(rs.us, 7 * 0.7 + 243712.0 / 12.5 / 1000.0, 1e-9);
  // All-reduce: a reduce-scatter and an all-gather.
  EXPECT_NEAR(RingCollective(CollectiveKind::kAllReduce, ring, s).us, 2 * rs.us, 1e-9);
  // Two links halve the bytes per link, not the steps.
  ring.links = 2;
  EXPECT_NEAR(RingCollective(CollectiveKind::kReduceScatter, ring, s).us,
              7 * 0.7 + 121856.0 / 12.5 / 1000.0, 1e-9);
  ring.chips = 1;
  EXPECT_EQ(RingCollective(CollectiveKind::kAllGather, ring, s).us, 0.0);
  ring.chips = 0;
  EXPECT_THROW(RingCollective(CollectiveKind::kAllGather, ring, s), Error);
}

TEST(OpCosts, MatmulIsTheLargerOfWeightStreamingAndComputeByHand) {
  const WormholeChipSpec chip;  // 256 GB/s achievable, 64 cores, 1 GHz, LoFi 16 cycles a tile
  // [32, 8192] x [8192, 4096] in bfp8: 256 x 128 weight tiles of 1088 bytes + 256 bf16
  // activation tiles of 2048, over 256 GB/s.
  const OpCost mlp = MatmulCost(chip, 32, 8192, 4096, TileFormat::kBFP8, MathFidelity::kLoFi);
  EXPECT_DOUBLE_EQ(mlp.dram_bytes, 32768.0 * 1088 + 256.0 * 2048);
  EXPECT_NEAR(mlp.dram_us, (32768.0 * 1088 + 256.0 * 2048) / 256.0 / 1000.0, 1e-9);
  // 128 output tiles over 64 cores: 2 each, 256 k-tiles each, 16 cycles a product.
  EXPECT_NEAR(mlp.compute_us, 2 * 256 * 16 / 1000.0, 1e-9);
  EXPECT_NEAR(mlp.us, 2.0 + mlp.dram_us, 1e-9);  // launch (2000 cycles) + DRAM-bound body
  // A compute-bound shape (1024 user rows at HiFi4): compute wins.
  const OpCost big = MatmulCost(chip, 1024, 1024, 1024, TileFormat::kBF16, MathFidelity::kHiFi4);
  EXPECT_NEAR(big.compute_us, 16 * 32 * 64 / 1000.0, 1e-9);  // 1024 tiles / 64 cores, 32 k-tiles
  EXPECT_GT(big.compute_us, big.dram_us);
  EXPECT_NEAR(big.us, 2.0 + big.compute_us, 1e-9);
  EXPECT_EQ(TileBytes(TileFormat::kBFP4), 576.0);
}

TEST(OpCosts, EltwiseByHand) {
  const WormholeChipSpec chip;
  // A layer norm of [32, 8192]: 256 tiles over 64 cores, 6 passes of 64 cycles.
  const OpCost ln = EltwiseCost(chip, 256, 6, 0);
  EXPECT_NEAR(ln.us, 2.0 + 4 * 6 * 64 / 1000.0, 1e-9);
  const OpCost copy = EltwiseCost(chip, 0, 0, 256000);
  EXPECT_NEAR(copy.us, 2.0 + 1.0, 1e-9);  // 256 KB at 256 GB/s
}

TEST(DecodeStep, OpsAddUpAndCountEveryLayer) {
  const FalconConfig c = PresetConfig("falcon-40b");
  DecodeStepOptions o;  // t3k, 32 users, ctx 128, bfp8
  const DecodeStepEstimate e = EstimateDecodeStep(c, o);
  EXPECT_EQ(e.chips, 8);
  double sum = 0, parts = 0;
  std::map<std::string, int> runs;
  for (const StepOp& op : e.ops) {
    sum += op.us;
    parts += op.dram_us + op.compute_us + op.eth_us + op.launch_us;
    runs[op.name] = op.per_step;
  }
  EXPECT_NEAR(sum, e.step_us, 1e-6 * e.step_us);
  EXPECT_NEAR(parts, e.step_us, 1e-6 * e.step_us);
  EXPECT_EQ(runs["attention"], 60);
  EXPECT_EQ(runs["all_gather"], 2 * 60 + 1);
  EXPECT_EQ(runs["reduce_scatter"], 60);
  EXPECT_EQ(runs["mlp"], 120);
  EXPECT_EQ(runs["lm_head"], 1);
  EXPECT_NEAR(e.tokens_per_s_per_user, 1e6 / e.step_us, 1e-9);
  EXPECT_NEAR(e.tokens_per_s, 32 * e.tokens_per_s_per_user, 1e-9);
  // Weights: 60 layers of [8192, 1152 + 1024 + 2 x 4096] per chip and the LM head's 65024 / 8
  // columns (65024 already splits into 8 fractures of whole tiles), in bfp8 tiles.
  const double tiles = 60.0 * 256 * (36 + 32 + 2 * 128) + 256.0 * 254;
  EXPECT_NEAR(e.weight_bytes_per_chip, tiles * 1088, 1.0);
  // One chip: no collectives.
  o.mesh = "n150";
  for (const StepOp& op : EstimateDecodeStep(c, o).ops)
    EXPECT_TRUE(op.name != "all_gather" && op.name != "reduce_scatter") << op.name;
  // Lighter weights and fewer users can only be faster; a longer context only slower.
  o.mesh = "t3k";
  DecodeStepOptions lighter = o, shorter = o, longer = o;
  lighter.weights = TileFormat::kBFP4;
  longer.ctx = 2048;
  EXPECT_LT(EstimateDecodeStep(c, lighter).step_us, e.step_us);
  EXPECT_GT(EstimateDecodeStep(c, longer).step_us, e.step_us);
  o.ctx = 0;
  EXPECT_THROW(EstimateDecodeStep(c, o), Error);
}

// Per-group weight formats (--weights): each group streams its own tiles; all groups in one format
// is that format; the loaded model's groups set them (ModelTileFormat).
TEST(DecodeStep, WeightGroupsStreamTheirOwnFormats) {
  const FalconConfig c = PresetConfig("falcon-40b");
  DecodeStepOptions o;  // bfp8
  const DecodeStepEstimate e = EstimateDecodeStep(c, o);
  DecodeStepOptions same = o;
  same.weights = TileFormat::kBF16;
  same.attn_weights = same.mlp_weights = same.lm_head_weights = TileFormat::kBFP8;
  EXPECT_EQ(EstimateDecodeStep(c, same).step_us, e.step_us);
  DecodeStepOptions mixed = o;
  mixed.mlp_weights = TileFormat::kBFP4;
  mixed.lm_head_weights = TileFormat::kBF16;
  const double attn_tiles = 60.0 * 256 * (36 + 32), mlp_tiles = 60.0 * 256 * 2 * 128,
               lm_tiles = 256.0 * 254;
  EXPECT_NEAR(EstimateDecodeStep(c, mixed).weight_bytes_per_chip,
              attn_tiles * 1088 + mlp_tiles * 576 + lm_tiles * 2048, 1.0);
  EXPECT_EQ(ModelTileFormat(WeightFormat::kBfp4), TileFormat::kBFP4);
  EXPECT_EQ(ModelTileFormat(WeightFormat::kBfp8), TileFormat::kBFP8);
  EXPECT_EQ(ModelTileFormat(WeightFormat::kF32), TileFormat::kBF16);
  // The loaded model's formats: bfp4 weights stream fewer bytes than the checkpoint's own.
  const std::string dir = test::FixtureDir("newarch_gqa_f32");
  ModelOptions mo;
  const auto as_stored = FalconModel::Load(dir, mo);
  mo.weights = WeightSpec::Parse("bfp4");
  const auto bfp4 = FalconModel::Load(dir, mo);
  EXPECT_LT(WholeModelUsPerToken(*bfp4, KVDType::kBF16, "n150", 32, 64),
            WholeModelUsPerToken(*as_stored, KVDType::kBF16, "n150", 32, 64));
}

// The model of tt-metal's configuration (T3000, 32 users, 128 cached positions, BFLOAT8_B
// weights and KV cache, LoFi, 1-link rings) is bound by streaming its weights: it lands within
// +-30% of tt-metal's own target for this hardware (36 tokens/s/user). The published 11.9 is
// about a third of that; mesh/README.md says why.
TEST(DecodeStep, FalconOnT3kLandsAtTheHardwareTarget) {
  const DecodeStepEstimate e = EstimateDecodeStep(PresetConfig("falcon-40b"), DecodeStepOptions{});
  EXPECT_GT(e.tokens_per_s_per_user, 36.0 * 0.7);
  EXPECT_LT(e.tokens_per_s_per_user, 36.0 * 1.3);
  EXPECT_GT(e.dram_us / e.step_us, 0.6);  // weight streaming dominates
}

std::vector<std::map<std::string, std::string>> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  for (std::stringstream h(line); std::getline(h, line, ',');) header.push_back(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream l(line);
    std::string cell;
    while (std::getline(l, cell, ',')) f.push_back(cell);
    if (!line.empty() && line.back() == ',') f.push_back("");
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < f.size(); ++i) row[header[i]] = f[i];
    rows.push_back(row);
  }
  return rows;
}

TEST(DecodeStepCli, CsvAndJsonCarryTheHeadline) {
  test::TempDir dir;
  const auto r = test::RunWormchat({"mesh-bench", "--experiment", "falcon40b-decode", "--csv",
                                    dir.File("d.csv"), "--json", dir.File("d.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tt-metal's published Falcon-40B on T3000"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(test::ReadFile(dir.File("d.json")));
  for (const char* key : {"mesh", "users", "ctx", "weights_dtype", "kv_dtype", "step_us",
                          "tokens_per_s_per_user", "tokens_per_s", "ops"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["mesh"], "t3k");
  EXPECT_EQ(j["weights_dtype"], "bfp8");
  double sum = 0;
  for (const auto& [name, us] : j["ops"].items()) sum += us.get<double>();
  EXPECT_NEAR(sum, j["step_us"].get<double>(), 1e-6 * sum);
  EXPECT_NEAR(j["tokens_per_s_per_user"].get<double>(), 1e6 / j["step_us"].get<double>(), 1e-6);
  bool found = false;
  for (const auto& row : ReadCsv(dir.File("d.csv")))
    if (row.at("scenario") == "headline" && row.at("op") == "total") {
      EXPECT_NEAR(std::stod(row.at("us_per_step")), j["step_us"].get<double>(), 1e-3);
      found = true;
    }
  EXPECT_TRUE(found);
  const auto bad = test::RunWormchat(
      {"mesh-bench", "--experiment", "seed-fig5", "--csv", dir.File("x.csv"), "--users", "8"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--users applies to --experiment falcon40b-decode only"),
            std::string::npos)
      << bad.err;
  const auto fmt = test::RunWormchat({"mesh-bench", "--experiment", "falcon40b-decode", "--csv",
                                      dir.File("y.csv"), "--weights-dtype", "fp7"});
  EXPECT_NE(fmt.exit_code, 0);
  EXPECT_NE(fmt.err.find("--weights-dtype 'fp7'"), std::string::npos) << fmt.err;
}

// generate --stats and the chat's /stats show the whole model's emulated time per token.
TEST(DecodeStepCli, StatsShowTheWholeModel) {
  const auto gen = test::RunWormchat(
      {"generate", "--prompt", "Hello", "-n", "4", "--stats", "--mesh", "t3k", "--seed", "1"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_NE(gen.err.find("whole model: "), std::string::npos) << gen.err;
  EXPECT_NE(gen.err.find(" us/token on t3k"), std::string::npos) << gen.err;
  const auto chat =
      test::RunWormchat({"chat", "--plain", "-n", "4", "--seed", "1"}, "Hi\n/stats\n/quit\n");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_NE(chat.out.find("whole model "), std::string::npos) << chat.out;
}

// The committed CSV (meshmodel/plots/falcon40b-decode.csv, the README's figures) agrees with the
// model as built, and its headline lands at the hardware target.
TEST(DecodeStepCli, CommittedCsvMatchesTheModel) {
  const auto rows =
      ReadCsv(std::string(WORMCHAT_TEST_DATA) + "/../meshmodel/plots/falcon40b-decode.csv");
  ASSERT_FALSE(rows.empty());
  const DecodeStepEstimate e = EstimateDecodeStep(PresetConfig("falcon-40b"), DecodeStepOptions{});
  int totals = 0;
  for (const auto& row : rows) {
    if (row.at("op") != "total") continue;
    ++totals;
    if (row.at("scenario") != "headline") continue;
    EXPECT_NEAR(std::stod(row.at("us_per_step")), e.step_us, 1e-3 * e.step_us);
    const double tpsu = std::stod(row.at("tokens_per_s_per_user"));
    EXPECT_GT(tpsu, 36.0 * 0.7);
    EXPECT_LT(tpsu, 36.0 * 1.3);
  }
  EXPECT_GE(totals, 10);  // the headline and its what-ifs
}

}  // namespace
}  // namespace wc
