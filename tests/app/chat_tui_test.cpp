// End-to-end tests of the full-screen chat in a real terminal (issue 14), driven through tmux
// (tests/app/tmux_chat.h).
#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/app/tmux_chat.h"
#include "tests/test_util.h"

namespace wc::test {
namespace {

TEST(ChatTui, ReplyAt80x24IsLineModesWithTheStatusBarAndNoPanel) {
  TmuxChat chat(80, 24, {"-n", "60"});
  chat.WaitForStart();
  std::vector<std::string> rows = chat.Rows();
  ASSERT_EQ(rows.size(), 24u);
  EXPECT_EQ(rows[0].rfind("wormchat | default-model | ", 0), 0u) << rows[0];
  EXPECT_TRUE(Contains(rows[1], "seed 7.")) << rows[1];
  EXPECT_TRUE(std::regex_match(rows[22], std::regex(R"(idle \| - tok/s \|.* \| seed 7)")))
      << rows[22];
  const std::string screen = chat.Screen();
  EXPECT_FALSE(Contains(screen, "Tensix")) << "no side panel at 80 columns:\n" << screen;
  EXPECT_FALSE(Contains(screen, "│")) << screen;

  chat.Type(kQuestion);
  chat.WaitForInput(kQuestion);
  chat.Keys({"Enter"});
  chat.WaitForInput("");
  chat.WaitForRow(22, kIdleWithSpeed);
  rows = chat.Rows();
  EXPECT_EQ(rows[23], ">");
  EXPECT_TRUE(Contains(rows[22], "ttft ")) << rows[22];
  const std::string reply = ReplyAfter(rows, std::string("> ") + kQuestion);
  EXPECT_FALSE(reply.empty()) << chat.Screen();

  // The same reply as line mode's: the screen shows the model's text, wrapped and nothing else.
  const RunResult plain =
      RunWormchat({"chat", "--plain", "--seed", "7", "--threads", "1", "-n", "60"},
                  std::string(kQuestion) + "\n/quit\n");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  std::string expected = plain.out;
  while (!expected.empty() && expected.back() == '\n') expected.pop_back();
  EXPECT_EQ(reply, expected);
}

TEST(ChatTui, LongReplyStreamsCtrlCCancelsItAndTheChatStaysUp) {
  TmuxChat chat(80, 24, kLongReply);
  chat.WaitForStart();
  chat.Enter(kLongPrompt);
  // Streaming: the status bar says so with a speed, and the reply grows while it does.
  chat.WaitForRow(22, R"(generating \| [0-9.]+ tok/s \|.* \| seed 7)");
  const std::string before = ReplyAfter(chat.Rows(), std::string("> ") + kLongPrompt);
  chat.WaitFor("the reply to grow while generating", [&](const std::string& s) {
    const std::vector<std::string> rows = Lines(s);
    const std::string now = ReplyAfter(rows, std::string("> ") + kLongPrompt);
    return now.size() > before.size() && now.rfind(before, 0) == 0 &&
           rows[22].rfind("generating", 0) == 0;
  });
  chat.Keys({"C-c"});
  std::string screen = chat.WaitForText("[cancelled]");
  chat.WaitForRow(22, kIdleWithSpeed);
  // Still up: commands work, and the reply stopped short of its 480 tokens.
  chat.Enter("/stats");
  screen = chat.WaitForText("last reply: ");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(screen, m, std::regex(R"(last reply: ([0-9]+) tokens)"))) << screen;
  EXPECT_LT(std::stoi(m[1]), 480);
  EXPECT_FALSE(Contains(screen, "press Ctrl-C again")) << "Ctrl-C during a reply only cancels it";
  chat.Type("/quit");
  chat.Keys({"Enter"});
  EXPECT_EQ(chat.WaitForExit(), 0);
}

TEST(ChatTui, TheContextCountRisesWhileAReplyStreams) {
  // The status bar's "ctx N/512" follows the prompt and each token as they enter the KV cache,
  // not only when the reply ends; after the reply it is /stats' figure.
  TmuxChat chat(160, 30, kLongReply);
  chat.WaitForText("/help lists the commands");  // the greeting wraps beside the panel
  chat.Enter(kLongPrompt);
  auto ctx_now = [](const std::string& screen, const char* state) {
    const std::vector<std::string> rows = Lines(screen);
    std::smatch m;
    if (rows.size() < 2 || rows[rows.size() - 2].rfind(state, 0) != 0) return -1;
    if (!std::regex_search(rows[rows.size() - 2], m, std::regex(R"(ctx ([0-9]+)/512)"))) return -1;
    return std::stoi(m[1]);
  };
  int first = -1;
  chat.WaitFor("a context count while generating", [&](const std::string& s) {
    first = ctx_now(s, "generating");
    return first > 0;
  });
  chat.WaitFor("the context count to rise while generating",
               [&](const std::string& s) { return ctx_now(s, "generating") > first; });
  chat.Keys({"C-c"});
  chat.WaitForText("[cancelled]");
  int idle = -1;
  chat.WaitFor("the idle status bar", [&](const std::string& s) {
    idle = ctx_now(s, "idle");
    return idle > first;
  });
  chat.Enter("/stats");
  chat.WaitForText("context: " + std::to_string(idle) + " of 512 tokens");
  chat.Type("/quit");
  chat.Keys({"Enter"});
  EXPECT_EQ(chat.WaitForExit(), 0);
}

// The prefix cache in the chat (issue 32). A conversation keeps its K/V in its row between turns,
// so a reply reuses cached tokens only when its row starts empty: the first turn after /reset that
// begins as an earlier conversation did. With blocks of 8 tokens, that turn's framed prompt of N
// tokens takes its full blocks within all but its last token: (N - 1) / 8 * 8 of them.
const char kSeaQuestion[] = "Tell me about the sea and the ships that sail on it.";
constexpr int kSmallBlock = 8;  // --kv-block-size

struct PromptFigures {
  int tokens = -1, reused = -1, prefilled = -1;
};

// Every "prompt: N tokens, R reused from the prefix cache, P prefilled" line of /stats, in order.
std::vector<PromptFigures> PromptLines(const std::string& text) {
  std::vector<PromptFigures> out;
  const std::regex re(R"(prompt: ([0-9]+) tokens?, ([0-9]+) reused from the prefix cache, )"
                      R"(([0-9]+) prefilled)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it)
    out.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), std::stoi((*it)[3])});
  return out;
}

