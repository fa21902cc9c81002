// The serving features on a GGUF model through the real binary, as on a checkpoint directory:
// transcripts record the file's size and fingerprint (its header and tensor table) and replay bit
// for bit, and refuse another file; the persisted prefix cache keys its files by the GGUF file,
// so two files never share them; a GGUF draft proposes for a GGUF target, the same tokens as
// without it. The model is tests/fixtures/gguf/mq_f32.gguf (a [PADn] vocabulary: runs on --ids),
// its drafts mq_q8_0.gguf and mq_q4_0.gguf (the same model quantized by llama-quantize).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/app/batch_test_util.h"
#include "tests/model/gguf_writer.h"
#include "tests/test_util.h"

namespace wc::test {
namespace {

std::string GgufFixture(const std::string& name) {
  return FixtureDir("gguf") + "/" + name + ".gguf";
}

// `from` copied to `to` with a key of its own spliced in (test::AddKeys): the same tensors and
// tokens, another file.
void WriteOtherFile(const std::string& from, const std::string& to) {
  GgufWriter keys;
  keys.Str("general.description", "another file of the same model");
  const std::string bytes = ReadFile(from);
  const std::vector<uint8_t> out = AddKeys(std::vector<uint8_t>(bytes.begin(), bytes.end()), keys);
  WriteFile(to, std::string(out.begin(), out.end()));
}

RunResult Record(const TempDir& dir, const std::string& model, const std::string& out) {
  WriteFile(dir.File("turns.txt"), "5 17 9\n3 4\n");
  return RunWormchat({"transcript", "record", "--model", model, "--ids", "--turns",
                      dir.File("turns.txt"), "--out", out, "-n", "6", "--seed", "2", "--threads",
                      "1"});
}

TEST(GgufFeatures, TranscriptsRecordTheFileAndReplayBitForBit) {
  TempDir dir;
  const std::string model = dir.File("m.gguf");
  WriteFile(model, ReadFile(GgufFixture("mq_f32")));
  const RunResult rec = Record(dir, model, dir.File("t.txt"));
  ASSERT_EQ(rec.exit_code, 0) << Describe(rec);
  const std::string text = ReadFile(dir.File("t.txt"));
  const std::string size = std::to_string(ReadFile(model).size());
  EXPECT_NE(text.find("\nfingerprint: "), std::string::npos) << text;
  EXPECT_NE(text.find("\nmodel-size: " + size + "\n"), std::string::npos) << text;
  for (const char* threads : {"1", "2"}) {
    const RunResult replay =
        RunWormchat({"transcript", "replay", dir.File("t.txt"), "--threads", threads});
    EXPECT_EQ(replay.exit_code, 0) << Describe(replay);
    EXPECT_NE(replay.out.find(": passed (2 turns"), std::string::npos) << replay.out;
  }
  // A renamed copy is the same model.
  WriteFile(dir.File("copy.gguf"), ReadFile(model));
  const RunResult copy =
      RunWormchat({"transcript", "replay", dir.File("t.txt"), "--model", dir.File("copy.gguf")});
  EXPECT_EQ(copy.exit_code, 0) << Describe(copy);
  // `info` prints the fingerprint the header has.
  const RunResult info = RunWormchat({"info", "--model", model});
  const size_t at = text.find("\nfingerprint: ") + 14;
  EXPECT_NE(info.out.find(text.substr(at, 32)), std::string::npos) << info.out;
}

TEST(GgufFeatures, ReplayRefusesAnotherFileInOneLine) {
  TempDir dir;
  const std::string model = GgufFixture("mq_f32");
  ASSERT_EQ(Record(dir, model, dir.File("t.txt")).exit_code, 0);
  const auto replay_on = [&](const std::string& other) {
    return RunWormchat({"transcript", "replay", dir.File("t.txt"), "--model", other});
  };
  // Another size: named first.
  WriteOtherFile(model, dir.File("longer.gguf"));
  const RunResult longer = replay_on(dir.File("longer.gguf"));
  EXPECT_NE(longer.exit_code, 0);
  EXPECT_NE(longer.err.find("recorded on a GGUF file of " + std::to_string(ReadFile(model).size()) +
                            " bytes, but " + dir.File("longer.gguf") + " has " +
                            std::to_string(ReadFile(dir.File("longer.gguf")).size())),
            std::string::npos)
      << longer.err;
  EXPECT_EQ(CountLines(longer.err), 1) << longer.err;
  // The same size, one byte of the header's vocabulary changed: the fingerprint tells them apart.
  std::string bytes = ReadFile(model);
  const size_t piece = bytes.find("[PAD300]");
  ASSERT_NE(piece, std::string::npos);
  bytes[piece + 1] = 'Q';
  WriteFile(dir.File("edited.gguf"), bytes);
  const RunResult edited = replay_on(dir.File("edited.gguf"));
  EXPECT_NE(edited.exit_code, 0);
  EXPECT_NE(edited.err.find("recorded on another model: fingerprint "), std::string::npos)
      << edited.err;
  EXPECT_EQ(CountLines(edited.err), 1) << edited.err;
  // The checkpoint directory it was converted from is another model too.
  const RunResult directory = replay_on(FixtureDir("mq_f32"));
  EXPECT_NE(directory.exit_code, 0);
  EXPECT_NE(directory.err.find(FixtureDir("mq_f32") + " is a model directory"), std::string::npos)
      << directory.err;
}

// Two requests sharing a 40-token head (two full KV blocks of 16).
std::string SharedHeadBatch() {
  std::string head;
  for (int i = 0; i < 40; ++i) head += std::to_string(20 + i * 7 % 300) + " ";
  return head + "5 6\n" + head + "7 8\n";
}

RunResult CachedBatch(const TempDir& dir, const std::string& model, const std::string& out,
                      const std::string& cache) {
  return Batch(dir, SharedHeadBatch(), out,
               {"--model", model, "--ids", "-n", "4", "--seed", "3", "--user-rows", "1",
                "--prefix-cache-dir", cache, "--kv-block-size", "16", "--threads", "1"});
}

TEST(GgufFeatures, ThePrefixCacheFilesOfTwoGgufFilesAreNeverShared) {
  TempDir dir;
  const std::string a = GgufFixture("mq_f32"), b = dir.File("b.gguf");
  WriteOtherFile(a, b);  // the same tensors: the same K/V bytes, but another file
  const std::string cache = dir.File("cache");
  const RunResult a1 = CachedBatch(dir, a, dir.File("a1.jsonl"), cache);
  ASSERT_EQ(a1.exit_code, 0) << a1.err;
  EXPECT_NE(a1.err.find(" files written)"), std::string::npos) << a1.err;
  const RunResult b1 = CachedBatch(dir, b, dir.File("b1.jsonl"), cache);
  ASSERT_EQ(b1.exit_code, 0) << b1.err;
  EXPECT_NE(b1.err.find("; 0 blocks mapped in from files, "), std::string::npos) << b1.err;
  EXPECT_EQ(b1.err.find("warning"), std::string::npos) << b1.err;
  const RunResult a2 = CachedBatch(dir, a, dir.File("a2.jsonl"), cache);
  ASSERT_EQ(a2.exit_code, 0) << a2.err;
  EXPECT_EQ(a2.err.find("; 0 blocks mapped in from files, "), std::string::npos) << a2.err;
  EXPECT_NE(a2.err.find(" blocks mapped in from files, "), std::string::npos) << a2.err;
  // The replies are the same bits whether the blocks came from files, were computed, or ran on
  // the other file; only the cached-token counts (and the model's name) differ.
  const auto strip = [](std::map<std::string, json> recs) {
    for (auto& [id, rec] : recs) {
      rec["response"]["body"]["usage"].erase("prompt_tokens_details");
      rec["response"]["body"].erase("model");  // the file's name
    }
    return recs;
  };
  const auto a1_recs = strip(Records(ReadFile(dir.File("a1.jsonl"))));
  ASSERT_EQ(a1_recs.size(), 2u);
  EXPECT_EQ(strip(Records(ReadFile(dir.File("a2.jsonl")))), a1_recs);
  EXPECT_EQ(strip(Records(ReadFile(dir.File("b1.jsonl")))), a1_recs);
}

// `generate` of 40 ids after "5 17 42 9" on `model`, greedy unless `more` sets --temperature.
std::vector<std::string> GreedyIds(const std::string& model, std::vector<std::string> more) {
  std::vector<std::string> args = {"generate", "--model", model, "--ids", "5 17 42 9", "-n", "40"};
  if (std::find(more.begin(), more.end(), "--temperature") == more.end())
    more.insert(more.end(), {"--temperature", "0"});
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(GgufFeatures, AGgufDraftProposesForAGgufTargetTheSameTokens) {
  const std::string target = GgufFixture("mq_f32"), draft = GgufFixture("mq_q8_0");
  const RunResult off = RunWormchat(GreedyIds(target, {"--speculate", "off", "--threads", "1"}));
  ASSERT_EQ(off.exit_code, 0) << Describe(off);
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--draft-model", draft, "--threads", "1"},
        std::vector<std::string>{"--speculate", "draft", "--draft-model", draft, "--speculate-k",
                                 "3", "--threads", "2"}}) {
    std::vector<std::string> more = flags;
    more.push_back("--stats");
    const RunResult on = RunWormchat(GreedyIds(target, more));
    ASSERT_EQ(on.exit_code, 0) << Describe(on);
    EXPECT_EQ(on.out, off.out);
    EXPECT_NE(on.err.find("proposed tokens accepted (draft model "), std::string::npos) << on.err;
  }
  // A Q4_0 draft, whose proposals are often wrong: the same ids greedy and sampled, some
  // proposals rejected.
  const std::string q4 = GgufFixture("mq_q4_0");
  for (const std::vector<std::string>& sampling :
       {std::vector<std::string>{},
        std::vector<std::string>{"--temperature", "0.8", "--seed", "4"}}) {
    std::vector<std::string> plain = {"--speculate", "off", "--threads", "1"};
    std::vector<std::string> drafted = {"--draft-model", q4, "--stats", "--threads", "2"};
    plain.insert(plain.end(), sampling.begin(), sampling.end());
    drafted.insert(drafted.end(), sampling.begin(), sampling.end());
    const RunResult want = RunWormchat(GreedyIds(target, plain));
    const RunResult got = RunWormchat(GreedyIds(target, drafted));
    ASSERT_EQ(got.exit_code, 0) << Describe(got);
    EXPECT_EQ(got.out, want.out);
    const size_t at = got.err.find("speculation: ");
    ASSERT_NE(at, std::string::npos) << got.err;
    int accepted = 0, proposed = 0;
    ASSERT_EQ(std::sscanf(got.err.c_str() + at, "speculation: %d/%d", &accepted, &proposed), 2);
    EXPECT_LT(accepted, proposed) << got.err;
    EXPECT_GT(accepted, 0) << got.err;
  }
  // And the other way round: the F32 file drafting for its Q8_0 copy.
  const RunResult q_off = RunWormchat(GreedyIds(draft, {"--speculate", "off", "--threads", "1"}));
  const RunResult q_on = RunWormchat(GreedyIds(draft, {"--draft-model", target, "--threads", "1"}));
  ASSERT_EQ(q_on.exit_code, 0) << Describe(q_on);
  EXPECT_EQ(q_on.out, q_off.out);
}

}  // namespace
}  // namespace wc::test
