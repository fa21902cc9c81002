// `wormchat batch --speculate` (issue 34): the records are byte for byte those without it (greedy
// and sampled lines, beam lines that do not speculate), and the summary's acceptance is the sum of
// what each request reports when run alone with `generate --stats`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/app/batch_test_util.h"

namespace wc::test {
namespace {

// Prompts that repeat themselves (prompt lookup has something to find) and one that does not.
const std::vector<std::string> kPrompts = {
    "Repeat this: the sea is wide and the sea is deep, the sea is wide and the sea is deep.",
    "Copy: one two three four, one two three four, one two three four.", "Tell me a story."};

std::vector<std::string> With(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The "A/P proposed tokens accepted" figures of a stderr line starting with `prefix`; {-1, -1}
// when there is none.
std::pair<long, long> Acceptance(const std::string& err, const std::string& prefix) {
  const size_t at = err.find(prefix);
  long a = -1, p = -1;
  if (at == std::string::npos) return {a, p};
  if (std::sscanf(err.c_str() + at + prefix.size(), "%ld/%ld proposed tokens accepted", &a, &p) !=
      2)
    return {-1, -1};
  return {a, p};
}

TEST(BatchSpeculation, RecordsAreUnchangedAndTheSummaryCountsEveryRequest) {
  TempDir dir;
  std::string text;
  for (const std::string& p : kPrompts) text += p + "\n";
  const std::vector<std::string> greedy = {"--temperature", "0", "-n", "40", "--threads", "1"};
  const RunResult off =
      Batch(dir, text, dir.File("off.jsonl"), With(greedy, {"--speculate", "off"}));
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(off.err.find("speculation"), std::string::npos) << off.err;
  std::vector<std::string> on_args = greedy;
  on_args.insert(on_args.end(), {"--speculate", "lookup", "--speculate-k", "4"});
  const RunResult on = Batch(dir, text, dir.File("on.jsonl"), on_args);
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_EQ(SortedLines(ReadFile(dir.File("on.jsonl"))),
            SortedLines(ReadFile(dir.File("off.jsonl"))));
  // The summary is the sum of each request's own figures (generate frames a prompt as a text
  // line is framed).
  long accepted = 0, proposed = 0;
  for (const std::string& p : kPrompts) {
    const RunResult g =
        RunWormchat({"generate", "--prompt", p, "--temperature", "0", "-n", "40", "--threads", "1",
                     "--speculate", "lookup", "--speculate-k", "4", "--stats"});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    const auto [a, pr] = Acceptance(g.err, "speculation: ");
    ASSERT_GE(a, 0) << g.err;
    accepted += a, proposed += pr;
  }
  EXPECT_GT(accepted, 0);  // the repeating prompts are guessed right at times
  EXPECT_EQ(Acceptance(on.err, "batch: speculation: "), std::make_pair(accepted, proposed))
      << on.err;

  // Sampled lines with their derived seeds, and a beam line (it does not speculate): unchanged.
  const std::string jsonl =
      Jsonl({Completion("s1", kPrompts[0], {{"max_tokens", 24}}),
             Chat("s2", json::array({User(kPrompts[1])}), {{"max_tokens", 24}, {"seed", 11}}),
             Completion("b1", kPrompts[1], {{"max_tokens", 12}, {"num_beams", 2}})});
  const std::vector<std::string> sampled = {"--seed", "5", "--threads", "1"};
  const RunResult s_off =
      Batch(dir, jsonl, dir.File("s_off.jsonl"), With(sampled, {"--speculate", "off"}));
  ASSERT_EQ(s_off.exit_code, 0) << s_off.err;
  std::vector<std::string> s_on_args = sampled;
  s_on_args.insert(s_on_args.end(), {"--speculate", "lookup"});
  const RunResult s_on = Batch(dir, jsonl, dir.File("s_on.jsonl"), s_on_args);
  ASSERT_EQ(s_on.exit_code, 0) << s_on.err;
  EXPECT_EQ(SortedLines(ReadFile(dir.File("s_on.jsonl"))),
            SortedLines(ReadFile(dir.File("s_off.jsonl"))));
  EXPECT_GE(Acceptance(s_on.err, "batch: speculation: ").second, 0) << s_on.err;
}

// A draft model shared by the batch's rows (the default model drafting for itself): the records
// are those without it; the summary counts the drafts.
TEST(BatchSpeculation, ADraftModelLeavesTheRecordsAsTheyAre) {
  TempDir dir;
  std::string text;
  for (const std::string& p : kPrompts) text += p + "\n";
  const std::vector<std::string> greedy = {"--temperature", "0", "-n", "30", "--threads", "2"};
  const RunResult off =
      Batch(dir, text, dir.File("off.jsonl"), With(greedy, {"--speculate", "off"}));
  ASSERT_EQ(off.exit_code, 0) << off.err;
  std::vector<std::string> on_args = greedy;
  on_args.insert(on_args.end(),
                 {"--draft-model", std::string(WORMCHAT_TEST_DATA) + "/../assets/default-model",
                  "--speculate-k", "3"});
  const RunResult on = Batch(dir, text, dir.File("on.jsonl"), on_args);
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_EQ(SortedLines(ReadFile(dir.File("on.jsonl"))),
            SortedLines(ReadFile(dir.File("off.jsonl"))));
  const auto [accepted, proposed] = Acceptance(on.err, "batch: speculation: ");
  EXPECT_GT(proposed, 0) << on.err;
  // Every proposal is the target's own choice; only those after a reply's end (EOS or a stop
  // string inside a verify chunk) go unused.
  EXPECT_GE(accepted * 10, proposed * 8) << on.err;
}

TEST(BatchSpeculation, BadValuesAreOneLineErrorsNamingTheFlag) {
  TempDir dir;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--speculate", "maybe"}, {"--speculate-k", "0"}}) {
    const RunResult r = Batch(dir, "Hello\n", dir.File("x.jsonl"), args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(args[0]), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace wc::test