// Every "prefix cache: ..." line of /stats, in order.
std::vector<std::string> PrefixCacheLines(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& l : Lines(text))
    if (l.rfind("prefix cache: ", 0) == 0) out.push_back(l);
  return out;
}

TEST(ChatPlain, StatsShowThePromptTokensTheLastReplyReusedAndTheCacheTotals) {
  const std::string input = std::string(kSeaQuestion) + "\n/stats\n/reset\n" + kSeaQuestion +
                            "\n/stats\nAnd the wind?\n/stats\n/quit\n";
  const std::vector<std::string> args = {
      "chat", "--plain", "--seed", "7", "--threads", "1", "-n", "8", "--kv-block-size", "8"};
  const RunResult on = RunWormchat(args, input);
  ASSERT_EQ(on.exit_code, 0) << on.err;
  const std::vector<PromptFigures> p = PromptLines(on.out);
  ASSERT_EQ(p.size(), 3u) << on.out;
  const int n = p[0].tokens;
  const int reused = (n - 1) / kSmallBlock * kSmallBlock;
  ASSERT_GT(reused, 0) << "the first message is too short to fill a block:\n" << on.out;
  // The first conversation: nothing cached yet, all prefilled.
  EXPECT_EQ(p[0].reused, 0) << on.out;
  EXPECT_EQ(p[0].prefilled, n) << on.out;
  // The same first message after /reset: its full blocks come from the cache.
  EXPECT_EQ(p[1].tokens, n) << on.out;
  EXPECT_EQ(p[1].reused, reused) << on.out;
  EXPECT_EQ(p[1].prefilled, n - reused) << on.out;
  // A later turn continues the row's K/V: nothing taken from the cache.
  EXPECT_GT(p[2].tokens, 0) << on.out;
  EXPECT_EQ(p[2].reused, 0) << on.out;
  EXPECT_EQ(p[2].prefilled, p[2].tokens) << on.out;
  const std::vector<std::string> c = PrefixCacheLines(on.out);
  ASSERT_EQ(c.size(), 3u) << on.out;
  const std::regex totals(R"(prefix cache: ([0-9]+) hits?, ([0-9]+) tokens? reused, 0 evictions, )"
                          R"(([0-9]+) blocks? held)");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(c[0], m, totals)) << c[0];
  EXPECT_EQ(m[1], "0");
  EXPECT_EQ(m[2], "0");
  EXPECT_GE(std::stoi(m[3]), n / kSmallBlock) << "the first prompt's full blocks are held";
  for (int i : {1, 2}) {
    ASSERT_TRUE(std::regex_match(c[i], m, totals)) << c[i];
    EXPECT_EQ(m[1], "1") << c[i];
    EXPECT_EQ(std::stoi(m[2]), reused) << c[i];
  }

  // --prefix-cache off: the same prompts, all prefilled, and /stats says the cache is off.
  std::vector<std::string> off_args = args;
  off_args.insert(off_args.end(), {"--prefix-cache", "off"});
  const RunResult off = RunWormchat(off_args, input);
  ASSERT_EQ(off.exit_code, 0) << off.err;
  const std::vector<PromptFigures> q = PromptLines(off.out);
  ASSERT_EQ(q.size(), 3u) << off.out;
  for (size_t i = 0; i < q.size(); ++i) {
    EXPECT_EQ(q[i].tokens, p[i].tokens) << off.out;
    EXPECT_EQ(q[i].reused, 0) << off.out;
    EXPECT_EQ(q[i].prefilled, q[i].tokens) << off.out;
  }
  for (const std::string& l : PrefixCacheLines(off.out))
    EXPECT_EQ(l, "prefix cache: off (--prefix-cache off)");
}

