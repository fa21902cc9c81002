// The full-screen chat's second pass (issue 33), in a real terminal through tmux
// (tests/app/tmux_chat.h): markdown replies rendered as they are shown, /find and Ctrl-F,
// Ctrl-R, the mouse wheel, /open, /copy (OSC 52, read from the pane's raw output), /export and
// Tab completing file names after /export and /load.
//
// A reply with markdown in it comes from a saved chat whose reply is scripted: a chat is kept
// (line mode), its reply replaced by kScripted and that text's token ids, and resumed. The screen
// shows a resumed chat's replies as they were, rendered as any reply is.
#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/app/tmux_chat.h"
#include "tests/test_util.h"

namespace wc::test {
namespace {

const char kAsk[] = "Show me a greeting in Python.";
const char kScripted[] =
    "# Greeting\n"
    "\n"
    "Here is **bold**, *italic* and `inline code`.\n"
    "\n"
    "- first item of a list that is long enough to wrap onto a second line at eighty columns\n"
    "- second\n"
    "  - nested\n"
    "1. one\n"
    "2. two\n"
    "\n"
    "```python\n"
    "def greet(name):\n"
    "    return \"hello \" + name  # says hello\n"
    "```\n"
    "\n"
    "| a | b |\n"
    "|---|---|\n"
    "| 1 | 2 |";

// A chat kept in `chats_dir` whose one reply is `reply`: a real chat's file (line mode) with its
// reply's text and ids replaced.
std::string ScriptedChat(const std::string& chats_dir, const std::string& reply,
                         const std::string& ask = kAsk) {
  const RunResult made = RunWormchat(
      {"chat", "--plain", "--seed", "7", "-n", "4", "--chats-dir", chats_dir}, ask + "\n");
  EXPECT_EQ(made.exit_code, 0) << made.err;
  std::string path;
  for (const auto& e : std::filesystem::directory_iterator(chats_dir)) path = e.path();
  const RunResult ids = RunWormchat({"tokenize", "--text", reply});
  EXPECT_EQ(ids.exit_code, 0) << ids.err;
  std::string id_line = ids.out;
  while (!id_line.empty() && id_line.back() == '\n') id_line.pop_back();
  const std::string text = ReadFile(path);
  std::string out;
  bool replaced = false;
  for (const std::string& line : Lines(text)) {
    if (line.rfind("< ", 0) == 0 || line == "<") {
      if (replaced) continue;
      replaced = true;
      size_t at = 0;
      for (size_t nl; (nl = reply.find('\n', at)) != std::string::npos; at = nl + 1)
        out += (nl == at ? "<" : "< " + reply.substr(at, nl - at)) + "\n";
      out += (at == reply.size() ? "<" : "< " + reply.substr(at)) + "\n";
    } else if (line.rfind("ids: ", 0) == 0) {
      out += "ids: " + id_line + " 2\n";
    } else if (line.rfind("end: ", 0) == 0) {
      out += "end: eos\n";
    } else {
      out += line + "\n";
    }
  }
  WriteFile(path, out);
  return path;
}

// RFC 4648 base64, for the OSC 52 payloads the tests expect.
std::string Base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], k[v & 63]};
  }
  if (i + 1 == in.size()) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += {k[v >> 18], k[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const unsigned v =
        (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], '='};
  }
  return out;
}

int RowOf(const std::vector<std::string>& rows, const std::string& part) {
  for (size_t i = 0; i < rows.size(); ++i)
    if (Contains(rows[i], part)) return static_cast<int>(i);
  return -1;
}

}  // namespace

