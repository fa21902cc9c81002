// `wormchat perplexity` end to end: the JSON report, and a missing text file named in a one-line
// error (the scoring itself: tests/serving/perplexity_test.cpp).
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace wc {
namespace {

TEST(Perplexity, CommandPrintsJson) {
  test::TempDir dir;
  test::CopyDir(test::FixtureDir("mha_seq_bf16"), dir.path());
  test::CopyDir(test::FixtureDir("tokenizer"), dir.path());
  test::WriteFile(dir.File("text.txt"), "a harbor is a sheltered port where ships can dock.\n");
  const auto r = test::RunWormchat(
      {"perplexity", "--model", dir.path(), "--text", dir.File("text.txt"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kv_dtype"], "bf16");
  EXPECT_GT(j["tokens"].get<int>(), 5);
  EXPECT_GT(j["perplexity"].get<double>(), 1.0);
  const auto bad = test::RunWormchat({"perplexity", "--model", dir.path(), "--text", "/nope.txt"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("/nope.txt"), std::string::npos);
}

}  // namespace
}  // namespace wc