// --prefix-cache-dir in the chat: a second chat maps the first message's blocks in from the files
// the first wrote (its /stats says so); a damaged file is a notice under the reply - never a line
// written over the chat - and the block is computed again.
TEST(ChatPlain, APersistedPrefixCacheServesTheNextChatAndWarnsOfADamagedFile) {
  TempDir dir;
  const std::string cache = dir.File("cache");
  const std::string input = std::string(kSeaQuestion) + "\n/stats\n/quit\n";
  const std::vector<std::string> args = {
      "chat", "--plain", "--seed",          "7", "--threads",          "1",
      "-n",   "4",       "--kv-block-size", "8", "--prefix-cache-dir", cache};
  const RunResult first = RunWormchat(args, input);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const RunResult second = RunWormchat(args, input);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const std::vector<PromptFigures> p1 = PromptLines(first.out), p2 = PromptLines(second.out);
  ASSERT_EQ(p1.size(), 1u) << first.out;
  ASSERT_EQ(p2.size(), 1u) << second.out;
  EXPECT_EQ(p1[0].reused, 0) << first.out;
  EXPECT_EQ(p2[0].reused, (p2[0].tokens - 1) / kSmallBlock * kSmallBlock) << second.out;
  EXPECT_GT(p2[0].reused, 0) << second.out;
  EXPECT_NE(second.out.find(" mapped in, "), std::string::npos) << second.out;
  // Damage every stored block: the third chat warns once per file it tried, under its reply.
  for (const auto& e : std::filesystem::directory_iterator(cache))
    std::filesystem::resize_file(e.path(), 10);
  const RunResult third = RunWormchat(args, input);
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_NE(third.out.find("(prefix cache file " + cache + "/"), std::string::npos) << third.out;
  EXPECT_NE(third.out.find("ignored, its tokens are computed again)"), std::string::npos)
      << third.out;
  EXPECT_EQ(third.err.find("warning"), std::string::npos) << third.err;
  const std::vector<PromptFigures> p3 = PromptLines(third.out);
  ASSERT_EQ(p3.size(), 1u) << third.out;
  EXPECT_EQ(p3[0].reused, 0) << third.out;
}

