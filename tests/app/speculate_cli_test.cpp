// `generate --speculate` as a user runs it (issue 34): the same text as without speculation,
// --stats says how many proposals were accepted, and bad values are one-line errors naming the
// flag.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace wc::test {
namespace {

const std::vector<std::string> kGreedy = {"generate",
                                          "--prompt",
                                          "The sea is wide and the sea is deep. The sea is wide",
                                          "--temperature",
                                          "0",
                                          "-n",
                                          "40",
                                          "--threads",
                                          "1"};

std::vector<std::string> With(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(SpeculateCli, LookupGivesTheSameTextAndStatsCountTheProposals) {
  const RunResult off = RunWormchat(With(kGreedy, {"--speculate", "off", "--stats"}));
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(off.err.find("speculation:"), std::string::npos) << off.err;
  for (const char* k : {"1", "4", "16"}) {
    const RunResult on =
        RunWormchat(With(kGreedy, {"--speculate", "lookup", "--speculate-k", k, "--stats"}));
    ASSERT_EQ(on.exit_code, 0) << on.err;
    EXPECT_EQ(on.out, off.out) << "k " << k;
    EXPECT_NE(on.err.find("proposed tokens accepted (prompt lookup, k up to " + std::string(k)),
              std::string::npos)
        << on.err;
  }
  // Sampled: the same seed gives the same text with or without speculation.
  const std::vector<std::string> sampled = {"generate", "--prompt",  "Tell me about the sea.",
                                            "--seed",   "5",         "-n",
                                            "30",       "--threads", "1"};
  const RunResult a = RunWormchat(sampled);
  const RunResult b = RunWormchat(With(sampled, {"--speculate", "lookup"}));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(SpeculateCli, BadValuesAreOneLineErrorsNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string flag;
  };
  for (const Case& c :
       std::vector<Case>{{{"--speculate", "draftish"}, "--speculate"},
                         {{"--speculate-k", "17"}, "--speculate-k"},
                         {{"--speculate-k", "0"}, "--speculate-k"},
                         {{"--lookup-ngram", "0"}, "--lookup-ngram"},
                         {{"--speculate", "lookup", "--beams", "2"}, "--speculate"}}) {
    const RunResult r = RunWormchat(With(kGreedy, c.args));
    EXPECT_NE(r.exit_code, 0) << c.flag;
    EXPECT_NE(r.err.find(c.flag), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

}  // namespace
}  // namespace wc::test
