// `wormchat transcript record|replay|update` end to end on the real binary and the default model:
// record then replay passes, an edited reply fails naming its turn and token, another model or a
// malformed line exits 2 naming file:line, update rewrites what changed, and every committed
// transcript in tests/transcripts/ replays on 1 and on 2 threads.
#include <dirent.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/sanitized.h"
#include "tests/test_util.h"

namespace wc {
namespace {

std::vector<std::string> CommittedTranscripts() {
  std::vector<std::string> files;
  const std::string dir = std::string(WORMCHAT_TEST_DATA) + "/transcripts";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".txt") == 0)
        files.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

using test::Describe;

// A conversation of three turns recorded into dir/t.txt: a multi-line message, a /set, a /reset.
std::string Record(const test::TempDir& dir, const std::vector<std::string>& extra = {}) {
  test::WriteFile(dir.File("turns"),
                  "What is a falcon?\n\"\"\"\nDefine harbor.\nAnd sail?\n\"\"\"\n/set temperature "
                  "0.7\n/reset\nTell me a saying.\n");
  std::vector<std::string> args = {
      "transcript", "record", "--turns", dir.File("turns"), "--out", dir.File("t.txt"), "--threads",
      "1",          "-n",     "12",      "--seed",          "5"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = test::RunWormchat(args);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.out.find("3 turns"), std::string::npos) << Describe(r);
  return dir.File("t.txt");
}

test::RunResult Replay(const std::vector<std::string>& files, const std::string& threads = "1",
                       const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"transcript", "replay", "--threads", threads};
  args.insert(args.end(), files.begin(), files.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return test::RunWormchat(args);
}

// `text` with the n-th (0-based) id of the `turn`-th "ids:" line (1-based) replaced by `id`.
std::string EditId(const std::string& text, int turn, int n, const std::string& id) {
  size_t at = 0;
  for (int i = 0; i < turn; ++i) at = text.find("\nids: ", at + 1);
  at += 6;
  for (int i = 0; i < n; ++i) at = text.find(' ', at) + 1;
  const size_t end = text.find_first_of(" \n", at);
  return std::string(text).replace(at, end - at, id);
}

TEST(TranscriptCli, RecordThenReplayPasses) {
  test::TempDir dir;
  const std::string t = Record(dir);
  const std::string text = test::ReadFile(t);
  EXPECT_NE(text.find("\nmodel: default\narchitecture: falcon\nfingerprint: "), std::string::npos)
      << text;
  EXPECT_NE(text.find("> Define harbor.\n> And sail?\n"), std::string::npos) << text;
  EXPECT_NE(text.find("--- turn 3\nreset\nset: temperature 0.7\n> Tell me a saying.\n"),
            std::string::npos)
      << text;
  const auto r = Replay({t});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.out.find(t + ": passed (3 turns; "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n1 passed, 0 failed\n"), std::string::npos) << r.out;
}

TEST(TranscriptCli, AnEditedReplyFailsAtItsTurnAndToken) {
  test::TempDir dir;
  const std::string t = Record(dir);
  const std::string text = test::ReadFile(t);
  const std::string bad = dir.File("bad.txt");
  test::WriteFile(bad, EditId(text, 2, 3, "7"));  // turn 2's 4th token
  ASSERT_NE(test::ReadFile(bad), text);
  const auto r = Replay({t, bad});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.out.find(bad + ": turn 2, token 4:\n  expected: \""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  got:      \""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(t + ": passed"), std::string::npos) << "the other file still runs";
  EXPECT_NE(r.out.find("\n1 passed, 1 failed\n"), std::string::npos) << r.out;
}

// fp8 and bfp8 K/V take AVX-512 BF16 dot products where the CPU has them, f32 FMAs elsewhere:
// other bits (docs/correctness.md). The header says which ran, and a replay that differs where
// this CPU runs the other kernels says so under the difference. Every other format writes no line.
TEST(TranscriptCli, Fp8AndBfp8RecordTheirKernelsAndAFailingReplayNamesAnother) {
  test::TempDir dir;
  const std::string t = Record(dir, {"--kv-dtype", "fp8-e5m2"});
  const std::string text = test::ReadFile(t);
  const bool bf16_dot = text.find("\nkv-kernels: bf16 dot\n") != std::string::npos;
  EXPECT_TRUE(bf16_dot || text.find("\nkv-kernels: f32 FMA\n") != std::string::npos) << text;
  EXPECT_EQ(Replay({t}).exit_code, 0);
  // Recorded on the other family (so said), with a reply that differs: the note follows it.
  const std::string here = bf16_dot ? "bf16 dot" : "f32 FMA";
  const std::string other = bf16_dot ? "f32 FMA" : "bf16 dot";
  std::string edited = EditId(text, 2, 3, "7");
  edited.replace(edited.find("kv-kernels: " + here), 12 + here.size(), "kv-kernels: " + other);
  const std::string bad = dir.File("bad.txt");
  test::WriteFile(bad, edited);
  const auto r = Replay({bad});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.out.find("  (fp8-e5m2 K/V's bits depend on the CPU family: this CPU runs " + here +
                       " kernels, the recording ran " + other + "; docs/correctness.md"),
            std::string::npos)
      << r.out;
  // The same kernels: no note. A value that is neither: the header's line is named.
  test::WriteFile(bad, EditId(text, 2, 3, "7"));
  const auto same = Replay({bad});
  EXPECT_EQ(same.exit_code, 1) << Describe(same);
  EXPECT_EQ(same.out.find("depend on the CPU family"), std::string::npos) << same.out;
  std::string wrong = text;
  wrong.replace(wrong.find("kv-kernels: " + here), 12 + here.size(), "kv-kernels: amx");
  test::WriteFile(bad, wrong);
  const auto refused = Replay({bad});
  EXPECT_EQ(refused.exit_code, 2) << Describe(refused);
  EXPECT_NE(refused.err.find("kv-kernels: 'amx' is not bf16 dot or f32 FMA"), std::string::npos)
      << refused.err;
  test::TempDir plain_dir;
  EXPECT_EQ(test::ReadFile(Record(plain_dir, {"--kv-dtype", "int8"})).find("kv-kernels"),
            std::string::npos);
}

TEST(TranscriptCli, AnotherModelExitsTwoNamingTheFile) {
  test::TempDir dir;
  const std::string t = Record(dir);
  const auto r = Replay({t}, "1", {"--model", test::FixtureDir("mq_f32")});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find(t + ":5: recorded on another model: fingerprint "), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("0 passed, 1 failed"), std::string::npos) << r.out;
  // An edited fingerprint is the same mistake.
  std::string text = test::ReadFile(t);
  const size_t at = text.find("fingerprint: ") + 13;
  text[at] = text[at] == '0' ? '1' : '0';
  test::WriteFile(t, text);
  const auto edited = Replay({t});
  EXPECT_EQ(edited.exit_code, 2) << Describe(edited);
  EXPECT_NE(edited.err.find(t + ":5: recorded on another model"), std::string::npos) << edited.err;
  // Another architecture is named as such, in one line, before any fingerprint is computed.
  const auto llama = Replay({t}, "1", {"--model", test::FixtureDir("llama_gqa4_f32")});
  EXPECT_EQ(llama.exit_code, 2) << Describe(llama);
  EXPECT_NE(llama.err.find(t + ":4: recorded on a falcon model, but " +
                           test::FixtureDir("llama_gqa4_f32") + " is llama (LlamaForCausalLM)"),
            std::string::npos)
      << llama.err;
}