// /retry, /retry same, /undo and /edit in line mode: /retry same repeats the reply, /retry gives
// another, /undo and /edit take the exchange out, and the saved transcript - the conversation as
// it stands - replays token for token.
TEST(ChatPlain, RetryUndoAndEditLeaveATranscriptThatReplays) {
  TempDir dir;
  const std::string saved = dir.File("t.txt");
  const std::string input =
      std::string("What is a falcon?\nDefine harbor.\n/retry same\n/retry\n") +
      "What is a river?\n/undo\n/edit\nWhat is patience?\n/undo\n/undo\n" +
      "/undo\n/retry\nTell me a saying.\n/save " + saved + "\n/quit\n";
  const RunResult r = RunWormchat(
      {"chat", "--plain", "--seed", "3", "--threads", "1", "-n", "10", "--temperature", "0.9"},
      input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> out = Lines(r.out);
  ASSERT_GE(out.size(), 12u) << r.out;
  EXPECT_EQ(out[2], out[1]) << "/retry same repeats the reply:\n" << r.out;
  EXPECT_NE(out[3], out[1]) << "/retry draws another:\n" << r.out;
  EXPECT_EQ(out[5], "(the last exchange is undone)") << r.out;
  EXPECT_EQ(out[6], "(the last exchange is undone; its message was: Define harbor.)") << r.out;
  EXPECT_EQ(out[8], "(the last exchange is undone)") << r.out;
  EXPECT_EQ(out[9], "(the last exchange is undone)") << r.out;
  EXPECT_EQ(out[10], "nothing to undo in this conversation") << r.out;
  EXPECT_EQ(out[11], "nothing to undo in this conversation") << r.out;  // /retry of nothing
  EXPECT_NE(r.out.find("(saved 1 turn to " + saved), std::string::npos) << r.out;
  const RunResult replay = RunWormchat({"transcript", "replay", saved});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  EXPECT_NE(replay.out.find("passed (1 turn; "), std::string::npos) << replay.out;
  // A retried reply's seed is the turn's: saved and replayed.
  const RunResult r2 = RunWormchat(
      {"chat", "--plain", "--seed", "3", "--threads", "1", "-n", "10", "--temperature", "0.9"},
      "What is a falcon?\n/retry\nAnd a hawk?\n/save " + saved + "2\n/quit\n");
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  // The retried first turn ran on the stream's next seed: the header's settings say which.
  const std::string text2 = ReadFile(saved + "2");
  EXPECT_EQ(text2.find("\nseed: 3\n"), std::string::npos) << text2;
  EXPECT_NE(text2.find("\nseed: "), std::string::npos) << text2;
  const RunResult replay2 = RunWormchat({"transcript", "replay", saved + "2"});
  EXPECT_EQ(replay2.exit_code, 0) << replay2.out << replay2.err;
}

// /undo erases the exchange from the screen, /edit puts its message back in the input line, /retry
// streams the new reply in place of the old one (and the status bar shows the new seed).
TEST(ChatTui, UndoErasesRetryReplacesAndEditRefillsTheInputLine) {
  TmuxChat chat(80, 24, {"-n", "8", "--temperature", "0.9"});
  chat.WaitForStart();
  const std::regex idle(R"(idle \| [0-9.]+ tok/s \|.* \| seed [0-9]+)");
  auto idle_with = [&](const std::string& screen, const std::function<bool()>& also) {
    const std::vector<std::string> rows = Lines(screen);
    return rows.size() > 22 && std::regex_match(rows[22], idle) && also();
  };
  // Rows above the status bar and input line.
  auto body = [](const std::string& screen) {
    std::vector<std::string> rows = Lines(screen);
    if (rows.size() > 22) rows.resize(22);
    std::string s;
    for (const std::string& r : rows) s += r + "\n";
    return s;
  };
  const std::string first = "What is a falcon?", second = "Define harbor.";
  chat.Enter(first);
  chat.WaitFor("the first reply", [&](const std::string& s) {
    return idle_with(s, [&] { return !ReplyAfter(Lines(s), "> " + first).empty(); });
  });
  chat.Enter(second);
  std::string screen = chat.WaitFor("the second reply", [&](const std::string& s) {
    return idle_with(s, [&] { return !ReplyAfter(Lines(s), "> " + second).empty(); });
  });
  // The status may say idle a frame before the reply's last text is drawn: read it once it holds
  // still.
  std::string reply = ReplyAfter(Lines(screen), "> " + second);
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string again = ReplyAfter(chat.Rows(), "> " + second);
    if (again == reply) break;
    reply = again;
  }
  // /retry: another reply under the same message, the message shown once.
  chat.Enter("/retry");
  screen = chat.WaitFor("the retried reply", [&](const std::string& s) {
    return idle_with(s, [&] {
      const std::string r = ReplyAfter(Lines(s), "> " + second);
      return !r.empty() && r != reply;
    });
  });
  const std::string shown = body(screen);
  EXPECT_EQ(std::count(shown.begin(), shown.end(), '>'), 2) << screen;
  EXPECT_FALSE(std::regex_search(Lines(screen)[22], std::regex(R"(\| seed 7$)")))
      << "the retried reply's seed is the conversation's now: " << Lines(screen)[22];
  // /undo: the exchange leaves the screen; the first stays.
  chat.Enter("/undo");
  screen = chat.WaitFor("the exchange erased",
                        [&](const std::string& s) { return !Contains(body(s), second); });
  EXPECT_TRUE(Contains(body(screen), "> " + first)) << screen;
  EXPECT_FALSE(Contains(body(screen), "undone")) << "no notice repeats it:\n" << screen;
  // /edit: the first message back in the input line, its exchange gone.
  chat.Type("/edit");  // not Enter(): the input line is not left empty
  chat.Keys({"Enter"});
  chat.WaitForInput(first);
  screen = chat.Screen();
  EXPECT_FALSE(Contains(body(screen), first)) << screen;
  // Cleared, Up brings it back from the history.
  chat.Keys({"C-u"});
  chat.WaitForInput("");
  chat.Keys({"Up"});
  chat.WaitForInput(first);
  chat.Keys({"Enter"});
  chat.WaitFor("the edited message's reply", [&](const std::string& s) {
    return idle_with(s, [&] { return !ReplyAfter(Lines(s), "> " + first).empty(); });
  });
  chat.Type("/quit");
  chat.Keys({"Enter"});
  EXPECT_EQ(chat.WaitForExit(), 0);
}

// A chat quit and resumed with --resume shows the conversation as it was and continues it; the
// file it is kept in replays token for token.
TEST(ChatTui, AQuitChatResumesAsItWasAndGoesOn) {
  TempDir chats;
  const std::string dir = chats.File("chats");
  const std::string first = "What is a falcon?", second = "Define harbor.";
  std::string reply;
  {
    TmuxChat chat(80, 24, {"-n", "8", "--chats-dir", dir});
    chat.WaitForStart();
    chat.Enter(first);
    const std::string s = chat.WaitForRow(22, kIdleWithSpeed);
    reply = ReplyAfter(Lines(s), "> " + first);
    ASSERT_FALSE(reply.empty()) << s;
    chat.Type("/quit");
    chat.Keys({"Enter"});
    EXPECT_EQ(chat.WaitForExit(), 0);
  }
  TmuxChat chat(80, 24, {"-n", "8", "--chats-dir", dir, "--resume"});
  std::string screen = chat.WaitForText("> " + first);
  EXPECT_EQ(ReplyAfter(Lines(screen), "> " + first), reply) << screen;
  chat.Enter(second);
  screen = chat.WaitFor("the resumed chat's next reply", [&](const std::string& s) {
    const std::vector<std::string> rows = Lines(s);
    return rows.size() > 22 && std::regex_match(rows[22], std::regex(kIdleWithSpeed)) &&
           !ReplyAfter(rows, "> " + second).empty();
  });
  chat.Type("/quit");
  chat.Keys({"Enter"});
  EXPECT_EQ(chat.WaitForExit(), 0);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(ReadFile(files[0]).find("--- turn 2\n> " + second), std::string::npos);
  const RunResult replay = RunWormchat({"transcript", "replay", files[0]});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
}