// /find highlights the matches and jumps to the latest; n and N walk them (wrapping), Esc leaves;
// Ctrl-F opens the same search and takes the text as it is typed.
TEST(ChatTuiFind, FindHighlightsWalksAndLeaves) {
  TempDir chats;
  ScriptedChat(chats.File("chats"), kScripted);
  TmuxChat chat(80, 40, {"--chats-dir", chats.File("chats"), "--resume"});
  chat.WaitForText("Greeting");
  chat.Type("/find greet");
  chat.Keys({"Enter"});
  // "greeting" in the question, "Greeting" (the heading: any case, the query has no capital) and
  // "greet(" in the code.
  std::string s = chat.WaitForRow(-1, R"(find 'greet': 3 of 3 - n older, N newer, Esc leaves)");
  std::string raw = chat.Screen(/*escapes=*/true);
  EXPECT_TRUE(Contains(raw, "42m")) << "the current match is not highlighted:\n" << raw;
  EXPECT_TRUE(Contains(raw, "43m")) << "the other matches are not highlighted:\n" << raw;
  chat.Keys({"n"});
  chat.WaitForRow(-1, R"(find 'greet': 2 of 3 - n older, N newer, Esc leaves)");
  chat.Keys({"C-f"});
  chat.WaitForRow(-1, R"(find 'greet': 1 of 3 - n older, N newer, Esc leaves)");
  chat.Keys({"n"});
  chat.WaitForRow(-1, R"(find 'greet': 3 of 3 \(wrapped\) - n older, N newer, Esc leaves)");
  chat.Keys({"N"});
  chat.WaitForRow(-1, R"(find 'greet': 1 of 3 \(wrapped\) - n older, N newer, Esc leaves)");
  chat.Keys({"C-g"});
  chat.WaitForRow(-1, R"(find 'greet': 2 of 3 - n older, N newer, Esc leaves)");
  chat.Keys({"Escape"});
  chat.WaitForInput("");
  // Smart case: a capital letter matches case for case.
  chat.Type("/find Greet");
  chat.Keys({"Enter"});
  chat.WaitForRow(-1, R"(find 'Greet': 1 of 1 - n older, N newer, Esc leaves)");
  chat.Keys({"Escape"});
  chat.WaitForInput("");
  // Ctrl-F: typed incrementally; Enter walks; any other key goes back to the input line.
  chat.Keys({"C-f"});
  chat.WaitForRow(-1, "find: ?");
  chat.Type("hello");
  chat.WaitForRow(-1, R"(find: hello  \(2 found; Enter walks them\))");
  chat.Keys({"Enter"});
  chat.WaitForRow(-1, R"(find 'hello': 2 of 2 - n older, N newer, Esc leaves)");
  chat.Type("x");
  chat.WaitForInput("x");
  chat.Keys({"C-u"});
  chat.Type("/find nowhere-to-be-found");
  chat.Keys({"Enter"});
  chat.WaitForRow(-1, R"(find 'nowhere-to-be-found': no match \(Esc leaves\))");
  chat.Keys({"Escape"});
  chat.WaitForInput("");
  EXPECT_EQ(chat.Quit(), 0);
}

// /find jumps to a match scrolled out of sight; End (on an empty input) goes back down.
TEST(ChatTuiFind, FindScrollsToAMatchOffScreen) {
  TempDir chats;
  ScriptedChat(chats.File("chats"), kScripted);
  TmuxChat chat(80, 14, {"--chats-dir", chats.File("chats"), "--resume"});
  std::string s = chat.WaitForText("| 1 | 2 |");  // the bottom of the reply
  EXPECT_FALSE(Contains(s, "Greeting")) << s;
  chat.Type("/find Greeting");
  chat.Keys({"Enter"});
  s = chat.WaitForText("lines below (PgDn, End)");
  EXPECT_TRUE(Contains(s, "Greeting")) << s;
  chat.Keys({"Escape"});
  chat.WaitForInput("");
  chat.Keys({"End"});
  s = chat.WaitForText("| 1 | 2 |");
  EXPECT_FALSE(Contains(s, "lines below")) << s;
  EXPECT_EQ(chat.Quit(), 0);
}

// Ctrl-R finds an earlier input as readline does; Enter sends it, Ctrl-G gives the line back.
TEST(ChatTuiFind, CtrlRSearchesTheInputHistory) {
  TmuxChat chat(80, 24, {"-n", "4"});
  chat.WaitForStart();
  chat.Enter("/set top-k 7");
  chat.Enter("/set top-p 0.8");
  chat.Enter("/stats");
  chat.Type("draft");
  chat.Keys({"C-r"});
  chat.Type("top");
  chat.WaitForRow(-1, R"(\(reverse-i-search\)`top': /set top-p 0\.8)");
  chat.Keys({"C-r"});
  chat.WaitForRow(-1, R"(\(reverse-i-search\)`top': /set top-k 7)");
  chat.Keys({"C-r"});  // nothing older: the match stays, the search says it failed
  chat.WaitForRow(-1, R"(\(failed reverse-i-search\)`top': /set top-k 7)");
  chat.Keys({"C-g"});
  chat.WaitForInput("draft");
  chat.Keys({"C-u", "C-r"});
  chat.Type("k 7");
  chat.WaitForRow(-1, R"(\(reverse-i-search\)`k 7': /set top-k 7)");
  chat.Keys({"Escape"});  // into the line, to edit
  chat.WaitForInput("/set top-k 7");
  chat.Keys({"BSpace"});
  chat.Type("9");
  chat.Keys({"C-a", "C-r"});
  chat.Type("stats");
  chat.Keys({"Enter"});  // sends it
  chat.WaitForText("context:");
  EXPECT_EQ(chat.Quit(), 0);
}

