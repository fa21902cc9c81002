// `generate --speculate draft --draft-model DIR` as a user runs it (issue 34): the same text as
// without speculation, --stats names the draft, and a draft that cannot propose for the model is
// refused with one line naming --draft-model.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace wc::test {
namespace {

std::vector<std::string> Greedy(std::vector<std::string> more) {
  std::vector<std::string> args = {"generate", "--prompt",  "Tell me a story about a cat.",
                                   "-n",       "40",        "--temperature",
                                   "0",        "--threads", "1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::string DefaultModel() {
  return std::string(WORMCHAT_TEST_DATA) + "/../assets/default-model";
}

void ExpectOneLineError(const RunResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0) << needle;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(DraftCli, TheDefaultModelDraftingForItselfGivesTheSameText) {
  const RunResult off = RunWormchat(Greedy({}));
  ASSERT_EQ(off.exit_code, 0) << off.err;
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--speculate", "draft", "--draft-model", DefaultModel()},
        std::vector<std::string>{"--draft-model", DefaultModel(), "--speculate-k", "3"}}) {
    std::vector<std::string> more = flags;
    more.push_back("--stats");
    const RunResult on = RunWormchat(Greedy(more));
    ASSERT_EQ(on.exit_code, 0) << on.err;
    EXPECT_EQ(on.out, off.out);
    EXPECT_NE(on.err.find("proposed tokens accepted (draft model "), std::string::npos) << on.err;
  }
}

TEST(DraftCli, ADraftThatCannotProposeIsRefusedInOneLine) {
  ExpectOneLineError(RunWormchat(Greedy({"--speculate", "draft"})), "--draft-model");
  ExpectOneLineError(
      RunWormchat(Greedy({"--speculate", "lookup", "--draft-model", DefaultModel()})),
      "--draft-model");
  TempDir dir;
  ExpectOneLineError(RunWormchat(Greedy({"--draft-model", dir.File("missing")})),
                     "--draft-model " + dir.File("missing"));
  // Another tokenizer: a random checkpoint made with a byte-level toy tokenizer.
  const std::string other = dir.File("other");
  const RunResult init =
      RunWormchat({"init", "--out", other, "--layers", "1", "--tokenizer",
                   FixtureDir("tokenizer") + "/toy_bytelevel/tokenizer.json", "--preset", "tiny"});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  ExpectOneLineError(RunWormchat(Greedy({"--draft-model", other})),
                     "does not give the model's ids");
  ExpectOneLineError(RunWormchat(Greedy({"--draft-model", other, "--beams", "2"})), "--speculate");
}

}  // namespace
}  // namespace wc::test