TEST(ChatTui, TheStatusBarShowsThePromptTokensAReplyReused) {
  TmuxChat chat(80, 24, {"-n", "8", "--kv-block-size", "8"});
  chat.WaitForStart();
  chat.Enter(kSeaQuestion);
  std::string row = Lines(chat.WaitForRow(22, kIdleWithSpeed))[22];
  EXPECT_FALSE(Contains(row, "reused")) << "nothing cached before the first reply: " << row;
  chat.Enter("/reset");
  chat.WaitForText("(new conversation)");
  chat.Enter(kSeaQuestion);
  // After the context, as wide figures give way at 80 columns.
  const std::string screen = chat.WaitForRow(
      22, R"(idle \| [0-9.]+ tok/s \|.* \| ctx [0-9]+/512 \| reused [0-9]+ \|.* seed 7)");
  row = Lines(screen)[22];
  std::smatch m;
  ASSERT_TRUE(std::regex_search(row, m, std::regex(R"(reused ([0-9]+))"))) << row;
  const int reused = std::stoi(m[1]);
  // The same figure as /stats', whole blocks of the prompt within all but its last token.
  chat.Enter("/stats");
  const std::vector<PromptFigures> p = PromptLines(chat.WaitForText("reused from the prefix"));
  ASSERT_EQ(p.size(), 1u) << chat.Screen();
  EXPECT_EQ(p[0].reused, reused);
  EXPECT_EQ(reused, (p[0].tokens - 1) / kSmallBlock * kSmallBlock);
  EXPECT_GT(reused, 0);
  // The next turn continues the row: the field goes.
  chat.Enter("And the wind?");
  const std::regex idle(kIdleWithSpeed);
  chat.WaitFor("the next reply's idle status without 'reused'", [&](const std::string& s) {
    const std::vector<std::string> rows = Lines(s);
    return rows.size() > 22 && std::regex_match(rows[22], idle) && !Contains(rows[22], "reused");
  });
  chat.Type("/quit");
  chat.Keys({"Enter"});
  EXPECT_EQ(chat.WaitForExit(), 0);
}

TEST(ChatTui, EditingKeysTabCompletionAndUnknownCommands) {
  TmuxChat chat(80, 24);
  chat.WaitForStart();
  chat.Type("wrld");
  chat.Keys({"Left", "Left", "Left"});
  chat.Type("o");
  chat.WaitForInput("world");
  chat.Keys({"C-a"});
  chat.Type("hello ");
  chat.WaitForInput("hello world");
  chat.Keys({"C-e"});
  chat.Type(" again!");
  chat.Keys({"BSpace"});
  chat.WaitForInput("hello world again");
  chat.Keys({"C-w"});
  chat.WaitForInput("hello world");
  chat.Keys({"Home", "Right", "DC"});
  chat.WaitForInput("hllo world");
  chat.Keys({"C-k"});
  chat.WaitForInput("h");
  chat.Keys({"C-u"});
  chat.WaitForInput("");

  chat.Type("/he");
  chat.Keys({"Tab"});
  chat.WaitForInput("/help");
  chat.Keys({"C-u"});
  chat.Type("/set te");
  chat.Keys({"Tab"});
  chat.WaitForInput("/set temperature");  // and a space after it
  chat.Enter("0.5");
  chat.WaitForText("(temperature 0.5)");
  chat.Type("/s");
  chat.Keys({"Tab"});
  chat.WaitForText("/set   /stats  /save");  // several: listed, the input kept
  chat.WaitForInput("/s");
  chat.Keys({"C-u"});

  chat.Enter("/foo");
  chat.WaitForText("unknown command /foo: /help lists them");
}

TEST(ChatTui, HistoryWalksAndPersistsAcrossSessions) {
  TempDir state;
  {
    TmuxChat chat(80, 24, {}, /*no_color=*/false, state.path());
    chat.WaitForStart();
    chat.Enter("/stats");
    chat.Enter("/help");
    chat.WaitForText("/quit, /bye");
    chat.Type("draft");
    chat.Keys({"Up"});
    chat.WaitForInput("/help");
    chat.Keys({"Up"});
    chat.WaitForInput("/stats");
    chat.Keys({"Up"});  // the oldest: stays
    chat.WaitForInput("/stats");
    chat.Keys({"Down"});
    chat.WaitForInput("/help");
    chat.Keys({"Down"});
    chat.WaitForInput("draft");
    chat.Keys({"C-u"});
    chat.Type("/bye");
    chat.Keys({"Enter"});
    EXPECT_EQ(chat.WaitForExit(), 0);
  }
  EXPECT_EQ(ReadFile(state.path() + "/wormchat/history"), "/stats\n/help\n/bye\n");
  TmuxChat again(80, 24, {}, /*no_color=*/false, state.path());
  again.WaitForStart();
  again.Keys({"Up"});
  again.WaitForInput("/bye");
  again.Keys({"Up"});
  again.WaitForInput("/help");
}

