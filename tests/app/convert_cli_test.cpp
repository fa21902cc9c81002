// `wormchat convert` on the real binary: bad flags are one line (a missing --out a usage error,
// status 2; an unknown format names --weights, status 1); the default model converted loads with no
// flag, generates the tokens of --weights SPEC on the original, shows its stored formats in info,
// and a transcript recorded on it replays on it.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace wc {
namespace {

using test::Describe;

std::string DefaultModel() {
  return std::string(WORMCHAT_TEST_DATA) + "/../assets/default-model";
}

TEST(ConvertCli, BadFlagsAreOneLine) {
  test::TempDir dir;
  auto r = test::RunWormchat({"convert", "--weights", "bfp8", DefaultModel()});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_EQ(test::CountLines(r.err), 1) << Describe(r);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << Describe(r);
  r = test::RunWormchat({"convert", "--weights", "bfp6", "--out", dir.File("c"), DefaultModel()});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_EQ(test::CountLines(r.err), 1) << Describe(r);
  EXPECT_EQ(r.err.rfind("wormchat: error: --weights 'bfp6': unknown format 'bfp6'", 0), 0u)
      << Describe(r);
  std::filesystem::create_directory(dir.File("used"));
  test::WriteFile(dir.File("used/x"), "");
  r = test::RunWormchat(
      {"convert", "--weights", "bfp8", "--out", dir.File("used"), DefaultModel()});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.err.find("exists and is not empty"), std::string::npos) << Describe(r);
}

TEST(ConvertCli, AConvertedModelRunsAsTheSpecOnTheOriginal) {
  test::TempDir dir;
  const std::string out = dir.File("converted");
  const std::string spec = "attn=bfp8,mlp=bfp4";
  auto r = test::RunWormchat({"convert", "--weights", spec, "--out", out, DefaultModel()});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.out.find("attn bfp8, mlp bfp4, lm_head f32"), std::string::npos) << Describe(r);
  const std::vector<std::string> gen = {
      "generate", "--prompt", "What is a harbor?", "--temperature", "0", "--max-new-tokens", "12"};
  auto args = gen;
  args.insert(args.end(), {"--model", out});
  const auto got = test::RunWormchat(args);
  args = gen;
  args.insert(args.end(), {"--weights", spec});
  const auto want = test::RunWormchat(args);
  ASSERT_EQ(got.exit_code, 0) << Describe(got);
  ASSERT_EQ(want.exit_code, 0) << Describe(want);
  EXPECT_FALSE(want.out.empty());
  EXPECT_EQ(got.out, want.out);
  r = test::RunWormchat({"info", "--model", out, "--json"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stored_weights"],
            (nlohmann::json{{"attn", "bfp8"}, {"mlp", "bfp4"}, {"lm_head", "f32"}}));
  EXPECT_EQ(j["weight_formats"], j["stored_weights"]);
  // Another bfp format on it: one line naming --weights.
  r = test::RunWormchat({"generate", "--model", out, "--prompt", "hi", "--weights", "bfp8"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_EQ(test::CountLines(r.err), 1) << Describe(r);
  EXPECT_NE(r.err.find("stores mlp in bfp4"), std::string::npos) << Describe(r);
  // A transcript recorded on the converted model replays on it.
  test::WriteFile(dir.File("turns"), "Hi\nWhat is a harbor?\n");
  r = test::RunWormchat({"transcript", "record", "--model", out, "--turns", dir.File("turns"),
                         "--out", dir.File("t.txt"), "-n", "8", "--seed", "3"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  r = test::RunWormchat({"transcript", "replay", dir.File("t.txt")});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.out.find("passed"), std::string::npos) << Describe(r);
}

}  // namespace
}  // namespace wc
