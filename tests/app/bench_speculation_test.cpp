// `bench model --speculate` end to end at tiny sizes (issue 34; the figures are for the README):
// the oracle's proposals are all accepted at --oracle-accept 1 and none at 0, prompt lookup and a
// draft model run on the extractive workload, every k asked is reported in text and JSON, and bad
// combinations are one-line errors naming the flag.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace wc {
namespace {

using nlohmann::json;
using test::RunWormchat;

std::vector<std::string> Bench(std::vector<std::string> more) {
  std::vector<std::string> args = {"bench",     "model", "--threads",     "2", "--prompt-len", "12",
                                   "--gen-len", "24",    "--decode-rows", "1", "--repeats",    "1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

json Speculation(const std::vector<std::string>& more) {
  test::TempDir dir;
  std::vector<std::string> args = Bench(more);
  args.push_back("--json");
  args.push_back(dir.File("b.json"));
  const test::RunResult r = RunWormchat(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("speculative decode, 1 row, greedy, 24 new tokens"), std::string::npos)
      << r.out;
  return json::parse(test::ReadFile(dir.File("b.json"))).at("speculation");
}

TEST(BenchSpeculation, TheOracleIsAcceptedAsAskedAtEveryK) {
  const json all = Speculation({"--speculate", "oracle", "--speculate-k", "2,5"});
  ASSERT_EQ(all.at("by_k").size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& f = all.at("by_k")[i];
    EXPECT_EQ(f.at("k"), i == 0 ? 2 : 5);
    EXPECT_GT(f.at("proposed").get<int>(), 0);
    EXPECT_EQ(f.at("accepted"), f.at("proposed"));
    EXPECT_GT(f.at("tokens_per_step").get<double>(), 1.5);
    EXPECT_GT(f.at("tokens_per_s").get<double>(), 0);
    EXPECT_GT(f.at("off_tokens_per_s").get<double>(), 0);
    EXPECT_NEAR(f.at("speedup").get<double>(),
                f.at("tokens_per_s").get<double>() / f.at("off_tokens_per_s").get<double>(), 1e-9);
  }
  const json none =
      Speculation({"--speculate", "oracle", "--speculate-k", "3", "--oracle-accept", "0"});
  EXPECT_GT(none.at("by_k")[0].at("proposed").get<int>(), 0);
  EXPECT_EQ(none.at("by_k")[0].at("accepted"), 0);
  EXPECT_DOUBLE_EQ(none.at("by_k")[0].at("tokens_per_step").get<double>(), 1.0);
}

TEST(BenchSpeculation, LookupAndADraftRunOnTheExtractiveWorkload) {
  const json lookup = Speculation({"--speculate", "lookup", "--workload", "extract"});
  EXPECT_EQ(lookup.at("workload"), "extract");
  EXPECT_GT(lookup.at("prompt_tokens").get<int>(), 300);  // the passage, framed
  EXPECT_EQ(lookup.at("by_k").size(), 2u);                // the default ks: 4 and 8
  const std::string self = std::string(WORMCHAT_TEST_DATA) + "/../assets/default-model";
  const json draft = Speculation({"--draft-model", self, "--speculate-k", "3"});
  EXPECT_EQ(draft.at("mode"), "draft");
  // The default model drafting for itself under greedy: every proposal is its own choice.
  EXPECT_GT(draft.at("by_k")[0].at("proposed").get<int>(), 0);
  EXPECT_EQ(draft.at("by_k")[0].at("accepted"), draft.at("by_k")[0].at("proposed"));
}

// bench serve: the load's requests speculate and the acceptance is reported; a draft shared by
// every row of the load.
TEST(BenchSpeculation, ServeReportsTheLoadsAcceptance) {
  const std::string self = std::string(WORMCHAT_TEST_DATA) + "/../assets/default-model";
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--speculate", "lookup"},
        std::vector<std::string>{"--draft-model", self, "--speculate-k", "3"}}) {
    test::TempDir dir;
    std::vector<std::string> args = {"bench",       "serve", "--requests",    "6",
                                     "--gen-len",   "16",    "--prompt-len",  "12",
                                     "--user-rows", "4",     "--decode-rows", "1",
                                     "--threads",   "2",     "--json",        dir.File("s.json")};
    args.insert(args.end(), flags.begin(), flags.end());
    const test::RunResult r = RunWormchat(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("proposed tokens accepted"), std::string::npos) << r.out;
    const json spec = json::parse(test::ReadFile(dir.File("s.json"))).at("load").at("speculation");
    EXPECT_GT(spec.at("proposed").get<int>(), 0) << flags[0];
    EXPECT_LE(spec.at("accepted").get<int>(), spec.at("proposed").get<int>());
  }
}

TEST(BenchSpeculation, BadCombinationsAreOneLineErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string flag;
  };
  for (const Case& c :
       std::vector<Case>{{{"--speculate", "sometimes"}, "--speculate"},
                         {{"--speculate", "draft"}, "--draft-model"},
                         {{"--speculate", "lookup", "--oracle-accept", "0.5"}, "--oracle-accept"},
                         {{"--speculate", "oracle", "--oracle-accept", "1.5"}, "--oracle-accept"},
                         {{"--speculate-k", "4"}, "--speculate-k"},
                         {{"--speculate", "lookup", "--speculate-k", "0"}, "--speculate-k"},
                         {{"--speculate", "lookup", "--workload", "poetry"}, "--workload"}}) {
    const test::RunResult r = RunWormchat(Bench(c.args));
    EXPECT_NE(r.exit_code, 0) << c.flag;
    EXPECT_NE(r.err.find(c.flag), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace wc
