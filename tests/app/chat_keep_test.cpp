// Chats kept and resumed (app/chat/chat_store.h, ChatSession's Autosave / Resume): every turn is
// saved (atomically) as a transcript named by start time and title, which replays token for
// token; --resume continues the newest or a named chat exactly as the uninterrupted chat would
// have, in the same file; /title renames it, /undo rewrites it, /forget deletes it, --no-save
// keeps nothing; a chat saved with another model is refused with one line; an unwritable
// directory is a "not saved" notice and the chat goes on.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace wc::test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().string());
  return out;
}

std::vector<std::string> Chat(const std::string& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"chat", "--plain", "--seed",        "3",   "--threads",   "1",
                                   "-n",   "8",       "--temperature", "0.9", "--chats-dir", dir};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> NonEmptyLines(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    if (end > at) out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

TEST(ChatKeep, EveryTurnIsSavedAndResumeContinuesTheSameChat) {
  TempDir tmp;
  const std::string dir = tmp.File("chats");
  // The uninterrupted chat: three turns.
  const RunResult whole = RunWormchat(Chat(tmp.File("other"), {"--no-save"}),
                                      "What is a falcon?\nDefine harbor.\nAnd a hawk?\n/quit\n");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const std::vector<std::string> replies = NonEmptyLines(whole.out);
  ASSERT_EQ(replies.size(), 3u) << whole.out;
  EXPECT_TRUE(Files(tmp.File("other")).empty()) << "--no-save keeps nothing";
  // Two turns, kept.
  const RunResult first = RunWormchat(Chat(dir), "What is a falcon?\nDefine harbor.\n/quit\n");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::vector<std::string> files = Files(dir);
  ASSERT_EQ(files.size(), 1u);
  const std::string file = files[0];
  EXPECT_NE(file.find("_what-is-a-falcon.txt"), std::string::npos) << file;
  const std::string text = ReadFile(file);
  EXPECT_NE(text.find("\n# title: What is a falcon?\n"), std::string::npos) << text;
  EXPECT_NE(text.find("--- turn 2\n> Define harbor.\n"), std::string::npos) << text;
  const RunResult replay = RunWormchat({"transcript", "replay", file});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  // Resumed (the newest): shown as it was, then the third turn as the whole chat had it.
  const RunResult resumed = RunWormchat(Chat(dir, {"--resume"}), "And a hawk?\n/quit\n");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("(resumed " + file + ": 2 turns; re-prefilled "), std::string::npos)
      << resumed.err;
  const std::vector<std::string> shown = NonEmptyLines(resumed.out);
  ASSERT_EQ(shown.size(), 5u) << resumed.out;
  EXPECT_EQ(shown[0], "> What is a falcon?");
  EXPECT_EQ(shown[1], replies[0]);
  EXPECT_EQ(shown[3], replies[1]);
  EXPECT_EQ(shown[4], replies[2]) << "the resumed chat goes on as the uninterrupted one";
  EXPECT_EQ(Files(dir).size(), 1u) << "saved on in the same file";
  EXPECT_NE(ReadFile(file).find("--- turn 3\n> And a hawk?\n"), std::string::npos);
  EXPECT_EQ(RunWormchat({"transcript", "replay", file}).exit_code, 0);
  // By name (a prefix of it), and /undo rewrites the file.
  const std::string name = fs::path(file).stem().string();
  const RunResult undone =
      RunWormchat(Chat(dir, {"--resume", name.substr(0, 10)}), "/undo\n/quit\n");
  ASSERT_EQ(undone.exit_code, 0) << undone.err;
  EXPECT_EQ(ReadFile(file).find("--- turn 3"), std::string::npos) << ReadFile(file);
  EXPECT_EQ(RunWormchat({"transcript", "replay", file}).exit_code, 0);
}

// Two chats started in the same second with the same first message get two files.
TEST(ChatKeep, TwoChatsWithOneTitleInOneSecondKeepTwoFiles) {
  TempDir tmp;
  const std::string dir = tmp.File("chats");
  // Long enough that the file name's title is cut: the second must not take the first's name.
  const std::string message = "Tell me about the sea and the ships that sail on it at night.\n";
  for (int i = 0; i < 3; ++i) ASSERT_EQ(RunWormchat(Chat(dir), message + "/quit\n").exit_code, 0);
  EXPECT_EQ(Files(dir).size(), 3u);
}

TEST(ChatKeep, TitleChatsAndForget) {
  TempDir tmp;
  const std::string dir = tmp.File("chats");
  ASSERT_EQ(RunWormchat(Chat(dir), "Define harbor.\n/quit\n").exit_code, 0);
  const RunResult r =
      RunWormchat(Chat(dir), "What is a falcon?\n/title Birds of prey\n/chats\n/quit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(title: Birds of prey; saved as " + dir + "/"), std::string::npos) << r.out;
  const std::vector<std::string> lines = NonEmptyLines(r.out);
  ASSERT_GE(lines.size(), 4u) << r.out;
  EXPECT_EQ(lines[2].rfind("1. Birds of prey | default | 1 turn | ", 0), 0u) << lines[2];
  EXPECT_NE(lines[2].find("_birds-of-prey (this chat)"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3].rfind("2. Define harbor. | default | 1 turn | ", 0), 0u) << lines[3];
  EXPECT_EQ(Files(dir).size(), 2u) << "renamed, not copied";
  const RunResult forget = RunWormchat(Chat(dir, {"--resume", "bogus"}), "/quit\n");
  EXPECT_NE(forget.exit_code, 0);
  EXPECT_NE(forget.err.find("--resume bogus: no saved chat of that name in " + dir),
            std::string::npos)
      << forget.err;
  const RunResult f = RunWormchat(Chat(dir, {"--resume"}), "/forget\nAnd a hawk?\n/quit\n");
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_NE(f.out.find("(deleted " + dir + "/"), std::string::npos) << f.out;
  EXPECT_EQ(Files(dir).size(), 1u) << "forgotten, and the next turn not saved";
}

TEST(ChatKeep, AnotherModelOrAnUnwritableDirectoryIsSaidInOneLine) {
  TempDir tmp;
  const std::string dir = tmp.File("chats");
  ASSERT_EQ(RunWormchat(Chat(dir), "Define harbor.\n/quit\n").exit_code, 0);
  const std::string file = Files(dir).at(0);
  std::string text = ReadFile(file);
  const size_t at = text.find("fingerprint: ") + 13;
  text.replace(at, 4, "ffff");
  WriteFile(file, text);
  const RunResult other = RunWormchat(Chat(dir, {"--resume"}), "/quit\n");
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.err.find("--resume: " + file + " was saved with another model"),
            std::string::npos)
      << other.err;
  EXPECT_EQ(std::count(other.err.begin(), other.err.end(), '\n'), 1) << other.err;
  // A file where the directory should be: every turn says it was not saved; the chat goes on.
  WriteFile(tmp.File("plain-file"), "x");
  const RunResult r =
      RunWormchat(Chat(tmp.File("plain-file") + "/chats"), "Define harbor.\nAnd sail?\n/quit\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(NonEmptyLines(r.out).size(), 4u) << r.out;
  EXPECT_NE(r.out.find("(not saved: cannot create " + tmp.File("plain-file")), std::string::npos)
      << r.out;
  // --resume with --no-save is refused.
  const RunResult both = RunWormchat(Chat(dir, {"--resume", "--no-save"}), "/quit\n");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("--resume continues a saved chat"), std::string::npos) << both.err;
}

}  // namespace
}  // namespace wc::test
