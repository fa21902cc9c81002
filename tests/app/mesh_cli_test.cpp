// `wormchat mesh-bench` end to end through the real binary: the experiments' CSV and gnuplot PNG,
// the decode step's CSV / JSON headline and prefill figures, the device table, the speculative
// what-if's JSON, one-line errors; generate's and the chat's --stats with the whole model's
// emulated time (the models themselves: tests/mesh/ and tests/meshmodel/).
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mesh/experiments.h"
#include "meshmodel/decode_step.h"
#include "meshmodel/device_experiment.h"
#include "meshmodel/speculation.h"
#include "model/config.h"
#include "tests/meshmodel/read_csv.h"
#include "tests/test_util.h"

namespace wc {
namespace {

// The binary: CSV + PNG (gnuplot is installed by tools/install-deps.sh; missing, this fails).
TEST(MeshBenchCli, WritesCsvAndPlot) {
  test::TempDir dir;
  const std::string csv = dir.File("all.csv"), png = dir.File("all.png");
  const auto r = test::RunWormchat(
      {"mesh-bench", "--experiment", "all", "--csv", csv, "--plot", png, "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = test::ReadFile(csv);
  EXPECT_EQ(text.substr(0, text.find('\n')), MeshBenchCsvHeader());
  EXPECT_EQ(test::CountLines(text), 1 + static_cast<int>(MeshExperimentConfigs("all").size()));
  EXPECT_NE(r.out.find("FlashDecode vs baseline"), std::string::npos) << r.out;
  const std::string image = test::ReadFile(png);
  ASSERT_GT(image.size(), 1000u) << "no PNG from gnuplot: " << r.err;
  EXPECT_EQ(image.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST(MeshBenchCli, ErrorsAreOneLine) {
  test::TempDir dir;
  auto bad = test::RunWormchat({"mesh-bench", "--experiment", "fig9", "--csv", dir.File("x.csv")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(test::CountLines(bad.err), 1) << bad.err;
  EXPECT_NE(bad.err.find("--experiment 'fig9' is not known; choose one of: seed-fig3-4"),
            std::string::npos)
      << bad.err;
  auto png = test::RunWormchat({"mesh-bench", "--experiment", "seed-fig5", "--csv",
                                dir.File("x.csv"), "--plot", dir.File("x.jpg")});
  EXPECT_EQ(png.exit_code, 1);
  EXPECT_NE(png.err.find("--plot"), std::string::npos) << png.err;
  // Without gnuplot on PATH: a clear one-line error naming the package.
  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path != nullptr ? old_path : "";
  setenv("PATH", dir.path().c_str(), 1);
  auto missing = test::RunWormchat({"mesh-bench", "--experiment", "seed-fig5", "--csv",
                                    dir.File("x.csv"), "--plot", dir.File("x.png")});
  setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(test::CountLines(missing.err), 1) << missing.err;
  EXPECT_NE(missing.err.find("gnuplot-nox"), std::string::npos) << missing.err;
}

TEST(DecodeStepCli, CsvAndJsonCarryTheHeadline) {
  test::TempDir dir;
  const auto r = test::RunWormchat({"mesh-bench", "--experiment", "falcon40b-decode", "--csv",
                                    dir.File("d.csv"), "--json", dir.File("d.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tt-metal measured 12.20 tokens/s/user on the device"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("graph: tt-metal's t3000/falcon40b program, measured"), std::string::npos)
      << r.out;
  const auto j = nlohmann::json::parse(test::ReadFile(dir.File("d.json")));
  for (const char* key : {"mesh", "users", "ctx", "weights_dtype", "kv_dtype", "step_us",
                          "tokens_per_s_per_user", "tokens_per_s", "ops"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["mesh"], "t3k");
  EXPECT_EQ(j["weights_dtype"], "bfp8");
  EXPECT_EQ(j["kv_dtype"], "bfp8");
  EXPECT_EQ(j["graph"], "measured");
  double sum = 0;
  for (const auto& [name, us] : j["ops"].items()) sum += us.get<double>();
  EXPECT_NEAR(sum, j["step_us"].get<double>(), 1e-6 * sum);
  EXPECT_NEAR(j["tokens_per_s_per_user"].get<double>(), 1e6 / j["step_us"].get<double>(), 1e-6);
  bool found = false;
  for (const auto& row : test::ReadCsv(dir.File("d.csv")))
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

// --phase prefill: one user's prompt, a top-level tokens_per_s (prompt tokens a second) in the JSON
// and no per-user figure; bad phases and users are refused with one line.
TEST(DecodeStepCli, PrefillWritesPromptTokensPerSecond) {
  test::TempDir dir;
  const auto r =
      test::RunWormchat({"mesh-bench", "--experiment", "falcon40b-decode", "--preset", "falcon-7b",
                         "--mesh", "n150", "--phase", "prefill", "--users", "1", "--ctx", "1024",
                         "--csv", dir.File("p.csv"), "--json", dir.File("p.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("prefill of 1024 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tt-metal measured 2890.00 tokens/s"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(test::ReadFile(dir.File("p.json")));
  EXPECT_EQ(j["phase"], "prefill");
  EXPECT_FALSE(j.contains("tokens_per_s_per_user"));
  EXPECT_NEAR(j["tokens_per_s"].get<double>(), 1024 * 1e6 / j["step_us"].get<double>(), 1e-6);
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--phase", "train"},
                                              {"--phase", "prefill", "--users", "4"},
                                              {"--phase", "prefill", "--ctx", "4096"}}) {
    std::vector<std::string> args = {"mesh-bench", "--experiment", "falcon40b-decode", "--csv",
                                     dir.File("x.csv")};
    args.insert(args.end(), bad.begin(), bad.end());
    const auto e = test::RunWormchat(args);
    EXPECT_NE(e.exit_code, 0) << bad[1];
    EXPECT_NE(e.err.find(bad.size() == 2 ? "--phase 'train'" : bad[2]), std::string::npos) << e.err;
  }
}

// generate --stats and the chat's /stats show the whole model's emulated time per token.
TEST(DecodeStepCli, StatsShowTheWholeModel) {
  const auto gen = test::RunWormchat(
      {"generate", "--prompt", "Hello", "-n", "4", "--stats", "--mesh", "t3k", "--seed", "1"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_NE(gen.err.find("whole model: "), std::string::npos) << gen.err;
  EXPECT_NE(gen.err.find(" us/token on t3k (tt-metal's measured program"), std::string::npos)
      << gen.err;
  const auto chat =
      test::RunWormchat({"chat", "--plain", "-n", "4", "--seed", "1"}, "Hi\n/stats\n/quit\n");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_NE(chat.out.find("us per token (tt-metal's measured program)"), std::string::npos)
      << chat.out;
}

TEST(DeviceFigures, CommandWritesTheTable) {
  test::TempDir dir;
  const auto r = test::RunWormchat({"mesh-bench", "--experiment", "falcon-device", "--csv",
                                    dir.File("t.csv"), "--json", dir.File("t.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("falcon-7b   n150  decode     128     19.53"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(test::ReadFile(dir.File("t.json")));
  ASSERT_EQ(j["rows"].size(), DeviceFigures().size());
  for (const auto& row : j["rows"]) {
    EXPECT_NEAR(row["ratio"].get<double>(),
                row["model"].get<double>() / row["measured"].get<double>(), 1e-9);
    double shares = 0;
    for (const auto& [name, share] : row["op_shares"].items()) shares += share.get<double>();
    EXPECT_NEAR(shares, 1.0, 1e-9);
    EXPECT_TRUE(row["what_ifs"].contains("DRAM-sharded weights"));
  }
  EXPECT_EQ(test::ReadCsv(dir.File("t.csv")).size(), DeviceFigures().size());
  // The layouts with no device figure: printed, in the JSON and (--estimates-csv) their own CSV.
  EXPECT_NE(r.out.find("no device figure to check them against"), std::string::npos) << r.out;
  ASSERT_EQ(j["estimates"].size(), RunLayoutEstimates().size());
  for (const auto& e : j["estimates"]) EXPECT_FALSE(e["layout"].get<std::string>().empty());
  const auto est = test::RunWormchat(
      {"mesh-bench", "--experiment", "falcon-device", "--estimates-csv", dir.File("e.csv")});
  ASSERT_EQ(est.exit_code, 0) << est.err;
  EXPECT_EQ(test::ReadCsv(dir.File("e.csv")).size(), RunLayoutEstimates().size());
  const auto misplaced = test::RunWormchat(
      {"mesh-bench", "--experiment", "falcon40b-decode", "--estimates-csv", dir.File("f.csv")});
  EXPECT_NE(misplaced.exit_code, 0);
  EXPECT_NE(misplaced.err.find("--estimates-csv applies to --experiment falcon-device only"),
            std::string::npos)
      << misplaced.err;
  const auto bad = test::RunWormchat(
      {"mesh-bench", "--experiment", "falcon-device", "--csv", dir.File("u.csv"), "--users", "8"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--users applies to --experiment falcon40b-decode only"),
            std::string::npos)
      << bad.err;
}

TEST(Speculation, MeshBenchPrintsTheTableAndWritesItToJson) {
  test::TempDir dir;
  const auto r = test::RunWormchat({"mesh-bench", "--experiment", "falcon40b-decode", "--csv",
                                    dir.File("d.csv"), "--json", dir.File("d.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("speculative decode what-if"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(plain decode)"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(test::ReadFile(dir.File("d.json")));
  ASSERT_TRUE(j.contains("speculation"));
  const std::vector<SpeculationPoint> t =
      DefaultSpeculationWhatIf(PresetConfig("falcon-40b"), DecodeStepOptions{});
  ASSERT_EQ(j["speculation"].size(), t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(j["speculation"][i]["k"].get<int>(), t[i].k);
    EXPECT_DOUBLE_EQ(j["speculation"][i]["tokens_per_s_per_user"].get<double>(),
                     t[i].tokens_per_s_per_user);
  }
}

}  // namespace
}  // namespace wc
