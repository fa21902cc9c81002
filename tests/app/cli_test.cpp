// End-to-end tests of the real `wormchat` binary: init, generate, chat, logits, tokenize, info.
#include <cmath>
#include <cstring>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "util/npy.h"

namespace wc {
namespace {

using test::RunWormchat;

const std::string kTokenizer = test::FixtureDir("tokenizer") + "/tokenizer.model";

// A small random BF16 model made by `wormchat init`, shared by the tests of this file.
class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    const auto r = RunWormchat(
        {"init",    "--preset", "falcon-40b", "--layers",    "2",        "--hidden", "256",
         "--heads", "8",        "--kv-heads", "2",           "--vocab",  "700",      "--ctx",
         "128",     "--seed",   "5",          "--tokenizer", kTokenizer, "--out",    dir_->path()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string Model() { return dir_->path(); }
  static test::TempDir* dir_;
};
test::TempDir* CliTest::dir_ = nullptr;

TEST_F(CliTest, InitWritesALoadableSeededCheckpoint) {
  const auto cfg = nlohmann::json::parse(test::ReadFile(Model() + "/config.json"));
  EXPECT_EQ(cfg["num_hidden_layers"], 2);
  EXPECT_EQ(cfg["num_kv_heads"], 2);
  EXPECT_EQ(cfg["new_decoder_architecture"], true);
  EXPECT_EQ(cfg["vocab_size"], 700);
  test::TempDir again;
  const auto r = RunWormchat(
      {"init",    "--preset", "falcon-40b", "--layers",    "2",        "--hidden", "256",
       "--heads", "8",        "--kv-heads", "2",           "--vocab",  "700",      "--ctx",
       "128",     "--seed",   "5",          "--tokenizer", kTokenizer, "--out",    again.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::ReadFile(Model() + "/model.safetensors"),
            test::ReadFile(again.File("model.safetensors")));
  EXPECT_EQ(test::ReadFile(Model() + "/tokenizer.model"), test::ReadFile(kTokenizer));
}

TEST_F(CliTest, GenerateIsDeterministicForASeedOnAnyThreadCount) {
  auto gen = [&](const std::string& seed, const std::string& threads) {
    const auto r =
        RunWormchat({"generate", "--model", Model(), "--prompt", "The harbor", "-n", "24", "--seed",
                     seed, "--threads", threads, "--top-k", "0", "--top-p", "1"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string a = gen("1", "1");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, gen("1", "2"));
  EXPECT_EQ(a, gen("1", "4"));
  EXPECT_NE(a, gen("2", "2"));
}

// --stats: the prompt's time is its prefill's whatever -n is, and a rate over no tokens (or an
// unmeasurably short time) prints as "-", never as a huge number.
TEST_F(CliTest, GenerateStatsTimeThePrefillEvenWithNothingGenerated) {
  const std::regex line(
      R"(prompt [0-9]+ tokens \(0 from the prefix cache\) in ([0-9.]+) s \((- tok/s|[0-9.]+ tok/s)\); )"
      R"(generated ([0-9]+) tokens in ([0-9.]+) s \((- tok/s|[0-9.]+ tok/s)\); )");
  for (const char* n : {"0", "4"}) {
    SCOPED_TRACE(std::string("-n ") + n);
    const auto r = RunWormchat({"generate", "--model", Model(), "--prompt", "The harbor at dawn",
                                "-n", n, "--stats", "--prefix-cache", "off"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.err, m, line)) << r.err;
    const double prefill_s = std::stod(m[1]);
    EXPECT_GT(prefill_s, 0) << r.err;  // the prefill took time, -n 0 included
    if (m[2] != "- tok/s") {
      EXPECT_LT(std::stod(m[2]), 1e7) << r.err;
    }
    EXPECT_EQ(m[3], n);
    if (std::string(n) == "0") {
      EXPECT_EQ(m[4], "0.000");
      EXPECT_EQ(m[5], "- tok/s");
    } else {
      EXPECT_NE(m[5], "- tok/s") << r.err;
    }
  }
}

TEST_F(CliTest, LogitsWritesEveryPositionOfTheRealVocabulary) {
  test::TempDir out;
  const auto r = RunWormchat(
      {"logits", "--model", Model(), "--ids", "5 6 7 699 0", "--out", out.File("l.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const NpyArray a = ReadNpyF32(out.File("l.npy"));
  EXPECT_EQ(a.shape, (std::vector<int64_t>{5, 700}));
  for (float v : a.data) ASSERT_TRUE(std::isfinite(v));
  // --prompt is tokenized as `tokenize` prints it (this model has no chat format).
  const auto ids = RunWormchat({"tokenize", "--model", Model(), "--text", "a harbor"});
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  const auto r2 = RunWormchat(
      {"logits", "--model", Model(), "--prompt", "a harbor", "--out", out.File("p.npy")});
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  const auto r3 =
      RunWormchat({"logits", "--model", Model(), "--ids", ids.out, "--out", out.File("q.npy")});
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  EXPECT_EQ(ReadNpyF32(out.File("p.npy")).data, ReadNpyF32(out.File("q.npy")).data);
}

TEST(Cli, LogitsMatchTheFixtureReference) {
  test::TempDir out;
  const std::string dir = test::FixtureDir("newarch_gqa_f32");
  const auto r = RunWormchat({"logits", "--model", dir, "--ids", test::ReadFile(dir + "/ids.txt"),
                              "--kv-dtype", "f32", "--out", out.File("l.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const NpyArray got = ReadNpyF32(out.File("l.npy")), ref = ReadNpyF32(dir + "/logits.npy");
  ASSERT_EQ(got.shape, ref.shape);
  EXPECT_LE(test::RelMaxError(got.data, ref.data), 1e-4);
}

TEST_F(CliTest, TokenizePrintsIdsOnOneLine) {
  const auto r = RunWormchat({"tokenize", "--model", Model(), "--text", "Define harbor."});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::CountLines(r.out), 1);
  EXPECT_NE(r.out.find(' '), std::string::npos);
  for (char c : r.out)
    EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(c)) || c == ' ' || c == '\n');
}

TEST_F(CliTest, ChatReadsLinesKeepsTheConversationAndHandlesCommands) {
  const auto r =
      RunWormchat({"chat", "--model", Model(), "-n", "8", "--temperature", "0"},
                  "hello\n/help\n/bogus\nwhat is a harbor?\n/reset\nhello\n/quit\nnever\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("/reset                start a new conversation"), std::string::npos);
  EXPECT_NE(r.out.find("unknown command /bogus"), std::string::npos);
  EXPECT_NE(r.out.find("(new conversation)"), std::string::npos);
  // Greedy, so the first reply to "hello" is repeated after /reset.
  const size_t reset = r.out.find("(new conversation)");
  const std::string first = r.out.substr(0, r.out.find('\n'));
  EXPECT_NE(r.out.find(first, reset), std::string::npos) << r.out;
}

TEST_F(CliTest, ChatDropsTheOldestTurnsWhenTheContextIsFull) {
  std::string input;
  for (int i = 0; i < 6; ++i) input += "tell me about the harbor and the ships in it\n";
  const auto r =
      RunWormchat({"chat", "--model", Model(), "--ctx", "48", "-n", "8", "--seed", "1"}, input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(context full: dropped the 1 oldest turn)"), std::string::npos) << r.out;
  int drops = 0;
  for (size_t at = r.out.find("(context full: dropped"); at != std::string::npos;
       at = r.out.find("(context full: dropped", at + 1))
    ++drops;
  EXPECT_GE(drops, 2) << "six turns of ~20 tokens in 48 positions:\n" << r.out;
  const auto huge =
      RunWormchat({"chat", "--model", Model(), "--ctx", "16"}, std::string(400, 'x') + "\nhi\n");
  ASSERT_EQ(huge.exit_code, 0) << huge.err;
  EXPECT_NE(huge.out.find("too long for the context of 16"), std::string::npos) << huge.out;
}

TEST(Cli, InfoShowsTheSeedsFalcon40bKvFigures) {
  const auto r = RunWormchat({"info", "--preset", "falcon-40b", "--users", "32", "--ctx", "2048"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("K 64 MiB + V 64 MiB = 128 MiB for 32 users x 2048 positions"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("7680 MiB for all 60 layers"), std::string::npos) << r.out;
  const auto j =
      RunWormchat({"info", "--preset", "falcon-40b", "--users", "32", "--ctx", "2048", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto info = nlohmann::json::parse(j.out);
  EXPECT_EQ(info["kv_bytes_per_layer_k"], 64LL << 20);
  EXPECT_EQ(info["kv_bytes_per_layer"], 128LL << 20);
  EXPECT_EQ(info["kv_bytes_total"], 7680LL << 20);
  EXPECT_EQ(info["kv_bytes_per_token"], 2 * 60 * 8 * 64 * 2);
}

TEST(Cli, InfoOfAModelDirectoryCountsItsWeights) {
  const auto r = RunWormchat({"info", "--model", test::FixtureDir("mq_bias_bf16"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto info = nlohmann::json::parse(r.out);
  EXPECT_EQ(info["weight_dtype"], "BF16");
  EXPECT_EQ(info["weight_bytes"].get<int64_t>(), 2 * info["parameters"].get<int64_t>());
}

}  // namespace
}  // namespace wc
