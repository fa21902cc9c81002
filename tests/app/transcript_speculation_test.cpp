// Transcripts and speculative decoding (issue 34): `transcript record --speculate` writes the
// setting in the header and the same turns as without it; replay decodes as the header says (its
// passed line counts the proposals) and passes; a header without the keys replays as off; bad
// values exit 2 naming file:line; --speculate with --beams is one line.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace wc {
namespace {

using test::Describe;

// Greedy turns that repeat themselves, then a sampled one.
const char kTurns[] =
    "Repeat exactly: the sea is wide and the sea is deep, the sea is wide and the sea is deep.\n"
    "Say it again: the sea is wide and the sea is deep.\n"
    "/set temperature 0.8\n"
    "One more time, the sea is wide and the sea is deep.\n";

test::RunResult Record(const test::TempDir& dir, const std::string& out,
                       const std::vector<std::string>& extra) {
  test::WriteFile(dir.File("turns"), kTurns);
  std::vector<std::string> args = {
      "transcript", "record", "--turns", dir.File("turns"), "--out", out, "--threads", "1", "-n",
      "24",         "--seed", "8",       "--temperature",   "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return test::RunWormchat(args);
}

// `text` without the lines that start with `key`.
std::string WithoutKey(const std::string& text, const std::string& key) {
  std::string out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end == std::string::npos ? end : end - at + 1);
    if (line.rfind(key, 0) != 0) out += line;
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

TEST(TranscriptSpeculation, RecordedInTheHeaderAndReplayedAsRecorded) {
  test::TempDir dir;
  const test::RunResult on =
      Record(dir, dir.File("on.txt"), {"--speculate", "lookup", "--speculate-k", "4"});
  ASSERT_EQ(on.exit_code, 0) << Describe(on);
  const test::RunResult off = Record(dir, dir.File("off.txt"), {"--speculate", "off"});
  ASSERT_EQ(off.exit_code, 0) << Describe(off);
  const std::string on_text = test::ReadFile(dir.File("on.txt"));
  const std::string off_text = test::ReadFile(dir.File("off.txt"));
  EXPECT_NE(on_text.find("\nspeculate: lookup\nspeculate-k: 4\nlookup-ngram: 3\n"),
            std::string::npos)
      << on_text;
  EXPECT_EQ(off_text.find("speculate"), std::string::npos) << off_text;  // off: not written
  // The same turns, replies and ids: only the three header lines differ.
  EXPECT_EQ(
      WithoutKey(WithoutKey(WithoutKey(on_text, "speculate:"), "speculate-k:"), "lookup-ngram:"),
      off_text);

  const test::RunResult replay = test::RunWormchat(
      {"transcript", "replay", "--threads", "2", dir.File("on.txt"), dir.File("off.txt")});
  EXPECT_EQ(replay.exit_code, 0) << Describe(replay);
  // The header's speculation ran: the passed line counts its proposals; off's has no such count.
  EXPECT_NE(replay.out.find(dir.File("on.txt") + ": passed (3 turns; "), std::string::npos)
      << replay.out;
  const size_t on_line = replay.out.find(dir.File("on.txt") + ": passed");
  const std::string line = replay.out.substr(on_line, replay.out.find('\n', on_line) - on_line);
  EXPECT_NE(line.find("proposed tokens accepted)"), std::string::npos) << line;
  EXPECT_EQ(replay.out.find("proposed tokens accepted", on_line + line.size()), std::string::npos)
      << replay.out;

  // Update keeps the header's speculation lines.
  const test::RunResult update =
      test::RunWormchat({"transcript", "update", "--threads", "1", dir.File("on.txt")});
  EXPECT_EQ(update.exit_code, 0) << Describe(update);
  EXPECT_NE(update.out.find(": unchanged"), std::string::npos) << update.out;
}

// A draft model: the header names it; replay loads it and passes; a header that says draft but
// names no checkpoint is refused naming the file.
TEST(TranscriptSpeculation, ADraftModelIsRecordedByItsDirectoryAndReplayed) {
  test::TempDir dir;
  const std::string draft = std::string(WORMCHAT_TEST_DATA) + "/../assets/default-model";
  const test::RunResult on = Record(dir, dir.File("draft.txt"), {"--draft-model", draft});
  ASSERT_EQ(on.exit_code, 0) << Describe(on);
  const test::RunResult off = Record(dir, dir.File("off.txt"), {"--speculate", "off"});
  ASSERT_EQ(off.exit_code, 0) << Describe(off);
  const std::string text = test::ReadFile(dir.File("draft.txt"));
  EXPECT_NE(text.find("\nspeculate: draft\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ndraft-model: " + draft + "\n"), std::string::npos) << text;
  EXPECT_EQ(WithoutKey(WithoutKey(WithoutKey(WithoutKey(text, "speculate:"), "speculate-k:"),
                                  "lookup-ngram:"),
                       "draft-model:"),
            test::ReadFile(dir.File("off.txt")));
  const test::RunResult replay =
      test::RunWormchat({"transcript", "replay", "--threads", "1", dir.File("draft.txt")});
  EXPECT_EQ(replay.exit_code, 0) << Describe(replay);
  EXPECT_NE(replay.out.find("proposed tokens accepted"), std::string::npos) << replay.out;
  test::WriteFile(dir.File("bad.txt"), WithoutKey(text, "draft-model:"));
  const test::RunResult bad =
      test::RunWormchat({"transcript", "replay", "--threads", "1", dir.File("bad.txt")});
  EXPECT_EQ(bad.exit_code, 2) << Describe(bad);
  EXPECT_NE(bad.err.find(dir.File("bad.txt") + ": 'speculate: draft' needs a 'draft-model:' line"),
            std::string::npos)
      << bad.err;
}

TEST(TranscriptSpeculation, BadHeaderValuesExitTwoNamingTheLine) {
  test::TempDir dir;
  ASSERT_EQ(Record(dir, dir.File("on.txt"), {"--speculate", "lookup"}).exit_code, 0);
  const std::string text = test::ReadFile(dir.File("on.txt"));
  const size_t at = text.find("speculate: lookup");
  ASSERT_NE(at, std::string::npos) << text;
  const int line = static_cast<int>(std::count(text.begin(), text.begin() + at, '\n')) + 1;
  struct Case {
    std::string from, to, message;
    int line;
  };
  for (const Case& c :
       std::vector<Case>{{"speculate: lookup", "speculate: maybe",
                          "speculate must be off, lookup or draft, got maybe", line},
                         {"speculate-k: 8", "speculate-k: 17",
                          "speculate-k must be a whole number in 1-16, got 17", line + 1},
                         {"lookup-ngram: 3", "lookup-ngram: 0",
                          "lookup-ngram must be a whole number in 1-16, got 0", line + 2}}) {
    std::string bad = text;
    const size_t p = bad.find(c.from);
    ASSERT_NE(p, std::string::npos) << c.from;
    bad.replace(p, c.from.size(), c.to);
    test::WriteFile(dir.File("bad.txt"), bad);
    const test::RunResult r =
        test::RunWormchat({"transcript", "replay", "--threads", "1", dir.File("bad.txt")});
    EXPECT_EQ(r.exit_code, 2) << Describe(r);
    EXPECT_NE(r.err.find(dir.File("bad.txt") + ":" + std::to_string(c.line) + ": " + c.message),
              std::string::npos)
        << r.err;
  }
}

TEST(TranscriptSpeculation, BeamsWithSpeculationIsOneLine) {
  test::TempDir dir;
  const test::RunResult r =
      Record(dir, dir.File("x.txt"), {"--beams", "2", "--speculate", "lookup"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--speculate: beam search (--beams) does not speculate"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace wc
