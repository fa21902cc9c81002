// The commands with a Hugging Face tokenizer.json through the real binary: a Falcon-shaped random
// checkpoint with Falcon's real vocabulary runs tokenize (HF's ids), generate, chat, batch,
// perplexity, transcript and bench tokenizer; generation_config.json sets defaults the flags
// override (the tokenizer itself: tests/tokenizer/hf_tokenizer_test.cpp).
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "serving/text_stream.h"
#include "tests/test_util.h"
#include "tokenizer/hf_tokenizer.h"

namespace wc {
namespace {

// Falcon's tokenizer.json (unpacked by tests/CMakeLists.txt), loaded once.
const HfTokenizer& Falcon() {
  static const HfTokenizer tok(WORMCHAT_FALCON_TOKENIZER);
  return tok;
}

// The ids as `wormchat tokenize` prints them: space-separated.
std::string IdsText(const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

bool IsValidUtf8ForTest(const std::string& s) {
  return Utf8CompletePrefix(s) == s.size() && SanitizeUtf8(s) == s;
}

void CopyFile(const std::string& from, const std::string& to) {
  std::ofstream(to, std::ios::binary) << test::ReadFile(from);
}

// A Falcon-shaped random checkpoint with Falcon's real tokenizer.json runs every text command.
class FalconVocabModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    const auto r = test::RunWormchat({"init", "--preset", "falcon-7b", "--layers", "1", "--hidden",
                                      "128", "--heads", "2", "--tokenizer",
                                      WORMCHAT_FALCON_TOKENIZER, "--out", dir_->path(), "--force"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static test::TempDir* dir_;
};
test::TempDir* FalconVocabModel::dir_ = nullptr;

TEST_F(FalconVocabModel, InitWroteTokenizerJsonAndTokenizeMatchesHf) {
  EXPECT_FALSE(test::ReadFile(dir_->File("tokenizer.json")).empty());
  const auto r = test::RunWormchat(
      {"tokenize", "--model", dir_->path(), "--text", "Hello, world!<|endoftext|> 12345"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, IdsText(Falcon().Encode("Hello, world!<|endoftext|> 12345")) + "\n");
  EXPECT_NE(r.out.find(" 11 "), std::string::npos) << r.out;  // the special token is matched
}

TEST_F(FalconVocabModel, GenerateChatBatchPerplexityAndTranscriptRun) {
  const std::string m = dir_->path();
  auto gen = test::RunWormchat(
      {"generate", "--model", m, "--prompt", "Bonjour \xF0\x9F\xA6\x85", "-n", "8", "--seed", "3"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_TRUE(IsValidUtf8ForTest(gen.out)) << gen.out;
  auto chat = test::RunWormchat({"chat", "--model", m, "--plain", "-n", "6", "--seed", "1"},
                                "Hi there!\n/quit\n");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  test::TempDir work;
  std::ofstream(work.File("prompts.txt")) << "Tell me about falcons\nQuelle heure est-il ?\n";
  auto batch = test::RunWormchat({"batch", "--model", m, "-i", work.File("prompts.txt"), "-o",
                                  work.File("out.jsonl"), "-n", "5", "--seed", "2"});
  ASSERT_EQ(batch.exit_code, 0) << batch.err;
  EXPECT_NE(test::ReadFile(work.File("out.jsonl")).find("\"finish_reason\""), std::string::npos);
  std::ofstream(work.File("text.txt")) << "The quick brown fox. \xC3\x9C"
                                          "n\xC3\xAF"
                                          "c\xC3\xB6"
                                          "d\xC3\xA9 12345\n";
  auto ppl = test::RunWormchat({"perplexity", "--model", m, "--text", work.File("text.txt")});
  ASSERT_EQ(ppl.exit_code, 0) << ppl.err;
  EXPECT_NE(ppl.out.find("tokens scored"), std::string::npos) << ppl.out;
  std::ofstream(work.File("turns.txt")) << "Hello Falcon \xF0\x9F\xA6\x85\nWhat is 1234 + 5678?\n";
  auto rec =
      test::RunWormchat({"transcript", "record", "--model", m, "--turns", work.File("turns.txt"),
                         "--out", work.File("t.transcript"), "-n", "6", "--seed", "5"});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  auto replay =
      test::RunWormchat({"transcript", "replay", "--model", m, work.File("t.transcript")});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  EXPECT_NE(replay.out.find("1 passed"), std::string::npos) << replay.out;
}

TEST_F(FalconVocabModel, GenerationConfigSetsDefaultsFlagsWin) {
  test::TempDir dir;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    CopyFile(dir_->File(f), dir.File(f));
  auto gen = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"generate", "--model", dir.path(), "--prompt",
                                     "Hello",    "--seed",  "4"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = test::RunWormchat(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string greedy = gen({"-n", "6", "--temperature", "0"});
  std::ofstream(dir.File("generation_config.json"))
      << R"({"do_sample": false, "max_new_tokens": 6})";
  EXPECT_EQ(gen({}), greedy);                                 // do_sample false: greedy; 6 tokens
  EXPECT_NE(gen({"--temperature", "5", "-n", "6"}), greedy);  // a flag wins
  std::ofstream(dir.File("generation_config.json")) << R"({"temperature": "hot"})";
  auto bad = test::RunWormchat({"generate", "--model", dir.path(), "--prompt", "Hello"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("generation_config.json: key 'temperature'"), std::string::npos)
      << bad.err;
}

TEST_F(FalconVocabModel, BenchTokenizerReportsSpeed) {
  test::TempDir work;
  std::ofstream(work.File("text.txt")) << "Hello world, 12345!\nBonjour \xF0\x9F\xA6\x85\n";
  auto r =
      test::RunWormchat({"bench", "tokenizer", "--model", dir_->path(), "--text",
                         work.File("text.txt"), "--repeats", "2", "--json", work.File("b.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("MB/s"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(test::ReadFile(work.File("b.json")));
  EXPECT_EQ(j["tokens"].get<int>(),
            static_cast<int>(Falcon().Encode("Hello world, 12345!\n").size() +
                             Falcon().Encode("Bonjour \xF0\x9F\xA6\x85\n").size()));
  auto missing = test::RunWormchat(
      {"bench", "tokenizer", "--model", dir_->path(), "--text", work.File("none.txt")});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("none.txt"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace wc
