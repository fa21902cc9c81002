// --weights on the real binary: every model-loading command takes it, a bad spec is one line naming
// --weights with the other format flags' exit status (1), info --weights shows each group's bytes
// (bfp: 1088 / 576 bytes a 32x32 tile) whole and per rank, and transcripts record the spec (none
// for auto, so old transcripts replay as auto), replay under it token for token on 1 and 2
// threads, and name a replay --weights that differs from the recorded one in one line.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace wc {
namespace {

using json = nlohmann::json;

using test::Describe;

void ExpectOneLineError(const std::vector<std::string>& args, const std::string& needle) {
  const auto r = test::RunWormchat(args);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_EQ(test::CountLines(r.err), 1) << Describe(r);
  EXPECT_EQ(r.err.rfind("wormchat: error: --weights", 0), 0u) << Describe(r);
  EXPECT_NE(r.err.find(needle), std::string::npos) << Describe(r);
}

TEST(WeightsCli, BadSpecsAreOneLineErrorsOnEveryCommand) {
  test::TempDir dir;
  test::WriteFile(dir.File("text.txt"), "The harbor was quiet.");
  test::WriteFile(dir.File("turns"), "Hi\n");
  test::WriteFile(dir.File("in.jsonl"), "{\"prompt\": \"Hi\"}\n");
  const std::vector<std::vector<std::string>> commands = {
      {"generate", "--prompt", "hi"},
      {"logits", "--prompt", "hi", "--out", dir.File("l.npy")},
      {"perplexity", "--text", dir.File("text.txt")},
      {"chat"},
      {"batch", "-i", dir.File("in.jsonl"), "-o", dir.File("out.jsonl")},
      {"transcript", "record", "--turns", dir.File("turns"), "--out", dir.File("t.txt")},
      {"bench", "model", "--gen-len", "2"},
      {"bench", "serve"},
      {"bench", "beams"},
      {"calibrate", "--text", dir.File("text.txt"), "--out", dir.File("scales.json")},
      {"info"},
  };
  for (std::vector<std::string> args : commands) {
    args.insert(args.end(), {"--weights", "mlp=bfp3"});
    ExpectOneLineError(args, "unknown format 'bfp3'");
  }
  ExpectOneLineError({"generate", "--prompt", "hi", "--weights", "ffn=bfp8"},
                     "unknown group 'ffn'");
  ExpectOneLineError({"generate", "--prompt", "hi", "--weights", "mlp=bfp8,mlp=bfp4"},
                     "group 'mlp' is named twice");
  ExpectOneLineError({"generate", "--prompt", "hi", "--weights", "attn=bfp8,,mlp=bf16"},
                     "empty part");
}

TEST(WeightsCli, GenerateRunsInEveryFormat) {
  for (const char* w : {"f32", "bf16", "bfp8", "bfp4", "attn=bfp8,mlp=bfp4,lm_head=bf16"}) {
    const auto r = test::RunWormchat(
        {"generate", "--prompt", "Hello", "-n", "4", "--temperature", "0", "--weights", w});
    EXPECT_EQ(r.exit_code, 0) << w << "\n" << Describe(r);
    EXPECT_FALSE(r.out.empty()) << w;
  }
}

TEST(WeightsCli, InfoShowsBytesPerGroupAndRank) {
  // The default model: hidden 512, 8 heads of 64 (2 KV), ffn 2048, vocab 4096, 3 layers, F32.
  const auto r = test::RunWormchat(
      {"info", "--weights", "attn=bfp8,mlp=bfp4", "--tensor-parallel", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const json j = json::parse(r.out);
  EXPECT_EQ(j["weights"], "attn=bfp8,mlp=bfp4");
  EXPECT_EQ(j["weight_formats"]["attn"], "bfp8");
  EXPECT_EQ(j["weight_formats"]["lm_head"], "f32");
  const int64_t qkv_tiles = (768 / 32) * (512 / 32), dense_tiles = 16 * 16, mlp_tiles = 64 * 16;
  EXPECT_EQ(j["weight_bytes_by_group"]["attn"], 3 * (qkv_tiles + dense_tiles) * 1088);
  EXPECT_EQ(j["weight_bytes_by_group"]["mlp"], 3 * 2 * mlp_tiles * 576);
  EXPECT_EQ(j["weight_bytes_by_group"]["lm_head"], 4096 * 512 * 4);
  const json& ranks = j["tensor_parallel"]["per_rank"];
  ASSERT_EQ(ranks.size(), 2u);
  for (const json& rank : ranks) {
    EXPECT_EQ(rank["weight_bytes_by_group"]["attn"], 3 * (qkv_tiles + dense_tiles) * 1088 / 2);
    EXPECT_EQ(rank["weight_bytes_by_group"]["mlp"], 3 * mlp_tiles * 576);
  }
  const auto text = test::RunWormchat({"info", "--weights", "bfp4"});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_NE(text.out.find("--weights bfp4"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  mlp       bfp4"), std::string::npos) << text.out;
  const auto preset = test::RunWormchat({"info", "--preset", "falcon-7b", "--weights", "bfp8"});
  EXPECT_EQ(preset.exit_code, 0) << Describe(preset);
}

std::string Record(const test::TempDir& dir, const std::string& weights) {
  test::WriteFile(dir.File("turns"), "What is a falcon?\n/reset\nTell me a saying.\n");
  std::vector<std::string> args = {
      "transcript", "record", "--turns", dir.File("turns"), "--out", dir.File("t.txt"), "--threads",
      "1",          "-n",     "10",      "--seed",          "5"};
  if (!weights.empty()) args.insert(args.end(), {"--weights", weights});
  const auto r = test::RunWormchat(args);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  return dir.File("t.txt");
}

TEST(WeightsCli, TranscriptsRecordTheSpecAndReplayUnderIt) {
  test::TempDir dir;
  const std::string t = Record(dir, "mlp=bfp4,attn=bfp8");
  const std::string text = test::ReadFile(t);
  EXPECT_NE(text.find("\nweights: attn=bfp8,mlp=bfp4\n"), std::string::npos) << text;
  for (const char* threads : {"1", "2"}) {
    const auto r = test::RunWormchat({"transcript", "replay", "--threads", threads, t});
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    EXPECT_NE(r.out.find("passed"), std::string::npos) << Describe(r);
  }
  // The same spec written another way matches; another spec is a one-line mismatch (exit 2).
  auto r = test::RunWormchat({"transcript", "replay", "--weights", "attn=bfp8,mlp=bfp4", t});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  r = test::RunWormchat({"transcript", "replay", "--weights", "bfp8", t});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_EQ(test::CountLines(r.err), 1) << Describe(r);
  EXPECT_NE(r.err.find(t + ":"), std::string::npos) << Describe(r);
  EXPECT_NE(r.err.find("recorded with --weights attn=bfp8,mlp=bfp4, replayed with --weights bfp8"),
            std::string::npos)
      << Describe(r);
  // The replies depend on the formats: the header's spec is what runs. Under auto the same turns
  // are another transcript, with no weights line.
  test::TempDir auto_dir;
  const std::string a = Record(auto_dir, "");
  const std::string auto_text = test::ReadFile(a);
  EXPECT_EQ(auto_text.find("\nweights:"), std::string::npos) << auto_text;
  r = test::RunWormchat({"transcript", "replay", "--weights", "bfp8", a});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("recorded with --weights auto, replayed with --weights bfp8"),
            std::string::npos)
      << Describe(r);
  // A bad value in the header is named with its line.
  std::string bad = text;
  bad.replace(bad.find("weights: attn=bfp8"), 18, "weights: attn=bfp9");
  test::WriteFile(dir.File("bad.txt"), bad);
  r = test::RunWormchat({"transcript", "replay", dir.File("bad.txt")});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("weights: --weights 'attn=bfp9,mlp=bfp4': unknown format 'bfp9'"),
            std::string::npos)
      << Describe(r);
  EXPECT_NE(r.err.find("bad.txt:"), std::string::npos) << Describe(r);
}

}  // namespace
}  // namespace wc
