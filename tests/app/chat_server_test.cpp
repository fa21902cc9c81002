// `wormchat chat --server URL` as a user runs it (issue 53): the full-screen chat in tmux and line
// mode against the real `wormchat serve`, their replies against the chat run in process, the
// flags that need the model here, a server that is not there or wants a key, kept chats resumed
// against the server they were kept from, and `transcript replay` refusing them.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/app/served_process.h"
#include "tests/app/tmux_chat.h"
#include "tests/test_util.h"

namespace wc::test {
namespace {

std::string WithoutTrailingNewlines(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

TEST(ChatServer, TheFullScreenChatStreamsFromWormchatServeAsInProcess) {
  Served s({});
  ASSERT_GT(s.port, 0) << ReadFile(s.dir.File("err"));
  TmuxChat chat(130, 30, {"--server", s.url(), "-n", "40"});
  chat.WaitForServerStart();
  std::vector<std::string> rows = chat.Rows();
  EXPECT_NE(rows[0].find("wormchat | default-model"), std::string::npos) << rows[0];
  // Before the first reply the server has sent nothing: the status bar says what it cannot show.
  EXPECT_NE(rows[28].find("not from this server"), std::string::npos) << rows[28];

  chat.Enter(kQuestion);
  chat.WaitForRow(28, kIdleWithSpeed);
  rows = chat.Rows();
  // wormchat serve's figures: the KV cache and the mesh estimate in the status bar, the rows in
  // the panel.
  EXPECT_NE(rows[28].find("kv "), std::string::npos) << rows[28];
  EXPECT_NE(rows[28].find("ttft "), std::string::npos) << rows[28];
  const std::string screen = chat.Screen();
  EXPECT_NE(screen.find("rows busy"), std::string::npos) << screen;
  const std::string reply = ReplyAfter(rows, std::string("> ") + kQuestion, 130 - 37);
  ASSERT_FALSE(reply.empty()) << screen;

  // The same reply as the chat in process gives (line mode's text, wrapped on screen).
  const RunResult local =
      RunWormchat({"chat", "--plain", "--seed", "7", "--threads", "1", "-n", "40"},
                  std::string(kQuestion) + "\n/quit\n");
  ASSERT_EQ(local.exit_code, 0) << local.err;
  std::string expected = WithoutTrailingNewlines(local.out);
  for (char& c : expected)
    if (c == '\n') c = ' ';
  EXPECT_EQ(reply, expected);

  // What needs the engine here says so; /set goes through the run options' declaration.
  chat.Enter("/beams 2");
  chat.WaitForText("not available from a server");
  chat.Enter("/set top-p 2");
  chat.WaitForText("top-p must be");
  chat.Enter("/stats");
  chat.WaitForText("reused from the server's prefix cache");
  EXPECT_EQ(chat.Quit(), 0);
}

TEST(ChatServer, CtrlCCancelsAStreamingReplyAndTheServerGoesOn) {
  Served s({});
  ASSERT_GT(s.port, 0) << ReadFile(s.dir.File("err"));
  std::vector<std::string> args = kLongReply;
  args.insert(args.end(), {"--server", s.url()});
  TmuxChat chat(80, 24, args);
  chat.WaitForServerStart();
  chat.Enter(kLongPrompt);
  chat.WaitForRow(22, R"(generating \| [0-9.]+ tok/s \|.* \| seed 7)");
  chat.Keys({"C-c"});
  chat.WaitForText("[cancelled]");
  chat.WaitForRow(22, R"(idle \|.*)");
  chat.Enter("/set max-tokens 5");
  chat.WaitForText("(max-tokens 5)");
  chat.Enter("Hello again.");
  chat.WaitFor("a second reply", [](const std::string& screen) {
    return screen.find("> Hello again.") != std::string::npos &&
           screen.find("idle |") != std::string::npos;
  });
  EXPECT_EQ(chat.Quit(), 0);
}

TEST(ChatServer, LineModeKeepsTheChatAndResumesItAgainstItsServer) {
  Served s({});
  ASSERT_GT(s.port, 0) << ReadFile(s.dir.File("err"));
  TempDir chats;
  const std::vector<std::string> base = {"chat", "--plain", "--seed",      "9",
                                         "-n",   "24",      "--chats-dir", chats.path()};
  // Two turns in one go, and the first of them alone, then resumed for the second.
  std::vector<std::string> both_args = base;
  both_args.insert(both_args.end(), {"--server", s.url(), "--no-save"});
  const RunResult both = RunWormchat(both_args, "Name a bird.\nName another.\n/quit\n");
  ASSERT_EQ(both.exit_code, 0) << both.err;
  std::vector<std::string> first_args = base;
  first_args.insert(first_args.end(), {"--server", s.url()});
  const RunResult first = RunWormchat(first_args, "Name a bird.\n/quit\n");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(both.out.rfind(first.out, 0), 0u) << both.out << "\n---\n" << first.out;

  // Resumed without --server: the kept chat names its server.
  std::vector<std::string> resume_args = base;
  resume_args.push_back("--resume");
  const RunResult second = RunWormchat(resume_args, "Name another.\n/quit\n");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("resumed"), std::string::npos) << second.err;
  // It shows the kept turn, then replies as the chat that never stopped did.
  ASSERT_GT(both.out.size(), first.out.size());
  const std::string later = both.out.substr(first.out.size());
  ASSERT_GE(second.out.size(), later.size());
  EXPECT_EQ(second.out.substr(second.out.size() - later.size()), later) << second.out << "\n---\n"
                                                                        << both.out;
  EXPECT_NE(second.out.find("> Name a bird."), std::string::npos) << second.out;

  // The kept file is a transcript with a server: replay refuses it, naming why.
  std::string file;
  for (const auto& e : std::filesystem::directory_iterator(chats.path())) file = e.path();
  ASSERT_FALSE(file.empty());
  const std::string text = ReadFile(file);
  EXPECT_NE(text.find("server: " + s.url()), std::string::npos) << text;
  EXPECT_EQ(text.find("ids:"), std::string::npos) << text;
  const RunResult replay = RunWormchat({"transcript", "replay", file});
  EXPECT_NE(replay.exit_code, 0);
  EXPECT_NE(replay.err.find("no token ids to replay"), std::string::npos) << replay.err;
}

TEST(ChatServer, BadServersKeysAndFlagsAreOneLineErrors) {
  Served s({"--api-key", "sesame"});
  ASSERT_GT(s.port, 0) << ReadFile(s.dir.File("err"));
  auto one_line_error = [](const RunResult& r, const std::string& part) {
    EXPECT_NE(r.exit_code, 0) << Describe(r);
    EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  one_line_error(RunWormchat({"chat", "--plain", "--server", s.url()}, "Hi\n"), "API key");
  one_line_error(
      RunWormchat({"chat", "--plain", "--server", s.url(), "--api-key", "wrong"}, "Hi\n"), "401");
  const RunResult ok = RunWormchat(
      {"chat", "--plain", "--no-save", "--server", s.url(), "--api-key", "sesame", "-n", "5"},
      "Hi\n/quit\n");
  EXPECT_EQ(ok.exit_code, 0) << Describe(ok);
  EXPECT_FALSE(ok.out.empty());
  one_line_error(RunWormchat({"chat", "--server", s.url(), "--kv-dtype", "int8"}),
                 "--kv-dtype chooses or runs the model in this process");
  one_line_error(RunWormchat({"chat", "--server", "ftp://127.0.0.1:1"}), "--server");
  one_line_error(RunWormchat({"chat", "--api-key", "k"}), "go with --server");
  Served gone({});
  const int dead = gone.port;
  gone.Stop();
  one_line_error(
      RunWormchat({"chat", "--plain", "--server", "http://127.0.0.1:" + std::to_string(dead)}),
      "cannot reach");
}

}  // namespace
}  // namespace wc::test