TEST(ChatTui, BracketedPasteOfSeveralLinesIsOneMessage) {
  TmuxChat chat(80, 24, {"-n", "20", "--temperature", "0"});
  chat.WaitForStart();
  chat.Paste("line one\nline two\nline three");
  // The input grows to three rows; nothing is sent yet.
  chat.WaitFor("the pasted lines in the input", [](const std::string& s) {
    const std::vector<std::string> rows = Lines(s);
    return rows.size() == 24 && rows[21] == "> line one" && rows[22] == "  line two" &&
           rows[23] == "  line three";
  });
  EXPECT_TRUE(chat.Rows()[20].rfind("idle | - tok/s", 0) == 0);
  chat.Keys({"Enter"});
  chat.WaitForInput("");
  chat.WaitForRow(22, kIdleWithSpeed);
  const std::vector<std::string> rows = chat.Rows();
  int users = 0, at = -1;
  for (int i = 0; i < static_cast<int>(rows.size()); ++i)
    if (rows[i].rfind("> ", 0) == 0 && i != 23) ++users, at = i;
  EXPECT_EQ(users, 1) << chat.Screen();
  ASSERT_GE(at, 0);
  EXPECT_EQ(rows[at], "> line one");
  EXPECT_EQ(rows[at + 1], "  line two");
  EXPECT_EQ(rows[at + 2], "  line three");
  EXPECT_FALSE(ReplyAfter(rows, "  line three").empty()) << chat.Screen();
  EXPECT_EQ(ReadFile(chat.state_dir() + "/wormchat/history"), "line one\\nline two\\nline three\n");
}

TEST(ChatTui, SidePanelAt120ColumnsF2TogglesItAndResizeRedraws) {
  TmuxChat chat(130, 32, {"-n", "60"});
  chat.WaitForStart();
  std::string screen = chat.WaitForText("Tensix 8x8: no attention yet");
  EXPECT_TRUE(Contains(screen, "│"));
  chat.Enter(kQuestion);
  chat.WaitForRow(30, kIdleWithSpeed);
  // The grid of the last attention step: a caption with the layer, rows 0-7 of cores.
  screen = chat.WaitFor("the core grid", [](const std::string& s) {
    return std::regex_search(s, std::regex(R"(│Tensix 8x8 .*layer [0-9]+)")) &&
           std::regex_search(s, std::regex(R"(│7 [·░▒▓█]{16})"));
  });
  EXPECT_TRUE(Contains(screen, "kv ")) << screen;
  const std::vector<std::string> wide = chat.Rows();
  std::vector<std::string> rows;

  // A line of the full text width ends left of the panel's separator: a word wider than the text
  // is broken at its edge, and no character is lost under the separator.
  std::string word;
  for (int i = 0; i < 99; ++i) word += static_cast<char>('a' + i % 26);
  chat.Enter("/" + word);
  screen = chat.WaitForText("unknown command /abc");
  rows = Lines(screen);
  std::string shown;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].rfind("  unknown command /", 0) == 0) {
      shown = rows[i].substr(0, rows[i].find("│")) + rows[i + 1].substr(0, rows[i + 1].find("│"));
      break;
    }
  shown.erase(std::remove(shown.begin(), shown.end(), ' '), shown.end());
  EXPECT_EQ(shown, "unknowncommand/" + word + ":/helpliststhem") << screen;

  chat.Keys({"F2"});
  chat.WaitFor("the panel to hide", [](const std::string& s) { return !Contains(s, "Tensix"); });
  chat.Keys({"F2"});
  chat.WaitForText("Tensix 8x8");

  // Narrower: the panel goes (no room), the text re-wraps, the status bar keeps its essentials.
  chat.Resize(80, 24);
  screen = chat.WaitFor("the redraw at 80x24", [](const std::string& s) {
    const std::vector<std::string> rows = Lines(s);
    return rows.size() == 24 && !Contains(s, "Tensix") &&
           std::regex_match(rows[22], std::regex(kIdleWithSpeed));
  });
  rows = Lines(screen);
  EXPECT_EQ(rows[0].rfind("wormchat | default-model", 0), 0u);
  EXPECT_EQ(ReplyAfter(rows, std::string("> ") + kQuestion),
            ReplyAfter(wide, std::string("> ") + kQuestion, 93))
      << "the same reply, re-wrapped";
  EXPECT_EQ(rows[23], ">");

  chat.Resize(130, 32);
  chat.WaitFor("the panel back at 130x32", [](const std::string& s) {
    return Lines(s).size() == 32 && Contains(s, "│Tensix 8x8");
  });
}

