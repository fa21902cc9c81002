// The full-screen chat in a real terminal, for the tests of tests/app/chat_tui*_test.cpp: tmux
// runs `wormchat chat` on the default model in a detached session of a given size, `send-keys`
// types, `capture-pane` reads the screen. Every chat has its own tmux server (a socket in its
// temporary directory), HOME and XDG_STATE_HOME, and waits by polling the screen until what it
// expects shows (never by sleeping alone), so the tests are independent and can run in parallel.
// The chat runs with --threads 1: on a loaded two-core machine, two OpenMP threads can be many
// times slower. Needs tmux (tools/install-deps.sh installs it); without it every test fails,
// saying so.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/test_util.h"

extern char** environ;

namespace wc::test {

using Clock = std::chrono::steady_clock;
inline constexpr double kTimeoutS = 30;  // for any one thing to show; a loaded CI machine is slow

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// 'text' for sh, whatever it holds.
inline std::string ShellQuote(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// One `wormchat chat` in its own tmux server. The pane runs a script that prints BEFORE-CHAT,
// records `stty -g`, runs the chat (its pid to a file), then writes its exit status and `stty -g`
// again, prints AFTER-CHAT and reads one line into a file (to see whether bracketed paste was
// left on).
class TmuxChat {
 public:
  // A width x height terminal running `wormchat chat --seed 7 --threads 1 ARGS...` (without
  // --threads when ARGS has --server: the model runs there), with
  // NO_COLOR=1 or without NO_COLOR, and XDG_STATE_HOME = state_dir ("": a fresh directory).
  TmuxChat(int width, int height, const std::vector<std::string>& args = {}, bool no_color = false,
           const std::string& state_dir = "") {
    state_ = state_dir.empty() ? dir_.File("state") : state_dir;
    WriteFile(dir_.File("tmux.conf"),
              "set -g status off\n"  // the pane is the whole window: exactly W x H
              "set -g default-terminal tmux-256color\n"
              "set -g default-shell /bin/sh\n");
    const bool server = std::find(args.begin(), args.end(), "--server") != args.end();
    std::string chat = JoinWords({ShellQuote(WORMCHAT_BINARY), "chat", "--seed", "7"});
    if (!server) chat += " --threads 1";
    for (const std::string& a : args) chat += " " + ShellQuote(a);
    const std::string d = ShellQuote(dir_.path());
    // shell.pid: the destructor waits for this shell to end before its directory is removed.
    std::string script = "cd " + d + "; echo $$ > shell.pid\n";
    script += "export HOME=" + d + " XDG_STATE_HOME=" + ShellQuote(state_) + "\n";
    script += no_color ? "export NO_COLOR=1\n" : "unset NO_COLOR\n";
    script += "printf 'BEFORE-CHAT\\n'\nstty -g > stty.before\n";
    // Ctrl-C in line mode reaches the whole process group: the script lives on to report.
    script += "trap : INT\n";
    script += "sh -c 'echo $$ > pid; exec \"$@\"' sh " + chat + "\n";
    script += "echo \"EXIT=$?\" > exit.tmp; stty -g > stty.after; mv exit.tmp exit\n";
    script += "echo AFTER-CHAT\n";
    // Only a line read: at kill-server the read ends without one, and a write then would land in
    // the directory the test is removing (left behind).
    script += "IFS= read -r line && printf '%s' \"$line\" > pasted\n";
    script += "exec sleep 600\n";  // tmux's kill-server ends it
    WriteFile(dir_.File("pane.sh"), script);
    const int rc = Tmux({"new-session", "-d", "-x", std::to_string(width), "-y",
                         std::to_string(height), "sh " + d + "/pane.sh"});
    if (rc == 127) ADD_FAILURE() << "tmux is not installed: run tools/install-deps.sh";
    EXPECT_EQ(rc, 0) << "tmux new-session failed";
  }
  // A chat that never exited (a failed test) is killed: a hung one would ignore tmux's SIGHUP.
  ~TmuxChat() {
    const pid_t pid = std::atoi(ReadFile(dir_.File("pid")).c_str());
    if (pid > 0 && !std::filesystem::exists(dir_.File("exit"))) kill(pid, SIGKILL);
    Tmux({"kill-server"});
    // The pane's shell may still be writing its files (exit, stty.after) after kill-server: wait
    // up to 5 s for it to end (gone, or a zombie no one reaps in a container), so nothing lands
    // in the directory while it is removed.
    const pid_t shell = std::atoi(ReadFile(dir_.File("shell.pid")).c_str());
    const auto running = [shell] {
      const std::string stat = ReadFile("/proc/" + std::to_string(shell) + "/stat");
      const size_t paren = stat.rfind(')');
      return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
    };
    for (int i = 0; shell > 0 && i < 500 && running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // `tmux ARGS...` on this test's server; its exit status (127: no tmux). Keeps its stdout.
  int Tmux(const std::vector<std::string>& args) {
    std::vector<std::string> argv_s = {"tmux", "-S", dir_.File("sock"), "-f",
                                       dir_.File("tmux.conf")};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> env;  // ours, without a surrounding tmux's
    for (char** e = environ; *e != nullptr; ++e)
      if (std::strncmp(*e, "TMUX=", 5) != 0 && std::strncmp(*e, "TMUX_PANE=", 10) != 0)
        env.push_back(*e);
    env.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, dir_.File("tmux.out").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, dir_.File("tmux.err").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = 0;
    const int rc = posix_spawnp(&pid, "tmux", &fa, nullptr, argv.data(), env.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return 127;
    int status = 0;
    waitpid(pid, &status, 0);
    out_ = ReadFile(dir_.File("tmux.out"));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  // Literal text, as typed.
  void Type(const std::string& text) { Tmux({"send-keys", "-l", text}); }
  // `line` and Enter, then waits until the chat took it (the input is empty again): so what the
  // screen shows next is not from before it.
  void Enter(const std::string& line) {
    Type(line);
    Keys({"Enter"});
    WaitForInput("");
  }
  // Keys by tmux's names: "Enter", "C-c", "Up", "F2", "NPage", ...
  void Keys(const std::vector<std::string>& keys) {
    std::vector<std::string> args = {"send-keys"};
    args.insert(args.end(), keys.begin(), keys.end());
    Tmux(args);
  }
  // `text` as one bracketed paste (tmux brackets it when the program asked for it).
  void Paste(const std::string& text) {
    Tmux({"set-buffer", "--", text});
    Tmux({"paste-buffer", "-p"});
  }
  void Resize(int width, int height) {
    Tmux({"resize-window", "-x", std::to_string(width), "-y", std::to_string(height)});
  }

  // The screen as text, one line per row (trailing spaces dropped); with `escapes`, with the
  // SGR sequences of its colours and attributes.
  std::string Screen(bool escapes = false) {
    if (escapes)
      Tmux({"capture-pane", "-p", "-e"});
    else
      Tmux({"capture-pane", "-p"});
    return out_;
  }
  std::vector<std::string> Rows() { return Lines(Screen()); }
  // A tmux format of the pane, e.g. "#{alternate_on}".
  std::string Format(const std::string& format) {
    Tmux({"display-message", "-p", format});
    std::string v = out_;
    while (!v.empty() && v.back() == '\n') v.pop_back();
    return v;
  }

  // Polls the screen until `ok` holds for it; fails the test (showing the screen) after the
  // timeout. Returns the last screen. After one timeout the next waits give up at once, so a
  // broken chat fails its test in one timeout rather than in one per step.
  std::string WaitFor(const std::string& what, const std::function<bool(const std::string&)>& ok) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(kTimeoutS);
    std::string screen;
    while (true) {
      screen = Screen();
      if (ok(screen)) return screen;
      if (timed_out_ || Clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "timed out waiting for " << what << "; the screen:\n" << screen;
    timed_out_ = true;
    return screen;
  }
  std::string WaitForText(const std::string& text) {
    return WaitFor("'" + text + "'", [&](const std::string& s) { return Contains(s, text); });
  }
  // Waits until the row `row` (negative: from the bottom) matches `re` whole.
  std::string WaitForRow(int row, const std::string& re) {
    const std::regex pattern(re);
    return WaitFor(
        "row " + std::to_string(row) + " to match /" + re + "/", [&](const std::string& s) {
          const std::vector<std::string> rows = Lines(s);
          const int i = row < 0 ? static_cast<int>(rows.size()) + row : row;
          return i >= 0 && i < static_cast<int>(rows.size()) && std::regex_match(rows[i], pattern);
        });
  }
  // The input line (the last row) shows exactly "> " + text.
  void WaitForInput(const std::string& text) {
    WaitFor("the input line '> " + text + "'", [&](const std::string& s) {
      const std::vector<std::string> rows = Lines(s);
      return !rows.empty() && rows.back() == TrimRight("> " + text);
    });
  }
  // The greeting: the chat is up and reading keys.
  void WaitForStart() { WaitForText("F2 shows the mesh."); }
  // ... of a chat with a server.
  void WaitForServerStart() { WaitForText("F2 shows the server's figures."); }

  // The chat's exit status, once it has exited (-1 on timeout).
  int WaitForExit() {
    const auto deadline = Clock::now() + std::chrono::duration<double>(kTimeoutS);
    while (!std::filesystem::exists(dir_.File("exit"))) {
      if (timed_out_ || Clock::now() > deadline) {
        ADD_FAILURE() << "the chat did not exit; the screen:\n" << Screen();
        timed_out_ = true;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const std::string e = ReadFile(dir_.File("exit"));
    return e.rfind("EXIT=", 0) == 0 ? std::atoi(e.c_str() + 5) : -1;
  }
  // /quit, and the chat's exit status (0 expected).
  int Quit() {
    Type("/quit");
    Keys({"Enter"});
    return WaitForExit();
  }
  void Signal(int sig) {
    const pid_t pid = std::atoi(ReadFile(dir_.File("pid")).c_str());
    ASSERT_GT(pid, 0);
    ASSERT_EQ(kill(pid, sig), 0);
  }

  const TempDir& dir() const { return dir_; }
  const std::string& state_dir() const { return state_; }

  static std::string TrimRight(std::string s) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
  }

 private:
  static std::string JoinWords(const std::vector<std::string>& words) {
    std::string s;
    for (const std::string& w : words) s += (s.empty() ? "" : " ") + w;
    return s;
  }

  TempDir dir_;
  std::string state_;
  std::string out_;
  bool timed_out_ = false;
};

inline const char kQuestion[] = "What does it mean to sail?";
// A reply that runs to its token limit: at temperature 100 EOS is about as likely as any token
// (about one reply in nine of 480 tokens draws it), and seed 7 with kLongPrompt does not. Checked
// with `chat --plain` and /stats ("last reply: 480 tokens") whenever the numerics change: the
// kernels of 2026-11-24 drew EOS after 90 tokens for "Tell me a very long story.", a fifth of a
// second of streaming, too short for the tests below to see it under load.
inline const std::vector<std::string> kLongReply = {"-n",      "480", "--temperature", "100",
                                                    "--top-k", "0",   "--top-p",       "1"};
inline const char kLongPrompt[] = "Tell me a long story.";

// The status bar after a reply: idle, its speed, ..., the seed.
inline const char kIdleWithSpeed[] = R"(idle \| [0-9.]+ tok/s \|.* \| seed 7)";

// The reply's text: the rows after the user's message, up to the next blank row, each without
// its two-column indent, joined by spaces (the wrap breaks at spaces).
inline std::string ReplyAfter(const std::vector<std::string>& rows, const std::string& user_row,
                              int text_width = 1000) {
  size_t i = 0;
  while (i < rows.size() && TmuxChat::TrimRight(rows[i].substr(0, text_width)) != user_row) ++i;
  i += 2;  // the message, the blank row between entries
  std::string reply;
  for (; i < rows.size(); ++i) {
    const std::string row = TmuxChat::TrimRight(rows[i].substr(0, text_width));
    if (row.empty()) break;
    reply += (reply.empty() ? "" : " ") + row.substr(std::min<size_t>(2, row.size()));
  }
  return reply;
}

}  // namespace wc::test
