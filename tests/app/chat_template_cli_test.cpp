// A checkpoint's own chat template through the real binary (issue 51): a Falcon3-layout checkpoint
// whose tokenizer_config.json holds Falcon3's published template frames `generate` prompts,
// `tokenize --chat`, batch chat requests and recorded transcripts with that template's rendering;
// chat_format.json and --chat-format win over it; a template wormchat does not know is one line
// naming --chat-format wherever a prompt is framed, and --raw still runs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/app/batch_test_util.h"
#include "tests/test_util.h"

namespace wc {
namespace {

using test::RunWormchat;
using json = nlohmann::json;

const std::string kTemplateModelTokenizer = test::FixtureDir("tokenizer") + "/tokenizer.model";

std::string Falcon3Template() {
  return test::ReadFile(test::FixtureDir("chat_templates") + "/falcon3.jinja");
}

class ChatTemplateCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    const auto r = RunWormchat({"init",
                                "--preset",
                                "falcon3-1b",
                                "--layers",
                                "1",
                                "--hidden",
                                "128",
                                "--heads",
                                "2",
                                "--kv-heads",
                                "1",
                                "--vocab",
                                "700",
                                "--ctx",
                                "256",
                                "--seed",
                                "11",
                                "--tokenizer",
                                kTemplateModelTokenizer,
                                "--out",
                                dir_->path()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    test::WriteFile(dir_->File("tokenizer_config.json"), json({{"chat_template", Falcon3Template()},
                                                               {"eos_token", "<|endoftext|>"},
                                                               {"bos_token", nullptr}})
                                                             .dump());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string Model() { return dir_->path(); }
  static test::TempDir* dir_;
};
test::TempDir* ChatTemplateCliTest::dir_ = nullptr;

std::string Tokenize(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"tokenize"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = RunWormchat(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

// The ids `generate --json` generated (a framed reply's text drops its leading space: compare
// ids).
std::string Gen(const std::string& model, const std::string& prompt,
                const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"generate", "--model", model,           "--prompt", prompt,
                                   "-n",       "10",      "--temperature", "0",        "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = RunWormchat(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return std::string();
  return json::parse(r.out)["sequences"][0]["ids"].dump();
}

std::string LeftTrimmed(std::string s) {
  return s.erase(0, s.find_first_not_of(' '));
}

TEST_F(ChatTemplateCliTest, GenerateAndTokenizeFeedTheTemplatesRendering) {
  const std::string rendered = "<|user|>\nWhere do falcons nest?\n<|assistant|>\n";
  EXPECT_EQ(Tokenize({"--model", Model(), "--chat", "--text", "Where do falcons nest?"}),
            Tokenize({"--model", Model(), "--text", rendered}));
  EXPECT_EQ(Gen(Model(), "Where do falcons nest?", {}), Gen(Model(), rendered, {"--raw"}));
}

TEST_F(ChatTemplateCliTest, BatchChatRequestsAreTheTemplatesRendering) {
  test::TempDir dir;
  const json messages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                                     test::User("Hi"),
                                     {{"role", "assistant"}, {"content", "Hello."}},
                                     test::User("Bye")});
  const std::string rendered =
      "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\nHello.<|endoftext|>\n<|user|>\nBye\n"
      "<|assistant|>\n";
  const auto r = test::Batch(
      dir,
      test::Jsonl({test::Chat("c1", messages, {{"seed", 1}, {"temperature", 0}}),
                   test::Completion("c2", rendered, {{"seed", 1}, {"temperature", 0}})}),
      dir.File("out.jsonl"), {"--model", Model(), "-n", "10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto recs = test::Records(test::ReadFile(dir.File("out.jsonl")));
  ASSERT_EQ(recs.size(), 2u);
  const json& chat = recs.at("batch-1")["response"]["body"];
  const json& raw = recs.at("batch-2")["response"]["body"];
  EXPECT_EQ(chat["usage"]["prompt_tokens"], raw["usage"]["prompt_tokens"]);
  EXPECT_EQ(chat["usage"]["completion_tokens"], raw["usage"]["completion_tokens"]);
  EXPECT_EQ(LeftTrimmed(test::Text(recs.at("batch-1"))),
            LeftTrimmed(test::Text(recs.at("batch-2"))));
  // The ids of the rendering, counted as tokenize counts them (special tokens matched).
  const std::string ids = Tokenize({"--model", Model(), "--text", rendered});
  EXPECT_EQ(chat["usage"]["prompt_tokens"].get<int>(),
            static_cast<int>(std::count(ids.begin(), ids.end(), ' ') + 1));
}

TEST_F(ChatTemplateCliTest, TranscriptsRecordAndReplayWithTheTemplate) {
  test::TempDir dir;
  test::WriteFile(dir.File("turns"), "Name a falcon.\nAnother one?\n");
  const auto rec =
      RunWormchat({"transcript", "record", "--model", Model(), "--turns", dir.File("turns"),
                   "--out", dir.File("t.txt"), "-n", "6", "--system", "Be brief."});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  const auto rep = RunWormchat({"transcript", "replay", "--model", Model(), dir.File("t.txt")});
  EXPECT_EQ(rep.exit_code, 0) << rep.err << rep.out;
  EXPECT_NE(rep.out.find("passed (2 turns"), std::string::npos) << rep.out;
}

TEST_F(ChatTemplateCliTest, ChatFormatJsonAndTheFlagWinOverTheTemplate) {
  test::TempDir dir;
  test::WriteFile(dir.File("qa.json"), R"({"user_prefix": "Q: ", "assistant_prefix": "A:"})");
  EXPECT_EQ(Tokenize({"--model", Model(), "--chat", "--chat-format", dir.File("qa.json"), "--text",
                      "hi"}),
            Tokenize({"--model", Model(), "--text", "Q: hi\nA:"}));
  EXPECT_EQ(Gen(Model(), "hi", {"--chat-format", dir.File("qa.json")}),
            Gen(Model(), "Q: hi\nA:", {"--raw"}));
  const auto bad = RunWormchat({"generate", "--model", Model(), "--prompt", "hi", "--chat-format",
                                dir.File("missing.json")});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--chat-format"), std::string::npos) << bad.err;
}

TEST_F(ChatTemplateCliTest, AnUnknownTemplateIsOneLineNamingTheFlag) {
  test::TempDir dir;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model"})
    test::WriteFile(dir.File(f), test::ReadFile(Model() + "/" + f));
  test::WriteFile(dir.File("tokenizer_config.json"),
                  json({{"chat_template", "{{ messages[0]['content'] }}"}}).dump());
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"generate", "--model", dir.path(), "--prompt", "hi", "-n", "2"},
        {"tokenize", "--model", dir.path(), "--chat", "--text", "hi"}}) {
    const auto r = RunWormchat(args);
    EXPECT_NE(r.exit_code, 0) << args[0];
    EXPECT_NE(r.err.find("tokenizer_config.json"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--chat-format"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_FALSE(Gen(dir.path(), "hi", {"--raw"}).empty());
  test::WriteFile(dir.File("qa.json"), R"({"user_prefix": "Q: "})");
  EXPECT_FALSE(Gen(dir.path(), "hi", {"--chat-format", dir.File("qa.json")}).empty());
}

}  // namespace
}  // namespace wc