// /open N switches to a saved chat: the screen shows it as it was, its re-prefill runs, and the
// next reply continues it in its own file, which replays.
TEST(ChatTuiOpen, OpenSwitchesToASavedChatAndGoesOnInItsFile) {
  TempDir chats;
  const std::string dir = chats.File("chats");
  const RunResult a = RunWormchat({"chat", "--plain", "--seed", "7", "-n", "4", "--chats-dir", dir},
                                  "What is a falcon?\n");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  std::string file_a;
  for (const auto& e : std::filesystem::directory_iterator(dir)) file_a = e.path();
  TmuxChat chat(80, 24, {"-n", "4", "--chats-dir", dir});
  chat.WaitForStart();
  chat.Enter("Define harbor.");
  chat.WaitForRow(22, kIdleWithSpeed);
  chat.Enter("/chats");
  std::string s = chat.WaitForText("2. What is a falcon?");
  EXPECT_TRUE(Contains(s, "1. Define harbor. |")) << s;
  EXPECT_TRUE(Contains(s, "(this chat)")) << s;
  chat.Enter("/open 3");
  chat.WaitForText("/open: N must be 1-2 (/chats lists them)");
  chat.Enter("/open 1");
  chat.WaitForText("is this chat)");
  chat.Enter("/open 2");
  const std::string name_a = std::filesystem::path(file_a).stem();
  s = chat.WaitForText("(opened " + name_a + ": 1 turn; re-prefilled");
  EXPECT_TRUE(Contains(s, "> What is a falcon?")) << s;
  EXPECT_FALSE(Contains(s, "Define harbor.")) << s;
  chat.Enter("And the wind?");
  chat.WaitFor("the opened chat's next reply", [&](const std::string& screen) {
    const std::vector<std::string> rows = Lines(screen);
    return rows.size() > 22 && std::regex_match(rows[22], std::regex(kIdleWithSpeed)) &&
           !ReplyAfter(rows, "> And the wind?").empty();
  });
  EXPECT_EQ(chat.Quit(), 0);
  const std::string kept = ReadFile(file_a);
  EXPECT_TRUE(Contains(kept, "--- turn 2\n> And the wind?")) << kept;
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ++files;
    if (e.path() != file_a) {
      EXPECT_FALSE(Contains(ReadFile(e.path()), "--- turn 2")) << e.path();
    }
  }
  EXPECT_EQ(files, 2);
  const RunResult replay = RunWormchat({"transcript", "replay", file_a});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
}

// /copy sends the last reply, /copy code N its N-th code block, as one plain OSC 52 sequence
// (never wrapped for tmux) that the pane's raw output holds; the status says what was sent.
TEST(ChatTuiCopy, CopyEmitsOsc52WithTheReplyOrItsCodeBlock) {
  TempDir chats;
  ScriptedChat(chats.File("chats"), kScripted);
  TmuxChat chat(80, 30, {"--chats-dir", chats.File("chats"), "--resume"});
  chat.WaitForText("Greeting");
  const std::string raw = chat.dir().File("raw");
  chat.Tmux({"pipe-pane", "-o", "cat >> " + raw});
  chat.Enter("/copy code 1");
  chat.WaitForText("to the clipboard");
  // The status bar says what was sent until the next key.
  chat.WaitForRow(28,
                  R"(idle \| - tok/s \| copied code block 1 \(python\) \(57 bytes\) by OSC 52.*)");
  chat.Enter("/copy");
  chat.WaitFor("two OSC 52 sequences in the pane's output", [&](const std::string&) {
    const std::string out = ReadFile(raw);
    size_t n = 0;
    for (size_t at = out.find("\x1b]52;c;"); at != std::string::npos;
         at = out.find("\x1b]52;c;", at + 1))
      ++n;
    return n >= 2;
  });
  chat.Enter("/copy code 2");
  chat.WaitForText("code block");
  chat.Tmux({"pipe-pane"});
  const std::string out = ReadFile(raw);
  const std::string code = "def greet(name):\n    return \"hello \" + name  # says hello";
  EXPECT_TRUE(Contains(out, "\x1b]52;c;" + Base64(code) + "\x07")) << out;
  EXPECT_TRUE(Contains(out, "\x1b]52;c;" + Base64(kScripted) + "\x07")) << out;
  EXPECT_FALSE(Contains(out, "\x1bPtmux;")) << "wrapped in tmux's passthrough";
  EXPECT_EQ(chat.Quit(), 0);
}

