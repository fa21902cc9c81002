#include "app/chat/chat_plain.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "app/chat/tty_line.h"
#include "app/stdout_sink.h"
#include "app/tui/scrollback_search.h"
#include "util/error.h"

namespace wc {
namespace {

// Ctrl-C while a reply runs cancels it; at the prompt it ends the chat as usual.
std::atomic<bool> g_generating{false};
std::atomic<bool> g_cancel{false};

void OnInterrupt(int) {
  if (g_generating.load()) {
    g_cancel.store(true);
  } else {
    RestoreTtyFromSignal();
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
  }
}

// One line of input after `prompt` (shown on a terminal only): from the terminal through
// ReadTtyLine (no length limit, unlike the kernel's canonical mode), else from std::cin.
bool ReadLine(const char* prompt, bool tty, std::string& line, const std::string& initial = {}) {
  if (tty) return ReadTtyLine(STDIN_FILENO, prompt, line, initial);
  return static_cast<bool>(std::getline(std::cin, line));
}

// Reads the next message or command: a line, or the lines between two `"""` lines (joined with
// '\n'); a terminal's line starts as `initial` (/edit's message). False at the end of input (an
// unclosed block is sent as it is).
bool ReadInput(std::string& out, bool prompt, const std::string& initial) {
  out.clear();
  std::string line;
  const bool tty = isatty(STDIN_FILENO);
  if (prompt) std::printf("\n");
  std::fflush(stdout);
  if (!ReadLine(prompt ? "> " : "", tty, line, initial)) return false;
  if (line != "\"\"\"") {
    out = line;
    return true;
  }
  bool first = true;
  while (true) {
    if (!ReadLine(prompt ? ". " : "", tty, line)) return !out.empty();
    if (line == "\"\"\"") return true;
    if (!first) out += '\n';
    out += line;
    first = false;
  }
}

// A request's end: heard on the loop's thread (Callback), waited for on this one.
class RequestEnd {
 public:
  std::function<void(const RequestResult&)> Callback() {
    return [this](const RequestResult& r) {
      std::lock_guard<std::mutex> lock(mu_);
      result_ = r;
      done_ = true;
      cv_.notify_all();
    };
  }
  // Blocks until the request has ended, running `poll` every 20 ms meanwhile (if given).
  const RequestResult& Wait(const std::function<void()>& poll = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return done_; }))
      if (poll) poll();
    return result_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  RequestResult result_;
};

void Say(const std::string& text) {
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

// /find in line mode: what was printed cannot light up, so the lines of the conversation that
// hold TEXT are listed, each with its turn and who wrote it (the matching as the full-screen
// chat's: smart case).
std::string FindText(ChatSession& session, const std::string& query) {
  std::string out;
  int found = 0, turn = 0;
  for (const ConversationTurn& t : session.turns()) {
    ++turn;
    for (const auto& [who, text] :
         {std::pair<const char*, const std::string*>{"you", &t.user}, {"reply", &t.reply_text}}) {
      size_t at = 0;
      while (at <= text->size()) {
        const size_t nl = std::min(text->find('\n', at), text->size());
        const std::string line = text->substr(at, nl - at);
        if (!tui::MatchesInLine(line, query).empty()) {
          out += Cat("turn ", turn, " ", who, ": ", line, "\n");
          ++found;
        }
        at = nl + 1;
      }
    }
  }
  return found == 0
             ? Cat("(no line holds '", query, "')\n")
             : Cat(out, "(", found, found == 1 ? " line holds '" : " lines hold '", query, "')\n");
}

// The conversation's turns as they were (a resumed or opened chat).
void ShowTurns(ChatSession& session, bool banner) {
  for (const ConversationTurn& t : session.turns()) {
    if (t.reset_before) Say("(new conversation)");
    std::printf("%s%s\n%s\n", banner ? "\n> " : "> ", t.user.c_str(), t.reply_text.c_str());
  }
}

}  // namespace