TEST(TranscriptCli, MalformedFilesExitTwoNamingFileAndLine) {
  test::TempDir dir;
  const std::string t = Record(dir);
  const std::string text = test::ReadFile(t);
  auto replace = [&text](const std::string& from, const std::string& to) {
    std::string s = text;
    return s.replace(s.find(from), from.size(), to);
  };
  struct Case {
    std::string text, line, message;  // line: "" for a line that is missing
  };
  const std::vector<Case> cases = {
      {replace("kv-dtype: f32", "kv-dtype: bf17"), "6", "bf17"},
      {replace("ctx: ", "ctx: -"), "10", "ctx: '-"},
      {replace("mesh: n150", "mesh: n151"), "13", "n151"},
      {replace("--- turn 2", "--- turn 4"), "", "expected '--- turn 2', got '--- turn 4'"},
      {replace("\nend: ", "\nend: never"), "", "end: 'never"},
      {replace("kv-dtype: f32\n", ""), "", "the header has no 'kv-dtype:' line"},
      {replace("kv-dtype: f32\n", "kv-dtype: f32\ncolour: blue\n"), "7", "'colour:' is not"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::string file = dir.File("m" + std::to_string(i) + ".txt");
    test::WriteFile(file, c.text);
    const auto r = Replay({file});
    EXPECT_EQ(r.exit_code, 2) << c.message << "\n" << Describe(r);
    const std::string where =
        "wormchat: error: " + file + (c.line.empty() ? ":" : ":" + c.line + ": ");
    EXPECT_NE(r.err.find(where), std::string::npos) << where << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.message << "\n" << r.err;
  }
  const auto missing = Replay({dir.File("none.txt")});
  EXPECT_EQ(missing.exit_code, 2) << Describe(missing);
  EXPECT_NE(missing.err.find(dir.File("none.txt")), std::string::npos) << missing.err;
}

TEST(TranscriptCli, UpdateRewritesTheChangedTurns) {
  test::TempDir dir;
  const std::string t = Record(dir);
  const std::string text = test::ReadFile(t);
  test::WriteFile(t, EditId(text, 3, 0, "7"));
  const auto u = test::RunWormchat({"transcript", "update", "--threads", "1", t});
  EXPECT_EQ(u.exit_code, 0) << Describe(u);
  EXPECT_NE(u.out.find(t + ": rewritten (changed turns: 3)"), std::string::npos) << u.out;
  EXPECT_EQ(test::ReadFile(t), text) << "the expected replies are the model's again";
  const auto again = test::RunWormchat({"transcript", "update", "--threads", "1", t});
  EXPECT_EQ(again.exit_code, 0) << Describe(again);
  EXPECT_NE(again.out.find(t + ": unchanged"), std::string::npos) << again.out;
}

TEST(TranscriptCli, ACancelledReplyReplaysToWhereItWasCancelled) {
  test::TempDir dir;
  const std::string t = Record(dir);
  std::string text = test::ReadFile(t);
  // Turn 1 as if Ctrl-C stopped it after 3 tokens; update spells its text, replay reproduces it.
  const size_t ids = text.find("\nids: ") + 6;
  size_t cut = ids;
  for (int i = 0; i < 3; ++i) cut = text.find_first_of(" \n", cut + 1);
  text.erase(cut, text.find('\n', ids) - cut);
  const size_t end = text.find("\nend: ", ids) + 6;
  text.replace(end, text.find('\n', end) - end, "cancelled");
  test::WriteFile(t, text);
  const auto u = test::RunWormchat({"transcript", "update", "--threads", "1", t});
  EXPECT_EQ(u.exit_code, 0) << Describe(u);
  const std::string updated = test::ReadFile(t);
  EXPECT_NE(updated.find("end: cancelled"), std::string::npos) << updated;
  const auto r = Replay({t}, "2");
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
}

TEST(TranscriptCli, RecordErrorsNameTheTurnsFileLine) {
  test::TempDir dir;
  test::WriteFile(dir.File("turns"), "hello\n/set temperature -2\n");
  const auto r = test::RunWormchat(
      {"transcript", "record", "--turns", dir.File("turns"), "--out", dir.File("t.txt")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(dir.File("turns") + ":2: "), std::string::npos) << r.err;
}

TEST(TranscriptCli, InfoPrintsTheFingerprintTranscriptsRecord) {
  const auto r = test::RunWormchat({"info"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const std::string text =
      test::ReadFile(std::string(WORMCHAT_TEST_DATA) + "/transcripts/default_greedy.txt");
  const size_t at = text.find("\nfingerprint: ") + 14;
  const std::string fingerprint = text.substr(at, text.find('\n', at) - at);
  EXPECT_EQ(fingerprint.size(), 32u);
  EXPECT_NE(r.out.find("\nfingerprint  " + fingerprint + " "), std::string::npos) << r.out;
}

void ReplayCommitted(const std::string& threads) {
  const auto files = CommittedTranscripts();
  ASSERT_GE(files.size(), 10u) << "tests/transcripts/ lost its transcripts";
  const auto r = Replay(files, threads);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.out.find("\n" + std::to_string(files.size()) + " passed, 0 failed\n"),
            std::string::npos)
      << r.out;
}

TEST(CommittedTranscripts, ReplayOnOneThread) {
  // Under a sanitizer the two-thread replay alone checks the memory of the same paths.
  if (test::kSanitized) GTEST_SKIP() << "sanitizer build: ReplayOnTwoThreads covers it";
  ReplayCommitted("1");
}
TEST(CommittedTranscripts, ReplayOnTwoThreads) {
  ReplayCommitted("2");
}

TEST(CommittedTranscripts, CoverEverySetting) {
  // The CI set: greedy, sampled with a seed, beams, every KV format, paged and contiguous KV,
  // both attention engines, context trimming, a multi-line turn, /reset and /set, speculation.
  std::string all;
  for (const auto& f : CommittedTranscripts()) all += test::ReadFile(f);
  for (const char* needle : {"temperature: 0\n",
                             "temperature: 0.9\n",
                             "beams: 3\n",
                             "kv-dtype: bf16\n",
                             "kv-dtype: f32\n",
                             "kv-dtype: int8\n",
                             "kv-dtype: fp8-e4m3\n",
                             "kv-dtype: fp8-e5m2\n",
                             "kv-dtype: bfp8\n",
                             "kv-scale: tensor\n",
                             "kv-block-size: 0\n",
                             "kv-block-size: 64\n",
                             "kv-block-size: 16\n",
                             "attention: reference\n",
                             "attention: flash\n",
                             "mesh: t3k\n",
                             "speculate: lookup\n",
                             "\ndropped: ",
                             "\nreset\n",
                             "\nset: ",
                             "\n>\n"})
    EXPECT_NE(all.find(needle), std::string::npos) << needle;
}

// --prefix-cache-dir on replay: the second replay of a transcript that opens with a long message
// maps that message's blocks in from the files the first wrote, and still passes token for token.
TEST(TranscriptCli, ReplaysShareAPersistedPrefixCache) {
  test::TempDir dir;
  std::string head;
  for (int i = 0; i < 10; ++i) head += "The harbor master counts the boats at dawn and at dusk. ";
  test::WriteFile(dir.File("turns"), head + "How many boats?\nAnd tomorrow?\n");
  const auto rec = test::RunWormchat({"transcript", "record", "--turns", dir.File("turns"), "--out",
                                      dir.File("t.txt"), "--threads", "1", "-n", "8"});
  ASSERT_EQ(rec.exit_code, 0) << Describe(rec);
  const std::vector<std::string> cache = {"--prefix-cache-dir", dir.File("cache")};
  const auto first = Replay({dir.File("t.txt")}, "1", cache);
  EXPECT_EQ(first.exit_code, 0) << Describe(first);
  EXPECT_NE(first.out.find("passed (2 turns; "), std::string::npos) << first.out;
  EXPECT_NE(first.out.find(", 0 from the prefix cache"), std::string::npos) << first.out;
  const auto second = Replay({dir.File("t.txt")}, "1", cache);
  EXPECT_EQ(second.exit_code, 0) << Describe(second);
  const size_t at = second.out.find(" prompt tokens, ");
  ASSERT_NE(at, std::string::npos) << second.out;
  const int cached = std::stoi(second.out.substr(at + 16));
  EXPECT_GE(cached, 128) << second.out;  // the long message's full blocks
  EXPECT_EQ(cached % 64, 0) << second.out;
  const auto off = Replay({dir.File("t.txt")}, "1", {"--prefix-cache", "off"});
  EXPECT_EQ(off.exit_code, 0) << Describe(off);
  EXPECT_NE(off.out.find(", 0 from the prefix cache"), std::string::npos) << off.out;
}

}  // namespace
}  // namespace wc
