// `wormchat bench serve`'s prefix-cache comparison end to end on a tiny fixture (context 64, blocks
// of 8): with --shared-prefix the run with the cache prefills fewer prompt tokens than the run
// without it and stays within N + requests x (prompt-len + block size), every prompt token either
// prefilled or taken from the cache; with --compare-prefix-cache (distinct prompts) both prefill
// every token; bad values and combinations refused in one line naming the flag.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace wc {
namespace {

using nlohmann::json;
using test::RunWormchat;

TEST(BenchServe, SharedPrefixPrefillsLessWithTheCacheWithinTheBound) {
  test::TempDir dir;
  // 6 requests x (32 shared + 8 own prompt tokens), 4 new each; 2 rows, so most requests are
  // admitted after the prefix's blocks are cached.
  const test::RunResult r = RunWormchat({"bench",           "serve",
                                         "--model",         test::FixtureDir("mq_f32"),
                                         "--threads",       "2",
                                         "--kv-block-size", "8",
                                         "--user-rows",     "2",
                                         "--requests",      "6",
                                         "--shared-prefix", "32",
                                         "--prompt-len",    "8",
                                         "--gen-len",       "4",
                                         "--repeats",       "2",
                                         "--json",          dir.File("s.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* needle :
       {"6 requests x (32 shared + 8 own prompt tokens + 4 new tokens), all at once",
        "prefix cache on and off, a fresh loop each, 2 runs each",
        "end to end (median):", "= 32 + 6 x (8 + 8) = 128: bound held"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  EXPECT_EQ(r.out.find("decode "), std::string::npos) << "no decode phase\n" << r.out;
  const json j = json::parse(test::ReadFile(dir.File("s.json")));
  const json& c = j.at("prefix_cache_compare");
  EXPECT_EQ(c.at("shared_prefix"), 32);
  EXPECT_EQ(c.at("prompt_len"), 8);
  EXPECT_EQ(c.at("block_size"), 8);
  EXPECT_EQ(c.at("prefilled_bound"), 32 + 6 * (8 + 8));
  EXPECT_TRUE(c.at("bound_held").get<bool>());
  const int prompt_tokens = 6 * (32 + 8);
  ASSERT_EQ(c.at("on").at("runs").size(), 2u);
  ASSERT_EQ(c.at("off").at("runs").size(), 2u);
  for (const json& run : c.at("off").at("runs")) {
    EXPECT_EQ(run.at("prefilled_tokens"), prompt_tokens) << run;
    EXPECT_EQ(run.at("cached_tokens"), 0) << run;
    EXPECT_EQ(run.at("hits"), 0) << run;
    EXPECT_GT(run.at("wall_s").get<double>(), 0) << run;
  }
  for (const json& run : c.at("on").at("runs")) {
    const int prefilled = run.at("prefilled_tokens"), cached = run.at("cached_tokens"),
              hits = run.at("hits");
    EXPECT_EQ(prefilled + cached, prompt_tokens) << run;  // each token computed or taken once
    EXPECT_LE(prefilled, c.at("prefilled_bound").get<int>()) << run;
    EXPECT_GE(hits, 1) << run;
    EXPECT_LE(hits, 5) << run;        // the first request finds nothing
    EXPECT_EQ(cached % 8, 0) << run;  // whole blocks of the prefix
    EXPECT_LE(cached, hits * 32) << run;
    EXPECT_GT(run.at("wall_s").get<double>(), 0) << run;
  }
  EXPECT_LT(c.at("on").at("prefilled_tokens_max").get<int>(),
            c.at("off").at("prefilled_tokens_max").get<int>());
  EXPECT_NEAR(
      c.at("speedup").get<double>(),
      c.at("off").at("wall_s_median").get<double>() / c.at("on").at("wall_s_median").get<double>(),
      1e-9);
}

TEST(BenchServe, DistinctPromptsPrefillEveryTokenWithTheCacheOnAndOff) {
  test::TempDir dir;
  const test::RunResult r = RunWormchat(
      {"bench", "serve", "--model", test::FixtureDir("mq_f32"), "--threads", "2", "--kv-block-size",
       "8", "--user-rows", "2", "--requests", "4", "--compare-prefix-cache", "--prompt-len", "16",
       "--gen-len", "4", "--json", dir.File("d.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("4 requests x (16 distinct prompt tokens + 4 new tokens)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(time with the cache "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("bound"), std::string::npos) << r.out;
  const json c = json::parse(test::ReadFile(dir.File("d.json"))).at("prefix_cache_compare");
  EXPECT_EQ(c.at("shared_prefix"), 0);
  EXPECT_FALSE(c.contains("prefilled_bound"));
  for (const char* side : {"on", "off"}) {
    ASSERT_EQ(c.at(side).at("runs").size(), 1u) << side;
    const json& run = c.at(side).at("runs")[0];
    EXPECT_EQ(run.at("prefilled_tokens"), 4 * 16) << side;
    EXPECT_EQ(run.at("hits"), 0) << side;
  }
  EXPECT_GT(c.at("speedup").get<double>(), 0);
}

// Runs `args` on the fixture; expects exit `code` and one stderr line holding every needle.
void ExpectRefused(std::vector<std::string> args, const std::vector<std::string>& needles,
                   int code = 1) {
  args.insert(args.begin(), {"bench", "serve", "--model", test::FixtureDir("mq_f32")});
  const test::RunResult r = RunWormchat(args);
  std::string cmd;
  for (const auto& a : args) cmd += a + " ";
  EXPECT_EQ(r.exit_code, code) << cmd << "\n" << r.err;
  EXPECT_EQ(test::CountLines(r.err), 1) << cmd << "\n" << r.err;
  EXPECT_EQ(r.out, "") << cmd;
  for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << cmd << "\n" << r.err;
}

TEST(BenchServe, BadValuesAreRefusedNamingTheFlag) {
  ExpectRefused({"--shared-prefix", "-7"}, {"--shared-prefix", "got -7"});
  ExpectRefused({"--shared-prefix", "x"}, {"--shared-prefix", "x"}, 2);
  // The fixture's context is 64; --prompt-len defaults to 32 with --shared-prefix.
  ExpectRefused(
      {"--shared-prefix", "40"},
      {"--shared-prefix 40 + --prompt-len 32 + --gen-len 32 = 104", "exceeds the context of 64"});
  ExpectRefused({"--shared-prefix", "2000000000", "--prompt-len", "2000000000"},
                {"--shared-prefix 2000000000 + --prompt-len 2000000000", "context of 64"});
  ExpectRefused({"--shared-prefix", "16", "--prompt-len", "8", "--prefix-cache", "off"},
                {"--prefix-cache off", "drop --prefix-cache"});
  ExpectRefused({"--shared-prefix", "16", "--prompt-len", "8", "--decode-rows", "1,2"},
                {"--decode-rows 1,2", "no decode phase"});
  ExpectRefused({"--shared-prefix", "16", "--prompt-len", "8", "--prefix-cache-dir", "/tmp/pc"},
                {"--prefix-cache-dir /tmp/pc", "drop --prefix-cache-dir"});
  ExpectRefused({"--shared-prefix", "16", "--prompt-len", "8", "--kv-block-size", "0"},
                {"--kv-block-size 0", "paged KV"});
  ExpectRefused({"--compare-prefix-cache", "--kv-block-size", "0"},
                {"--kv-block-size 0", "--compare-prefix-cache"});
  ExpectRefused({"--repeats", "3"}, {"--repeats 3", "--shared-prefix or --compare-prefix-cache"});
  ExpectRefused({"--shared-prefix", "16", "--repeats", "0"}, {"--repeats", "0"}, 2);
  ExpectRefused({"--shared-prefix", "16", "--prompt-len", "8", "--user-rows", "0"},
                {"--user-rows", "got 0"});
}

}  // namespace
}  // namespace wc