// /export FILE.md and FILE.json write the conversation; an existing file is refused unless
// /export! is used.
TEST(ChatTuiExport, ExportWritesMarkdownAndJsonAndRefusesAnExistingFile) {
  TempDir chats;
  ScriptedChat(chats.File("chats"), kScripted);
  TmuxChat chat(80, 30, {"--chats-dir", chats.File("chats"), "--resume"});
  chat.WaitForText("Greeting");
  chat.Enter("/export chat.md");
  chat.WaitForText("exported 1 turn");
  chat.Enter("/export chat.json");
  chat.WaitFor("the JSON export", [&](const std::string& screen) {
    return Lines(screen).size() > 0 && Contains(screen, "chat.json");
  });
  chat.Enter("/export chat.md");
  chat.WaitForText("/export! chat.md");
  chat.Enter("/export! chat.md");
  EXPECT_EQ(chat.Quit(), 0);
  const std::string md = ReadFile(chat.dir().File("chat.md"));
  EXPECT_TRUE(Contains(md, kAsk)) << md;
  EXPECT_TRUE(Contains(md, kScripted)) << md;
  const std::string json = ReadFile(chat.dir().File("chat.json"));
  EXPECT_TRUE(Contains(json, "\"messages\"")) << json;
  EXPECT_TRUE(Contains(json, "\"role\": \"assistant\"") || Contains(json, "\"role\":\"assistant\""))
      << json;
}

// Tab completes file names (of the chat's working directory) after /export and /load as readline
// does: the common prefix first, then, on a second Tab, the candidates listed with the input kept;
// one candidate is completed whole, a directory with its slash.
TEST(ChatTuiComplete, TabCompletesFileNamesAfterExportAndLoad) {
  TmuxChat chat(100, 24, {"-n", "4"});
  WriteFile(chat.dir().File("notes-2026.md"), "# notes\n");
  WriteFile(chat.dir().File("notes-old.json"), "{}\n");
  std::filesystem::create_directory(chat.dir().File("sub"));
  WriteFile(chat.dir().File("sub/saved.txt"), "");
  chat.WaitForStart();
  chat.Type("/export no");
  chat.WaitForInput("/export no");
  chat.Keys({"Tab"});
  chat.WaitForInput("/export notes-");
  chat.Keys({"Tab"});
  const std::string listed = "  /export notes-2026.md  /export notes-old.json";
  chat.WaitFor("the row '" + listed + "'", [&](const std::string& screen) {
    const std::vector<std::string> rows = Lines(screen);
    return std::find(rows.begin(), rows.end(), listed) != rows.end();
  });
  chat.WaitForInput("/export notes-");
  chat.Type("o");
  chat.Keys({"Tab"});
  chat.WaitForInput("/export notes-old.json");
  chat.Keys({"C-u"});
  chat.Type("/load su");
  chat.Keys({"Tab"});
  chat.WaitForInput("/load sub/");
  chat.Keys({"Tab"});
  chat.WaitForInput("/load sub/saved.txt");
  chat.Keys({"C-u"});
  EXPECT_EQ(chat.Quit(), 0);
}

// The mouse wheel scrolls the conversation (ncurses mouse events; the terminal's selection then
// takes Shift); --no-mouse leaves the mouse to the terminal.
TEST(ChatTuiMouse, TheWheelScrollsAndNoMouseLeavesTheMouseAlone) {
  TempDir chats;
  ScriptedChat(chats.File("chats"), kScripted);
  {
    TmuxChat chat(80, 14, {"--chats-dir", chats.File("chats"), "--resume"});
    chat.WaitForText("| 1 | 2 |");
    EXPECT_EQ(chat.Format("#{mouse_standard_flag}#{mouse_button_flag}#{mouse_any_flag}") == "000",
              false)
        << "the chat did not ask for mouse events";
    const std::string wheel_up = "\x1b[M`!!", wheel_down = "\x1b[Ma!!";  // X10: buttons 4, 5
    chat.Type(wheel_up);
    chat.Type(wheel_up);
    chat.WaitForText("-- 6 lines below (PgDn, End) --");
    chat.Type(wheel_down);
    chat.WaitForText("-- 3 lines below (PgDn, End) --");
    chat.Type(wheel_down);
    std::string s = chat.WaitForText("| 1 | 2 |");
    EXPECT_FALSE(Contains(s, "lines below")) << s;
    EXPECT_EQ(chat.Quit(), 0);
  }
  TmuxChat chat(80, 14, {"--chats-dir", chats.File("chats"), "--resume", "--no-mouse"});
  chat.WaitForText("| 1 | 2 |");
  EXPECT_EQ(chat.Format("#{mouse_standard_flag}#{mouse_button_flag}#{mouse_any_flag}"), "000");
  EXPECT_EQ(chat.Quit(), 0);
}

