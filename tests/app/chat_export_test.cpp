// The chat's /export (app/chat/chat_export.h): both formats byte for byte, UTF-8 kept and invalid
// bytes replaced in JSON, and the file rules - the extension picks the format, an existing file
// is refused unless forced, a missing directory is one line naming the file.
#include "app/chat/chat_export.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace wc {
namespace {

ConversationTurn Turn(const std::string& user, const std::string& reply,
                      const ConversationSettings& s, bool reset_before = false) {
  ConversationTurn t;
  t.user = user;
  t.reply_text = reply;
  t.settings = s;
  t.reset_before = reset_before;
  t.finished = true;
  return t;
}

// A chat with a system prompt, a code block, UTF-8, a settings change, a /reset, an empty reply
// and a reply still running.
ExportContent Chat() {
  ExportContent c;
  c.model = "default";
  c.title = "Falcons";
  c.settings.sampling.temperature = 0.9f;
  c.settings.sampling.top_k = 5;
  c.settings.sampling.top_p = 0.9f;
  c.settings.seed = 42;
  c.settings.max_new_tokens = 256;
  c.settings.system = "You answer briefly.";
  ConversationSettings later = c.settings;
  later.sampling.temperature = 0.5f;
  later.seed = 7;
  c.turns.push_back(Turn("hello", "Hi! *Falcons* are birds.\n\n```py\nprint(1)\n```", c.settings));
  c.turns.push_back(Turn("caf\xC3\xA9 \xE4\xB8\x80", "ok", later));
  c.turns.push_back(Turn("again", "", later, /*reset_before=*/true));
  ConversationTurn running = Turn("still running", "", later);
  running.finished = false;
  c.turns.push_back(running);
  return c;
}

TEST(ChatExport, Markdown) {
  EXPECT_EQ(ExportMarkdown(Chat()),
            "# Falcons\n"
            "\n"
            "- model: default\n"
            "- settings: temperature 0.9, top-k 5, top-p 0.9, seed 42, max tokens 256\n"
            "\n"
            "### System\n"
            "\n"
            "You answer briefly.\n"
            "\n"
            "### You\n"
            "\n"
            "hello\n"
            "\n"
            "### wormchat\n"
            "\n"
            "Hi! *Falcons* are birds.\n"
            "\n"
            "```py\n"
            "print(1)\n"
            "```\n"
            "\n"
            "*(settings from here: temperature 0.5, seed 7)*\n"
            "\n"
            "### You\n"
            "\n"
            "caf\xC3\xA9 \xE4\xB8\x80\n"
            "\n"
            "### wormchat\n"
            "\n"
            "ok\n"
            "\n"
            "---\n"
            "\n"
            "*(new conversation)*\n"
            "\n"
            "### You\n"
            "\n"
            "again\n"
            "\n"
            "### wormchat\n"
            "\n"
            "*(no reply)*\n");
}

TEST(ChatExport, MarkdownWithoutTitleOrSystemAndWithBeamsAndAChangedSystemPrompt) {
  ExportContent c;
  c.model = "/models/falcon";
  c.settings.sampling.temperature = 0;
  c.settings.max_new_tokens = 64;
  BeamParams b;
  b.num_beams = 4;
  b.early_stopping = true;
  c.settings.beams = b;
  ConversationSettings later = c.settings;
  later.system = "Be terse.";
  later.beams.reset();
  c.turns.push_back(Turn("a", "b\n", c.settings));
  c.turns.push_back(Turn("c", "d", later));
  EXPECT_EQ(ExportMarkdown(c),
            "# wormchat chat\n\n"
            "- model: /models/falcon\n"
            "- settings: temperature 0, top-k 5, top-p 0.9, seed 0, max tokens 64, beams 4, early "
            "stopping\n\n"
            "### You\n\na\n\n### wormchat\n\nb\n\n"
            "*(settings from here: sampling)*\n\n"
            "### System\n\nBe terse.\n\n"
            "### You\n\nc\n\n### wormchat\n\nd\n");
}

TEST(ChatExport, Json) {
  EXPECT_EQ(ExportJson(Chat()), R"({
  "model": "default",
  "title": "Falcons",
  "settings": {
    "temperature": 0.9,
    "top_k": 5,
    "top_p": 0.9,
    "seed": 42,
    "max_tokens": 256
  },
  "messages": [
    {
      "role": "system",
      "content": "You answer briefly."
    },
    {
      "role": "user",
      "content": "hello"
    },
    {
      "role": "assistant",
      "content": "Hi! *Falcons* are birds.\n\n```py\nprint(1)\n```"
    },
    {
      "role": "user",
      "content": "café 一",
      "settings": {
        "temperature": 0.5,
        "top_k": 5,
        "top_p": 0.9,
        "seed": 7,
        "max_tokens": 256
      }
    },
    {
      "role": "assistant",
      "content": "ok"
    },
    {
      "role": "user",
      "content": "again",
      "new_conversation": true
    },
    {
      "role": "assistant",
      "content": ""
    }
  ]
}
)");
}

TEST(ChatExport, SpeculationIsRecordedWhenOnAndLeftOutWhenOff) {
  ExportContent c = Chat();
  EXPECT_EQ(ExportMarkdown(c).find("speculation"), std::string::npos);
  EXPECT_EQ(ExportJson(c).find("speculation"), std::string::npos);
  c.speculate_k = 4;
  c.lookup_ngram = 2;
  EXPECT_NE(ExportMarkdown(c).find("top-p 0.9, seed 42, max tokens 256\n- speculation: prompt "
                                   "lookup, k 4, n-grams up to 2\n\n### System\n"),
            std::string::npos)
      << ExportMarkdown(c);
  const nlohmann::json j = nlohmann::json::parse(ExportJson(c));
  EXPECT_EQ(j["speculation"], (nlohmann::json{{"mode", "lookup"}, {"k", 4}, {"lookup_ngram", 2}}));
}