TEST(ChatTui, PageUpScrollsBackPageDownReturns) {
  TmuxChat chat(80, 24);
  chat.WaitForStart();
  for (int i = 0; i < 2; ++i) chat.Enter("/help");  // ~80 rows of scrollback, 21 on the screen
  std::string screen = chat.WaitForText("//text");
  EXPECT_FALSE(Contains(screen, "F2 shows the mesh.")) << "the greeting scrolled off:\n" << screen;
  chat.Keys({"PPage"});
  chat.WaitForRow(21, R"(-- [0-9]+ lines below \(PgDn, End\) --)");
  chat.Keys({"PPage", "PPage", "PPage", "PPage", "PPage", "PPage"});  // past the top
  screen = chat.WaitForText("F2 shows the mesh.");
  chat.Keys({"NPage", "NPage", "NPage", "NPage", "NPage", "NPage"});
  chat.WaitFor("the bottom again", [](const std::string& s) {
    return !Contains(s, "lines below") && !Contains(s, "F2 shows the mesh.");
  });
}

TEST(ChatTui, PanelFollowsTheWidthUntilToggled) {
  TmuxChat chat(80, 24);
  chat.WaitForStart();
  EXPECT_FALSE(Contains(chat.Screen(), "Tensix"));
  chat.Resize(130, 32);
  chat.WaitForText("│Tensix 8x8");  // now wide enough: shown, as at a start at 130 columns
  chat.Keys({"F2"});                // hidden by hand: stays hidden through resizes
  chat.WaitFor("the panel to hide", [](const std::string& s) { return !Contains(s, "Tensix"); });
  chat.Resize(140, 32);
  chat.WaitFor("the redraw at 140 columns",
               [](const std::string& s) { return Contains(s, "/help lists the commands, F2"); });
  EXPECT_FALSE(Contains(chat.Screen(), "Tensix"));
}

TEST(ChatTui, SaveWritesATranscriptThatReplays) {
  TmuxChat chat(80, 24, {"-n", "40"});
  chat.WaitForStart();
  chat.Enter(kQuestion);
  const std::string first = Lines(chat.WaitForRow(22, kIdleWithSpeed))[22];
  chat.Enter("Why?");
  // Idle again after the second reply: the first reply's idle status row (still shown until the
  // second request starts) does not count - the context has grown since.
  const std::regex idle(kIdleWithSpeed);
  chat.WaitFor("the second reply", [&](const std::string& screen) {
    const std::vector<std::string> rows = Lines(screen);
    return rows.size() > 22 && rows[22] != first && std::regex_match(rows[22], idle);
  });
  const std::string path = chat.dir().File("chat.transcript");
  chat.Enter("/save " + path);
  chat.WaitForText("(saved 2 turns to");
  chat.Type("/quit");
  chat.Keys({"Enter"});
  EXPECT_EQ(chat.WaitForExit(), 0);
  const RunResult r = RunWormchat({"transcript", "replay", path, "--threads", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "1 passed, 0 failed")) << r.out;
}

// SGR parameters that set a colour (foreground, background, bright, 256/true colour).
bool HasColour(const std::string& screen) {
  const std::regex sgr("\x1b\\[([0-9;]*)m");
  for (auto it = std::sregex_iterator(screen.begin(), screen.end(), sgr);
       it != std::sregex_iterator(); ++it) {
    std::istringstream params((*it)[1].str());
    for (std::string p; std::getline(params, p, ';');) {
      const int v = p.empty() ? 0 : std::stoi(p);
      if ((v >= 30 && v <= 38) || (v >= 40 && v <= 48) || (v >= 90 && v <= 97) ||
          (v >= 100 && v <= 107))
        return true;
    }
  }
  return false;
}

TEST(ChatTui, ColoursUnlessNoColor) {
  TmuxChat colour(80, 24);
  TmuxChat plain(80, 24, {}, /*no_color=*/true);
  colour.WaitForStart();
  plain.WaitForStart();
  EXPECT_TRUE(HasColour(colour.Screen(true))) << colour.Screen(true);
  const std::string screen = plain.Screen(true);
  EXPECT_FALSE(HasColour(screen)) << screen;
  EXPECT_TRUE(Contains(screen, "\x1b[7m")) << "the bars in reverse video instead:\n" << screen;
}

// Every way out: exit status 0 and the terminal as it was - the normal screen with what was on it,
// the same stty settings (echo on), keypad mode and bracketed paste off.
// ---- Line mode (--plain) on a terminal ----