// The rows of a rendered kScripted reply at a text width of `w` columns (each after the two-column
// indent of the scrollback).
std::vector<std::string> RenderedRows(int w) {
  auto rule = [](int n) {
    std::string r;
    for (int i = 0; i < n; ++i) r += "─";
    return r;
  };
  auto row = [&](const std::string& code) {
    return "  │ " + code + std::string(w - 4 - code.size(), ' ') + " │";
  };
  return {"  # Greeting",
          "",
          "  Here is bold, italic and inline code.",
          "",
          w >= 90 ? "  • first item of a list that is long enough to wrap onto a second line at "
                    "eighty columns"
                  : "  • first item of a list that is long enough to wrap onto a second line at",
          w >= 90 ? "  • second" : "    eighty columns",
          w >= 90 ? "    • nested" : "  • second",
          w >= 90 ? "  1. one" : "    • nested",
          w >= 90 ? "  2. two" : "  1. one",
          w >= 90 ? "" : "  2. two",
          w >= 90 ? "  ╭─ python " + rule(w - 11) + "╮" : "",
          w >= 90 ? row("def greet(name):") : "  ╭─ python " + rule(w - 11) + "╮"};
}

// Markdown as a user sees it: at 80 and 130 columns (the side panel then takes its share), with
// colours and with NO_COLOR (the same structure, no colour), and as the raw text after
// /set render plain.
TEST(ChatTuiRender, AScriptedReplyIsRenderedAt80And130ColumnsAndWithNoColor) {
  TempDir chats;
  ScriptedChat(chats.File("chats"), kScripted);
  struct Case {
    int width;
    bool no_color;
  };
  for (const Case c : {Case{80, false}, Case{130, false}, Case{80, true}}) {
    SCOPED_TRACE(testing::Message() << c.width << " columns" << (c.no_color ? ", NO_COLOR" : ""));
    TmuxChat chat(c.width, 40, {"--chats-dir", chats.File("chats"), "--resume"}, c.no_color);
    const std::string screen = chat.WaitForText("| 1 | 2 |");
    const std::vector<std::string> rows = Lines(screen);
    const int text_w = c.width >= 120 ? c.width - 2 - 37 : c.width - 2;
    const int top = RowOf(rows, "# Greeting");
    ASSERT_GE(top, 0) << screen;
    const std::vector<std::string> want = RenderedRows(text_w);
    for (size_t i = 0; i < want.size(); ++i) {
      // Left of the side panel's separator (the last column rule on the row).
      std::string row = rows[top + i];
      if (c.width >= 120) row = row.substr(0, row.rfind("│"));
      EXPECT_EQ(TmuxChat::TrimRight(row), want[i]) << "row " << top + i << " of\n" << screen;
    }
    const int code = RowOf(rows, "def greet(name):");
    ASSERT_GT(code, 0) << screen;
    EXPECT_NE(rows[code].find("│ def greet(name):"), std::string::npos) << screen;
    EXPECT_NE(rows[code + 1].find("│     return \"hello \" + name  # says hello"),
              std::string::npos)
        << screen;
    EXPECT_NE(rows[code + 2].find("╰─"), std::string::npos) << screen;
    EXPECT_GE(RowOf(rows, "  | a | b |"), 0) << screen;
    EXPECT_GE(RowOf(rows, "  |---|---|"), 0) << screen;
    const std::string raw = chat.Screen(/*escapes=*/true);
    EXPECT_TRUE(Contains(raw, "\x1b[1mbold")) << raw;  // **bold**
    EXPECT_TRUE(Contains(raw, "\x1b[3mitalic")) << raw;
    const std::regex colour("\x1b\\[[0-9;]*3[0-7]m");
    if (c.no_color) {
      EXPECT_FALSE(std::regex_search(raw, colour)) << raw;
      EXPECT_TRUE(Contains(raw, "\x1b[4minline code")) << raw;  // underlined, as headings
    } else {
      EXPECT_TRUE(std::regex_search(raw, std::regex("\x1b\\[[0-9;]*34m[^\x1b]*def"))) << raw;
      EXPECT_TRUE(std::regex_search(raw, std::regex("\x1b\\[[0-9;]*31m\"hello \""))) << raw;
      EXPECT_TRUE(std::regex_search(raw, std::regex("\x1b\\[[0-9;]*36m# says hello"))) << raw;
      EXPECT_TRUE(std::regex_search(raw, std::regex("\x1b\\[[0-9;]*33minline code"))) << raw;
    }
    chat.Enter("/set render plain");
    std::string plain = chat.WaitForText("```python");
    EXPECT_TRUE(Contains(plain, "Here is **bold**, *italic* and `inline code`.")) << plain;
    EXPECT_FALSE(Contains(plain, "╭─ python")) << plain;
    chat.Enter("/set render markdown");
    chat.WaitForText("╭─ python");
    EXPECT_EQ(chat.Quit(), 0);
  }
}