TEST(ChatExport, InvalidUtf8IsKeptInMarkdownAndReplacedInJson) {
  ExportContent c;
  c.model = "default";
  c.title = "bad \xFF";
  c.turns.push_back(
      Turn("a\xFF"
           "b",
           "\xC3(\xE2\x82\xAC", c.settings));
  const std::string md = ExportMarkdown(c);
  EXPECT_NE(md.find("# bad \xFF\n"), std::string::npos);
  EXPECT_NE(md.find("\na\xFF"
                    "b\n"),
            std::string::npos);
  const std::string json = ExportJson(c);  // never throws
  EXPECT_NE(json.find("\"title\": \"bad \xEF\xBF\xBD\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"content\": \"a\xEF\xBF\xBD"
                      "b\""),
            std::string::npos)
      << json;
  // A lone lead byte is replaced; the valid euro sign after it is kept.
  EXPECT_NE(json.find("\"content\": \"\xEF\xBF\xBD(\xE2\x82\xAC\""), std::string::npos) << json;
}

TEST(ChatExport, TheExtensionPicksTheFormat) {
  EXPECT_EQ(ExportFormatOf("a.md"), ExportFormat::kMarkdown);
  EXPECT_EQ(ExportFormatOf("dir.x/A.MarkDown"), ExportFormat::kMarkdown);
  EXPECT_EQ(ExportFormatOf("a.JSON"), ExportFormat::kJson);
  EXPECT_EQ(ExportFormatOf("a.txt"), ExportFormat::kUnknown);
  EXPECT_EQ(ExportFormatOf("notes"), ExportFormat::kUnknown);
  EXPECT_EQ(ExportFormatOf("a.md/"), ExportFormat::kUnknown);
}

class ChatExportFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/wc_export_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string dir_;
};

TEST_F(ChatExportFile, WritesEitherFormatAndSaysWhat) {
  const std::string md = dir_ + "/chat.md", json = dir_ + "/chat.JSON";
  EXPECT_EQ(ExportChat(md, false, Chat()), "exported 3 turns to " + md + " (Markdown)");
  EXPECT_EQ(Read(md), ExportMarkdown(Chat()));
  EXPECT_EQ(ExportChat(json, false, Chat()), "exported 3 turns to " + json + " (JSON)");
  EXPECT_EQ(Read(json), ExportJson(Chat()));
  ExportContent one = Chat();
  one.turns.resize(1);
  EXPECT_EQ(ExportChat(dir_ + "/one.markdown", false, one),
            "exported 1 turn to " + dir_ + "/one.markdown (Markdown)");
  // Nothing but the two files is left (no temporary file).
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 3);
}

TEST_F(ChatExportFile, AnExistingFileIsRefusedUnlessForced) {
  const std::string path = dir_ + "/chat.md";
  std::ofstream(path) << "keep me";
  EXPECT_EQ(ExportChat(path, false, Chat()),
            "not exported: " + path + " exists (/export! " + path + " overwrites it)");
  EXPECT_EQ(Read(path), "keep me");
  EXPECT_EQ(ExportChat(path, true, Chat()), "exported 3 turns to " + path + " (Markdown)");
  EXPECT_EQ(Read(path), ExportMarkdown(Chat()));
  // A directory is never overwritten.
  std::filesystem::create_directory(dir_ + "/d.md");
  EXPECT_EQ(ExportChat(dir_ + "/d.md", true, Chat()),
            "not exported: " + dir_ + "/d.md is a directory");
}

TEST_F(ChatExportFile, ABadExtensionOrAMissingDirectoryIsOneLine) {
  EXPECT_EQ(ExportChat(dir_ + "/chat.txt", false, Chat()),
            "not exported: " + dir_ +
                "/chat.txt does not end in .md, .markdown (Markdown) or .json (JSON), which pick "
                "the format");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/chat.txt"));
  const std::string missing = dir_ + "/no/such/chat.md";
  EXPECT_EQ(ExportChat(missing, false, Chat()), "not exported: cannot write " + missing +
                                                    ": No such file or directory (" + dir_ +
                                                    "/no/such)");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/no"));  // never created
  std::ofstream(dir_ + "/file") << "x";
  EXPECT_EQ(ExportChat(dir_ + "/file/chat.json", false, Chat()),
            "not exported: cannot write " + dir_ + "/file/chat.json: " + dir_ +
                "/file is not a directory");
}

TEST_F(ChatExportFile, AReadOnlyDirectorySaysTheOsReason) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  const std::string ro = dir_ + "/ro";
  std::filesystem::create_directory(ro);
  ::chmod(ro.c_str(), 0555);
  EXPECT_EQ(ExportChat(ro + "/chat.md", false, Chat()),
            "not exported: cannot write " + ro + "/chat.md: Permission denied");
  ::chmod(ro.c_str(), 0755);
}

TEST_F(ChatExportFile, TildeIsTheHomeDirectory) {
  const char* old = std::getenv("HOME");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("HOME", dir_.c_str(), 1);
  const std::string line = ExportChat("~/chat.json", false, Chat());
  if (old != nullptr) {
    ::setenv("HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("HOME");
  }
  EXPECT_EQ(line, "exported 3 turns to ~/chat.json (JSON)");
  EXPECT_EQ(Read(dir_ + "/chat.json"), ExportJson(Chat()));
}

}  // namespace
}  // namespace wc