TEST(ChatPlainOnATerminal, ALongLineArrivesWholeEditingKeysWorkAndCtrlDRestoresTheTerminal) {
  TmuxChat chat(80, 24, {"--plain"});
  chat.WaitForText("/help lists the commands.");
  // 6,000 bytes on one line, where the kernel's canonical mode would keep 4,095: the chat must
  // count the tokens of all of it, as it does when the line comes through a pipe.
  std::string words;
  for (int i = 0; words.size() < 6000; ++i) words += "w" + std::to_string(i) + " ";
  words.pop_back();
  const RunResult piped =
      RunWormchat({"chat", "--plain", "--seed", "7", "--threads", "1"}, words + "\n/quit\n");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(piped.out, m, std::regex("the message is [0-9]+ tokens")))
      << piped.out;
  chat.Type(words);
  chat.Keys({"Enter"});
  chat.WaitForText(m.str(0));

  chat.Type("/helx");  // Backspace
  chat.Keys({"BSpace"});
  chat.Type("p");
  chat.Keys({"Enter"});
  chat.WaitForText("mouse wheel");  // the help's last line
  chat.Type("garbage");             // Ctrl-U
  chat.Keys({"C-u"});
  chat.Type("/stats");
  chat.Keys({"Enter"});
  chat.WaitForText("context: 0 of 512 tokens");

  chat.Keys({"C-d"});
  ASSERT_EQ(chat.WaitForExit(), 0);
  const std::string before = ReadFile(chat.dir().File("stty.before"));
  EXPECT_FALSE(before.empty());
  EXPECT_EQ(ReadFile(chat.dir().File("stty.after")), before);
}

TEST(ChatPlainOnATerminal, CtrlCAtThePromptEndsTheChatWithTheTerminalRestored) {
  TmuxChat chat(80, 24, {"--plain"});
  chat.WaitForText("/help lists the commands.");
  chat.Type("half a line");
  chat.Keys({"C-c"});
  EXPECT_EQ(chat.WaitForExit(), 128 + SIGINT);
  EXPECT_EQ(ReadFile(chat.dir().File("stty.after")), ReadFile(chat.dir().File("stty.before")));
}

struct WayOut {
  const char* name;
  std::function<void(TmuxChat&)> leave;
};

void PrintTo(const WayOut& w, std::ostream* os) {
  *os << w.name;
}

class ChatTuiExit : public testing::TestWithParam<WayOut> {};

TEST_P(ChatTuiExit, LeavesTheTerminalAsItWas) {
  TmuxChat chat(80, 24, kLongReply);
  chat.WaitForStart();
  EXPECT_EQ(chat.Format("#{alternate_on}"), "1");
  GetParam().leave(chat);
  ASSERT_EQ(chat.WaitForExit(), 0);
  const std::string screen = chat.WaitForText("AFTER-CHAT");
  const std::vector<std::string> rows = Lines(screen);
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[0], "BEFORE-CHAT") << screen;
  EXPECT_EQ(rows[1], "AFTER-CHAT") << screen;
  EXPECT_FALSE(Contains(screen, "wormchat |")) << screen;
  EXPECT_EQ(chat.Format("#{alternate_on} #{keypad_cursor_flag} #{keypad_flag}"), "0 0 0");
  const std::string before = ReadFile(chat.dir().File("stty.before"));
  EXPECT_FALSE(before.empty());
  EXPECT_EQ(ReadFile(chat.dir().File("stty.after")), before);
  // The shell reads a pasted line as it is: no bracketed-paste markers around it.
  chat.Paste("probe\n");
  const auto deadline = Clock::now() + std::chrono::duration<double>(kTimeoutS);
  while (!std::filesystem::exists(chat.dir().File("pasted")) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the write after the create
  EXPECT_EQ(ReadFile(chat.dir().File("pasted")), "probe");
}

void Command(TmuxChat& chat, const char* command) {
  chat.Type(command);
  chat.Keys({"Enter"});
}

// While a reply streams: the loop's thread is busy when the signal comes.
void DuringAReply(TmuxChat& chat, const std::function<void(TmuxChat&)>& leave) {
  chat.Enter(kLongPrompt);
  chat.WaitForRow(22, R"(generating \|.*)");
  leave(chat);
}

INSTANTIATE_TEST_SUITE_P(
    WaysOut, ChatTuiExit,
    testing::Values(
        WayOut{"Quit", [](TmuxChat& c) { Command(c, "/quit"); }},
        WayOut{"Bye", [](TmuxChat& c) { Command(c, "/bye"); }},
        WayOut{"CtrlDOnAnEmptyLine", [](TmuxChat& c) { c.Keys({"C-d"}); }},
        WayOut{"CtrlCTwice",
               [](TmuxChat& c) {
                 c.Keys({"C-c"});
                 c.WaitForText("press Ctrl-C again or Ctrl-D to quit");
                 c.Keys({"C-c"});
               }},
        WayOut{"Sigterm", [](TmuxChat& c) { c.Signal(SIGTERM); }},
        WayOut{"QuitDuringAReply",
               [](TmuxChat& c) { DuringAReply(c, [](TmuxChat& c) { Command(c, "/quit"); }); }},
        WayOut{"SigtermDuringAReply",
               [](TmuxChat& c) { DuringAReply(c, [](TmuxChat& c) { c.Signal(SIGTERM); }); }},
        WayOut{"Sighup", [](TmuxChat& c) { c.Signal(SIGHUP); }}),
    [](const testing::TestParamInfo<WayOut>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace wc::test