// --render plain shows replies as written from the start; a bad --render is one line.
TEST(ChatTuiRender, RenderPlainFlagAndABadValue) {
  TempDir chats;
  ScriptedChat(chats.File("chats"), kScripted);
  TmuxChat chat(80, 40, {"--chats-dir", chats.File("chats"), "--resume", "--render", "plain"});
  const std::string s = chat.WaitForText("```python");
  EXPECT_TRUE(Contains(s, "# Greeting")) << s;
  EXPECT_FALSE(Contains(s, "╭─")) << s;
  EXPECT_EQ(chat.Quit(), 0);
  const RunResult bad = RunWormchat({"chat", "--render", "fancy"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--render"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

// Line mode (piped): /find lists the lines that hold the text, /copy says a pipe is not a
// terminal, /export writes the file, /open continues another chat, /set render is the full-screen
// chat's; replies stay raw text.
TEST(ChatPlainSecondPass, FindCopyExportOpenAndRenderInLineMode) {
  TempDir chats;
  const std::string dir = chats.File("chats");
  ScriptedChat(dir, kScripted);
  const RunResult r =
      RunWormchat({"chat", "--plain", "--seed", "7", "-n", "4", "--chats-dir", dir, "--resume"},
                  "/find hello\n/copy\n/export " + chats.File("x.md") +
                      "\n/set render plain\nWhat is a falcon?\n/open 1\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "```python\n")) << r.out;  // raw, as written
  EXPECT_TRUE(Contains(r.out, "turn 1 reply:     return \"hello \" + name  # says hello\n"))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "(1 line holds 'hello')")) << r.out;
  EXPECT_TRUE(Contains(r.out, "not copied: the output is not a terminal")) << r.out;
  EXPECT_TRUE(Contains(r.out, "exported 1 turn to " + chats.File("x.md"))) << r.out;
  EXPECT_TRUE(Contains(r.out, "/set render is the full-screen chat's")) << r.out;
  EXPECT_TRUE(Contains(r.out, "is this chat)")) << r.out;  // the resumed chat is the newest
  EXPECT_TRUE(Contains(ReadFile(chats.File("x.md")), kScripted));
}

// An unwritable chats directory (a file where it should be: root writes anywhere else): the
// status bar says "not saved" and why, a notice says it once per reply, and the chat goes on.
TEST(ChatTuiKeep, AnUnwritableChatsDirectoryIsNotSavedInTheStatusBarAndTheChatGoesOn) {
  TempDir tmp;
  WriteFile(tmp.File("plain-file"), "not a directory\n");
  TmuxChat chat(110, 24, {"-n", "4", "--chats-dir", tmp.File("plain-file") + "/chats"});
  chat.WaitForText("shows the mesh.");
  chat.Enter("What is a falcon?");
  std::string s = chat.WaitForRow(22, R"(idle.*not saved: cannot create .*seed 7)");
  EXPECT_TRUE(Contains(s, "(not saved: cannot create")) << s;
  chat.Enter("And the wind?");
  s = chat.WaitFor("the second reply", [](const std::string& screen) {
    return !ReplyAfter(Lines(screen), "> And the wind?").empty() &&
           std::regex_search(Lines(screen)[22], std::regex("^idle"));
  });
  EXPECT_TRUE(Contains(Lines(s)[22], "not saved")) << s;
  EXPECT_EQ(chat.Quit(), 0);
}

}  // namespace wc::test