void RunPlainChat(ChatSession& session, bool banner) {
  const ChatIdentity id = session.identity();
  if (banner) {
    std::printf("wormchat - %s%s, seed %llu\n%s; /help lists the commands.\n", id.detail.c_str(),
                id.ctx > 0 ? Cat(", context ", id.ctx).c_str() : "",
                static_cast<unsigned long long>(session.settings().seed),
                id.ids ? "Type token ids (\"5 17 9\") and press Enter: they are fed as they are, "
                         "and replies are ids"
                       : "Type a message and press Enter");
  }
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  ShowTurns(session, banner);  // a resumed chat, shown as it was
  StdoutSink sink;
  std::string input;
  std::vector<std::string> queued;  // /load's user turns, sent one after another
  const bool tty = isatty(STDIN_FILENO);
  std::string edit;  // /edit's message, the next input line's start (on a terminal)
  while (true) {
    std::string message;
    ChatCommand cmd;
    if (!queued.empty()) {
      message = queued.front();
      queued.erase(queued.begin());
      std::printf("> %s\n", message.c_str());
    } else {
      if (!ReadInput(input, banner, tty ? edit : std::string())) break;
      edit.clear();
      cmd = ParseChatCommand(input, &message);
    }
    switch (cmd.kind) {
      case ChatCommand::Kind::kNone:
        break;
      case ChatCommand::Kind::kQuit:
        return;
      case ChatCommand::Kind::kHelp:
        std::printf("%s", ChatHelpText());
        continue;
      case ChatCommand::Kind::kHint:
        Say(cmd.text);
        continue;
      case ChatCommand::Kind::kStats:
        std::printf("%s", session.StatsText().c_str());
        continue;
      case ChatCommand::Kind::kMesh:
        Say("the mesh panel is part of the full-screen chat; /stats has its figures here");
        continue;
      case ChatCommand::Kind::kSave:
        Say(session.Save(cmd.path));
        continue;
      case ChatCommand::Kind::kLoad:
        Say(session.Load(cmd.path, queued));
        break;
      case ChatCommand::Kind::kRetry:
        break;
      case ChatCommand::Kind::kTitle:
        Say(session.SetTitle(cmd.path));
        continue;
      case ChatCommand::Kind::kForget:
        Say(session.Forget());
        continue;
      case ChatCommand::Kind::kChats:
        std::printf("%s", session.ChatsText().c_str());
        continue;
      case ChatCommand::Kind::kCopy:
        // The sequence goes to the terminal the replies are shown on; a pipe gets none.
        Say(isatty(STDOUT_FILENO)
                ? session.Copy(cmd, STDOUT_FILENO)
                : "not copied: the output is not a terminal (OSC 52 needs one to reach)");
        continue;
      case ChatCommand::Kind::kExport:
        Say(session.Export(cmd.path, cmd.value == 1));
        continue;
      case ChatCommand::Kind::kFind:
        std::printf("%s", FindText(session, cmd.text).c_str());
        continue;
      case ChatCommand::Kind::kOpen: {
        RequestEnd end;
        const std::string why = session.Open(static_cast<int>(cmd.value), end.Callback());
        if (!why.empty()) {
          Say(why);
          continue;
        }
        const RequestResult& result = end.Wait();
        queued.clear();
        ShowTurns(session, banner);
        Say(session.OpenedText(result));
        continue;
      }
      case ChatCommand::Kind::kUndo:
      case ChatCommand::Kind::kEdit: {
        // Line mode cannot take printed lines back: it says what left the conversation.
        std::string undone;
        const std::string why = session.Undo(&undone);
        if (!why.empty()) {
          Say(why);
        } else if (cmd.kind == ChatCommand::Kind::kUndo) {
          Say("(the last exchange is undone)");
        } else {
          edit = undone;
          Say(tty ? "(the last exchange is undone: change the message and press Enter)"
                  : Cat("(the last exchange is undone; its message was: ", undone, ")"));
        }
        continue;
      }
      default:
        if (cmd.kind == ChatCommand::Kind::kSet && cmd.name == "render") {
          Say("line mode prints replies as the model writes them: /set render is the "
              "full-screen chat's");
          continue;
        }
        Say(session.Apply(cmd));
        continue;
    }
    if (cmd.kind == ChatCommand::Kind::kLoad) continue;  // the queue sends them
    const bool retry = cmd.kind == ChatCommand::Kind::kRetry;
    if (!retry && message.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    RequestEnd end;
    g_cancel.store(false);
    g_generating.store(true);
    try {
      if (banner) std::printf("\n");
      auto on_text = [&sink](std::string_view text) { sink.Write(text); };
      auto on_done = end.Callback();
      if (retry)
        session.Retry(cmd.value == 1, on_text, on_done);
      else
        session.Send(message, on_text, on_done);
    } catch (const Error& e) {
      g_generating.store(false);
      Say(e.what());
      continue;
    }
    const RequestResult& result = end.Wait([&] {
      if (g_cancel.exchange(false)) session.Cancel();
    });
    session.Autosave();
    // After the reply: a warning may come while it runs (a damaged prefix-cache file).
    const std::string notice = session.figures().notice;
    g_generating.store(false);
    if (result.reason == StopReason::kError) {
      Say(Cat("error: ", result.error));
      continue;
    }
    std::printf(result.reason == StopReason::kCancelled ? " [cancelled]\n" : "\n");
    if (!notice.empty()) Say(Cat("(", notice, ")"));
    const std::string unsaved = session.figures().save_warning;
    if (!unsaved.empty()) Say(Cat("(", unsaved, ")"));
    std::fflush(stdout);
  }
}

}  // namespace wc
