#include "app/tui/chat_tui.h"

#include <curses.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cwchar>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "app/chat/clipboard.h"
#include "app/tui/core_grid.h"
#include "app/tui/history.h"
#include "app/tui/line_editor.h"
#include "app/tui/markdown.h"
#include "app/tui/scrollback_search.h"
#include "app/tui/status_line.h"
#include "app/tui/text_width.h"
#include "app/tui/wrap.h"
#include "util/error.h"

namespace wc {
namespace {

std::atomic<bool> g_terminate{false};  // SIGTERM, SIGHUP
std::atomic<bool> g_interrupt{false};  // SIGINT from outside (Ctrl-C itself arrives as a key)

void OnTerminate(int) {
  g_terminate.store(true);
}
void OnInterrupt(int) {
  g_interrupt.store(true);
}

enum Pair : short {
  kTitle = 1,
  kStatus,
  kUser,
  kNotice,
  kPanel,
  kMatch,         // a /find match
  kCurrentMatch,  // the match the walk is at
  kCode,          // inline code
  kHeading,
  kFrame,    // code block borders, rules, quote bars, list markers
  kKeyword,  // syntax colours in code blocks
  kType,
  kString,
  kComment,
  kNumber,
  kPreproc,
};

// The terminal in curses mode for the object's lifetime: raw keys, no echo, bracketed paste, the
// alternate screen; restored by the destructor on every path out.
class Screen {
 public:
  explicit Screen(bool mouse) {
    tui::SetUtf8Locale();
    if (newterm(nullptr, stdout, stdin) == nullptr) throw Error("chat: cannot start the terminal");
    raw();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    set_escdelay(25);
    timeout(50);
    color_ = has_colors() && std::getenv("NO_COLOR") == nullptr;
    if (color_) {
      start_color();
      use_default_colors();
      init_pair(kTitle, COLOR_WHITE, COLOR_BLUE);
      init_pair(kStatus, COLOR_BLACK, COLOR_CYAN);
      init_pair(kUser, COLOR_CYAN, -1);
      init_pair(kNotice, COLOR_YELLOW, -1);
      init_pair(kPanel, COLOR_GREEN, -1);
      init_pair(kMatch, COLOR_BLACK, COLOR_YELLOW);
      init_pair(kCurrentMatch, COLOR_BLACK, COLOR_GREEN);
      init_pair(kCode, COLOR_YELLOW, -1);
      init_pair(kHeading, COLOR_MAGENTA, -1);
      init_pair(kFrame, COLOR_BLUE, -1);
      init_pair(kKeyword, COLOR_BLUE, -1);
      init_pair(kType, COLOR_GREEN, -1);
      init_pair(kString, COLOR_RED, -1);
      init_pair(kComment, COLOR_CYAN, -1);
      init_pair(kNumber, COLOR_MAGENTA, -1);
      init_pair(kPreproc, COLOR_MAGENTA, -1);
    }
    if (mouse) {
      // The wheel only: with mouse reporting on, the terminal's own selection takes a modifier
      // (Shift in xterm, GNOME Terminal, Konsole, kitty, tmux; Fn or Option in macOS terminals).
      mouseinterval(0);
      mousemask(BUTTON4_PRESSED | BUTTON5_PRESSED, nullptr);
    }
    std::fputs("\033[?2004h", stdout);  // bracketed paste
    std::fflush(stdout);
  }
  ~Screen() {
    std::fputs("\033[?2004l", stdout);
    std::fflush(stdout);
    endwin();
  }
  // A bar's attributes (reverse video without colors), a text role's.
  attr_t Bar(Pair p) const { return color_ ? COLOR_PAIR(p) : A_REVERSE; }
  attr_t Text(Pair p) const {
    if (!color_) return p == kUser ? A_BOLD : p == kNotice ? A_DIM : A_NORMAL;
    return COLOR_PAIR(p) | (p == kUser ? A_BOLD : A_NORMAL);
  }
  // A rendered span's attributes. Without colours (NO_COLOR, a monochrome terminal) the
  // structure stays: bold, italic, underlined headings, dim frames, reverse-video matches.
  attr_t Span(uint16_t style, tui::SyntaxClass syntax) const {
    attr_t a = A_NORMAL;
    if (style & tui::kMdBold) a |= A_BOLD;
    if (style & tui::kMdItalic) a |= A_ITALIC;
    if (style & tui::kMdHeading) a |= A_BOLD | (color_ ? COLOR_PAIR(kHeading) : A_UNDERLINE);
    if (style & (tui::kMdFrame | tui::kMdQuote)) a |= color_ ? COLOR_PAIR(kFrame) : A_DIM;
    if (style & tui::kMdLanguage) a |= A_BOLD;
    if (style & tui::kMdCode) a |= color_ ? COLOR_PAIR(kCode) : A_UNDERLINE;
    if (!color_ || !(style & tui::kMdCodeBlock)) return a;
    switch (syntax) {
      case tui::SyntaxClass::kKeyword:
        return a | COLOR_PAIR(kKeyword) | A_BOLD;
      case tui::SyntaxClass::kType:
        return a | COLOR_PAIR(kType);
      case tui::SyntaxClass::kString:
        return a | COLOR_PAIR(kString);
      case tui::SyntaxClass::kComment:
        return a | COLOR_PAIR(kComment);
      case tui::SyntaxClass::kNumber:
        return a | COLOR_PAIR(kNumber);
      case tui::SyntaxClass::kPreproc:
        return a | COLOR_PAIR(kPreproc);
      case tui::SyntaxClass::kFunction:
        return a | A_BOLD;
      default:
        return a;
    }
  }
  attr_t Match(bool current) const {
    if (!color_) return current ? A_REVERSE | A_BOLD | A_UNDERLINE : A_REVERSE;
    return COLOR_PAIR(current ? kCurrentMatch : kMatch) | (current ? A_BOLD : A_NORMAL);
  }

 private:
  bool color_ = false;
};

// One message of the scrollback. Replies are rendered as markdown (unless --render plain);
// the user's messages and the chat's notices are word-wrapped as they are.
struct Entry {
  enum class Role { kUser, kAssistant, kNotice };
  Entry(Role r, int width, bool markdown) : role(r), text(width) {
    if (markdown && r == Role::kAssistant) md = std::make_unique<tui::MarkdownText>(width);
  }
  void Append(std::string_view chunk) {
    text.Append(chunk);
    if (md) md->Append(chunk);
  }
  void SetWidth(int width) {
    text.SetWidth(width);
    if (md) md->SetWidth(width);
  }
  // Switches rendering (/set render): the text stays, its lines change.
  void SetMarkdown(bool markdown) {
    if (role != Role::kAssistant || markdown == (md != nullptr)) return;
    if (!markdown) {
      md.reset();
      return;
    }
    md = std::make_unique<tui::MarkdownText>(text.width());
    md->Append(text.text());
  }
  size_t line_count() const { return md ? md->lines().size() : text.lines().size(); }

  Role role;
  tui::WrappedText text;                  // the raw text, wrapped (what plain rendering shows)
  std::unique_ptr<tui::MarkdownText> md;  // the rendered lines, when rendering markdown
};

// One line of the scrollback as drawn: a rendered line, or a wrapped line of raw text.
struct ScreenLine {
  const tui::MdLine* md = nullptr;
  const std::string* text = nullptr;
  Entry::Role role = Entry::Role::kNotice;
  bool first = false;  // the entry's first line (the user's get the "> " mark)
  std::string Plain() const { return md ? md->Plain() : *text; }
};

std::string Basename(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

void PutLine(int y, int x, const std::string& text, int width, attr_t attr) {
  attrset(attr);
  mvaddstr(y, x, tui::FitWidth(text, width).c_str());
  const int used = tui::DisplayWidth(tui::FitWidth(text, width));
  for (int i = used; i < width; ++i) addch(' ');
  attrset(A_NORMAL);
}

class ChatTui {
 public:
  ChatTui(ChatSession& session, const ChatTuiOptions& options)
      : s_(session), history_(tui::History::DefaultPath()), markdown_(options.markdown) {
    panel_ = COLS >= 120;
    const LoadedModel& m = s_.model();
    title_.model = Basename(m.dir);
    title_.n_params = m.model->config().n_params();
    title_.dtype = DTypeName(m.model->weights().embeddings.dtype);
    title_.kv_format = s_.figures().kv_format;
    title_.mesh = s_.run_options().mesh;
    Notice(Cat("wormchat: ", title_.model, ", context ", m.ctx, ", seed ",
               s_.conversation().settings().seed,
               ". Type a message and press Enter; /help lists the commands, F2 shows the mesh."));
    if (!history_.warning().empty()) Notice(history_.warning());
    ShowTurns();  // a resumed chat, shown as it was
  }

  // A reply still running is cancelled, and waited for: its callbacks point at this object.
  ~ChatTui() {
    if (reply_ < 0) return;
    s_.Cancel();
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return done_; });
  }

  void Run() {
    while (!quit_) {
      if (g_terminate.load()) break;
      if (g_interrupt.exchange(false)) CtrlC();
      PollReply();
      if (!queued_.empty() && !s_.busy() && reply_ < 0) {  // /load's next turn
        const std::string next = queued_.front();
        queued_.erase(queued_.begin());
        Send(next);
      }
      Draw();
      wint_t ch = 0;
      const int kind = get_wch(&ch);
      if (kind == ERR) continue;
      if (kind == KEY_CODE_YES)
        FunctionKey(static_cast<int>(ch));
      else
        Char(static_cast<wchar_t>(ch));
    }
    const std::string warning = history_.Save();
    (void)warning;  // nowhere to show it any more
  }

 private:
  // The scrollback's text: after the two-column mark, and left of the panel's separator column.
  int TextWidth() const {
    const int panel = PanelWidth();
    return std::max(10, COLS - 2 - (panel > 0 ? panel + 1 : 0));
  }
  int PanelWidth() const { return panel_ && COLS >= 100 ? std::min(36, COLS / 3) : 0; }

  void Add(Entry::Role role, const std::string& text) {
    entries_.emplace_back(role, TextWidth(), markdown_);
    entries_.back().Append(text);
  }
  // The conversation's turns as they were (a resumed or opened chat).
  void ShowTurns() {
    for (const ConversationTurn& t : s_.conversation().turns()) {
      if (t.reset_before) Notice("(new conversation)");
      Add(Entry::Role::kUser, t.user);
      Add(Entry::Role::kAssistant, t.reply_text);
    }
  }
  void Notice(const std::string& text) { Add(Entry::Role::kNotice, text); }

  // ---- replies, heard on the loop's thread and drawn on this one

  void PollReply() {
    std::string text;
    bool done = false;
    RequestResult result;
    {
      std::lock_guard<std::mutex> lock(mu_);
      text.swap(pending_);
      done = done_;
      if (done) {
        result = result_;
        done_ = false;
      }
    }
    if (!text.empty() && reply_ >= 0) entries_[reply_].Append(text);
    if (!done) return;
    if (opening_) {  // /open's re-prefill has ended
      opening_ = false;
      Notice(s_.OpenedText(result));
      return;
    }
    if (result.reason == StopReason::kCancelled && reply_ >= 0)
      entries_[reply_].Append(" [cancelled]");
    if (result.reason == StopReason::kError) Notice(Cat("error: ", result.error));
    s_.Autosave();
    const std::string notice = s_.figures().notice;
    if (!notice.empty()) Notice(Cat("(", notice, ")"));
    const std::string unsaved = s_.figures().save_warning;
    if (!unsaved.empty()) Notice(Cat("(", unsaved, ")"));
    reply_ = -1;
  }

  // A reply's callbacks (on the loop's thread): its text and its end, handed to Run's loop.
  std::function<void(std::string_view)> OnText() {
    return [this](std::string_view t) {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.append(t);
    };
  }
  std::function<void(const RequestResult&)> OnDone() {
    return [this](const RequestResult& r) {
      std::lock_guard<std::mutex> lock(mu_);
      result_ = r;
      done_ = true;
      done_cv_.notify_all();
    };
  }

  void Send(const std::string& message) {
    if (s_.busy()) {
      Notice("a reply is still running: wait for it, or press Ctrl-C to cancel it");
      return;
    }
    Add(Entry::Role::kUser, message);
    Add(Entry::Role::kAssistant, "");
    reply_ = static_cast<int>(entries_.size()) - 1;
    scroll_ = 0;
    try {
      s_.Send(message, OnText(), OnDone());
    } catch (const Error& e) {
      entries_.pop_back();
      reply_ = -1;
      Notice(e.what());
    }
  }

  // Erases the last exchange from the screen: from its user message (kept if `keep_user`) to the
  // end, notices after it included (none repeats what was removed).
  void EraseFromLastUser(bool keep_user) {
    for (int i = static_cast<int>(entries_.size()) - 1; i >= 0; --i) {
      if (entries_[i].role != Entry::Role::kUser) continue;
      entries_.erase(entries_.begin() + i + (keep_user ? 1 : 0), entries_.end());
      break;
    }
    reply_ = -1;
    scroll_ = 0;
  }

  // /retry: the new reply streams in place of the last one.
  void Retry(bool same_seed) {
    if (s_.busy()) {
      Notice("a reply is still running: wait for it, or press Ctrl-C to cancel it");
      return;
    }
    try {
      s_.Retry(same_seed, OnText(), OnDone());
    } catch (const Error& e) {
      Notice(e.what());
      return;
    }
    EraseFromLastUser(/*keep_user=*/true);
    Add(Entry::Role::kAssistant, "");
    reply_ = static_cast<int>(entries_.size()) - 1;
  }

  // /open N: the screen shows the saved chat; its re-prefill runs as a prompt's would.
  void Open(int n) {
    if (s_.busy()) {
      Notice("a reply is still running: wait for it, or press Ctrl-C to cancel it");
      return;
    }
    const std::string why = s_.Open(n, OnDone());
    if (!why.empty()) {
      Notice(why);
      return;
    }
    entries_.clear();
    queued_.clear();
    FindLeave();
    reply_ = -1;
    scroll_ = 0;
    opening_ = true;
    ShowTurns();
  }

  // ---- input

  void Submit() {
    std::string text = editor_.text();
    if (block_) {  // a """ line ends the block; Enter elsewhere is a newline
      const size_t nl = text.rfind('\n');
      const std::string last = nl == std::string::npos ? text : text.substr(nl + 1);
      if (last != "\"\"\"") {
        editor_.InsertNewline();
        return;
      }
      text = nl == std::string::npos ? "" : text.substr(0, nl);
      block_ = false;
      editor_.Clear();
      if (text.find_first_not_of(" \t\n") == std::string::npos) return;
      Remember(text);
      Send(text);
      return;
    }
    if (text == "\"\"\"") {
      editor_.Clear();
      editor_.Insert("\"\"\"");
      editor_.InsertNewline();
      block_ = true;
      return;
    }
    if (text.find_first_not_of(" \t\n") == std::string::npos) return;
    editor_.Clear();
    Remember(text);
    std::string message;
    const ChatCommand c = ParseChatCommand(text, &message);
    switch (c.kind) {
      case ChatCommand::Kind::kNone:
        Send(message);
        return;
      case ChatCommand::Kind::kQuit:
        quit_ = true;
        return;
      case ChatCommand::Kind::kHelp:
        Notice(ChatHelpText());
        return;
      case ChatCommand::Kind::kHint:
        Notice(c.text);
        return;
      case ChatCommand::Kind::kStats:
        Notice(s_.StatsText());
        return;
      case ChatCommand::Kind::kMesh:
        panel_ = !panel_;
        panel_chosen_ = true;
        if (panel_ && PanelWidth() == 0) Notice("the mesh panel needs a terminal of 100 columns");
        Rewrap();
        return;
      case ChatCommand::Kind::kSave:
        Notice(s_.Save(c.path));
        return;
      case ChatCommand::Kind::kLoad:
        Notice(s_.Load(c.path, queued_));
        return;
      case ChatCommand::Kind::kRetry:
        Retry(c.value == 1);
        return;
      case ChatCommand::Kind::kTitle:
        Notice(s_.SetTitle(c.path));
        return;
      case ChatCommand::Kind::kForget:
        Notice(s_.Forget());
        return;
      case ChatCommand::Kind::kCopy:
        Notice(s_.Copy(c, STDOUT_FILENO));
        return;
      case ChatCommand::Kind::kExport:
        Notice(s_.Export(c.path, c.value == 1));
        return;
      case ChatCommand::Kind::kOpen:
        Open(static_cast<int>(c.value));
        return;
      case ChatCommand::Kind::kFind:
        FindStart(c.text);
        return;
      case ChatCommand::Kind::kChats: {
        std::string list = s_.ChatsText();
        if (!list.empty() && list.back() == '\n') list.pop_back();
        Notice(list);
        return;
      }
      case ChatCommand::Kind::kUndo:
      case ChatCommand::Kind::kEdit: {
        std::string undone;
        const std::string why = s_.Undo(&undone);
        if (!why.empty()) {
          Notice(why);
          return;
        }
        EraseFromLastUser(/*keep_user=*/false);
        if (c.kind == ChatCommand::Kind::kEdit) {
          // Back in the input line to change; in the history too, so Up on an emptied line finds
          // it again.
          Remember(undone);
          editor_.Clear();
          if (undone.find('\n') != std::string::npos) {
            block_ = true;
            editor_.Insert("\"\"\"");
            editor_.InsertNewline();
          }
          for (size_t at = 0; at <= undone.size();) {
            const size_t nl = std::min(undone.find('\n', at), undone.size());
            editor_.Insert(std::string_view(undone).substr(at, nl - at));
            if (nl < undone.size()) editor_.InsertNewline();
            at = nl + 1;
          }
        }
        return;
      }
      default:
        if (c.kind == ChatCommand::Kind::kSet && c.name == "render") {
          markdown_ = c.value == 1;
          for (Entry& e : entries_) e.SetMarkdown(markdown_);
          Rewrap();
          Notice(Cat("(replies shown as ", markdown_ ? "rendered markdown" : "plain text", ")"));
          return;
        }
        if (s_.busy()) {
          Notice("a reply is still running: wait for it, or press Ctrl-C to cancel it");
          return;
        }
        Notice(s_.Apply(c));
    }
  }

  void Remember(const std::string& text) {
    history_.Add(text);
    const std::string warning = history_.Save();
    if (!warning.empty()) Notice(warning);
  }

  void CtrlC() {
    if (s_.busy()) {
      s_.Cancel();
      queued_.clear();  // and the rest of a /load
      return;
    }
    if (!editor_.empty() || block_) {
      editor_.Clear();
      block_ = false;
      quit_armed_ = false;
      return;
    }
    if (quit_armed_) {
      quit_ = true;
      return;
    }
    quit_armed_ = true;
    Notice("press Ctrl-C again or Ctrl-D to quit");
  }

  void Complete() {
    const std::vector<std::string> options = CompleteChatCommand(editor_.text());
    if (options.size() == 1) {
      editor_.SetText(options[0]);
    } else if (options.size() > 1) {
      std::string line;
      for (const std::string& o : options) line += o + "  ";
      Notice(line);
    }
  }

  void HistoryUp() {
    if (editor_.MoveUp()) return;
    if (auto older = history_.Older(editor_.text())) editor_.SetText(*older);
  }
  void HistoryDown() {
    if (editor_.MoveDown()) return;
    if (auto newer = history_.Newer(editor_.text())) editor_.SetText(*newer);
  }

  void Scroll(int lines) {
    scroll_ = std::max(0, std::min(scroll_ + lines, std::max(0, TotalLines() - ScrollRows())));
  }
  // Scrolls so that scrollback line `line` shows (about mid-screen when it was off screen).
  void ScrollTo(int line) {
    const int total = TotalLines(), rows = ScrollRows();
    const int end = total - scroll_;
    if (line >= end - rows && line < end) return;
    scroll_ = std::max(0, std::min(total - (line + rows / 2 + 1), std::max(0, total - rows)));
  }

  // ---- /find and Ctrl-F: the scrollback's matches, highlighted, walked with n / N

  std::vector<std::string> PlainLines() const {
    std::vector<std::string> out;
    for (const ScreenLine& l : Lines()) out.push_back(l.Plain());
    return out;
  }
  void FindStart(const std::string& query) {
    find_.Start(query, tui::FindInLines(PlainLines(), query));
    if (const tui::ScrollMatch* m = find_.current()) ScrollTo(m->line);
  }
  void FindStep(bool older) {
    if (older)
      find_.Older();
    else
      find_.Newer();
    if (const tui::ScrollMatch* m = find_.current()) ScrollTo(m->line);
  }
  void FindLeave() {
    find_.Clear();
    find_typing_ = false;
    find_query_.clear();
  }
  // A key while the find bar takes keys: true if it used it.
  bool FindKey(bool function_key, int key) {
    if (find_typing_) {
      if (function_key) {
        if (key == KEY_BACKSPACE) return FindKey(false, 127);
        if (key == KEY_ENTER) return FindKey(false, '\r');
        return false;  // PgUp, PgDn, the wheel: they scroll as ever
      }
      switch (key) {
        case 27:  // Esc
        case 3:   // Ctrl-C
          FindLeave();
          return true;
        case '\r':
        case '\n':
          find_typing_ = false;
          if (find_query_.empty()) FindLeave();
          return true;
        case 6:  // Ctrl-F, Ctrl-G: walk while typing
        case 7:
          FindStep(key == 6);
          return true;
        case 8:
        case 127:
          tui::PopUtf8Char(find_query_);
          if (find_query_.empty())
            find_.Clear();
          else
            FindStart(find_query_);
          return true;
        default:
          if (key < 32) return true;
          tui::AppendUtf8(find_query_, static_cast<char32_t>(key));
          FindStart(find_query_);
          return true;
      }
    }
    if (!find_.active()) return false;
    if (function_key) return false;
    switch (key) {
      case 'n':
      case 6:  // Ctrl-F
        FindStep(/*older=*/true);
        return true;
      case 'N':
      case 7:  // Ctrl-G
        FindStep(/*older=*/false);
        return true;
      case 27:
      case '\r':
      case '\n':
        FindLeave();
        return true;
      default:
        FindLeave();  // any other key leaves the walk and goes to the input line
        return false;
    }
  }

  // ---- Ctrl-R: reverse incremental search of the input history, as readline does

  void HistorySearchStart() {
    rsearch_ = true;
    rsearch_query_.clear();
    rsearch_at_.reset();
    rsearch_failed_ = false;
    rsearch_saved_ = editor_.text();
  }
  // Searches from `before` (an entry index; size() for the newest).
  void HistorySearch(size_t before) {
    const auto at = tui::FindInHistory(history_.entries(), rsearch_query_, before);
    rsearch_failed_ = !at.has_value() && !rsearch_query_.empty();
    if (at) rsearch_at_ = at;
  }
  void HistorySearchEnd(bool accept) {
    rsearch_ = false;
    history_.EndWalk();
    if (accept && rsearch_at_)
      editor_.SetText(history_.entries()[*rsearch_at_]);
    else if (!accept)
      editor_.SetText(rsearch_saved_);
  }
  // A key during Ctrl-R: true if it used it (else it was accepted into the line, and the key
  // goes on as usual, as readline does with cursor keys).
  bool HistorySearchKey(bool function_key, int key) {
    const size_t newest = history_.entries().size();
    if (function_key) {
      if (key == KEY_BACKSPACE) return HistorySearchKey(false, 127);
      if (key == KEY_ENTER) return HistorySearchKey(false, '\r');
      HistorySearchEnd(/*accept=*/true);
      return false;
    }
    switch (key) {
      case 18:  // Ctrl-R again: the next older match
        HistorySearch(rsearch_at_ ? *rsearch_at_ : newest);
        return true;
      case 7:  // Ctrl-G, Ctrl-C: the line as it was
      case 3:
        HistorySearchEnd(/*accept=*/false);
        return true;
      case 27:  // Esc: the match in the line, to edit
        HistorySearchEnd(/*accept=*/true);
        return true;
      case '\r':
      case '\n':
        HistorySearchEnd(/*accept=*/true);
        Submit();
        return true;
      case 8:
      case 127:
        tui::PopUtf8Char(rsearch_query_);
        rsearch_at_.reset();
        HistorySearch(newest);
        return true;
      default:
        if (key < 32) {
          HistorySearchEnd(/*accept=*/true);
          return false;
        }
        tui::AppendUtf8(rsearch_query_, static_cast<char32_t>(key));
        // The current match stays while it still matches (readline's incremental search).
        HistorySearch(rsearch_at_ ? *rsearch_at_ + 1 : newest);
        return true;
    }
  }
  // The input line during Ctrl-R: (reverse-i-search)`query': match.
  std::string HistorySearchLine() const {
    std::string match;
    if (rsearch_at_) {
      match = history_.entries()[*rsearch_at_];
      const size_t nl = match.find('\n');
      if (nl != std::string::npos) match = match.substr(0, nl) + " ...";
    }
    return Cat(rsearch_failed_ ? "(failed reverse-i-search)`" : "(reverse-i-search)`",
               rsearch_query_, "': ", match);
  }

  void Mouse() {
    MEVENT ev{};
    if (getmouse(&ev) != OK) return;
    if (ev.bstate & BUTTON4_PRESSED) Scroll(3);
    if (ev.bstate & BUTTON5_PRESSED) Scroll(-3);
  }

  void FunctionKey(int key) {
    if (key != KEY_RESIZE) quit_armed_ = false;
    if (key == KEY_MOUSE) {
      Mouse();
      return;
    }
    if (key != KEY_RESIZE) {
      if (rsearch_ && HistorySearchKey(true, key)) return;
      if (FindKey(true, key)) return;
    }
    switch (key) {
      case KEY_RESIZE:
        if (!panel_chosen_) panel_ = COLS >= 120;
        Rewrap();
        break;
      case KEY_LEFT:
        editor_.MoveLeft();
        break;
      case KEY_RIGHT:
        editor_.MoveRight();
        break;
      case KEY_UP:
        HistoryUp();
        break;
      case KEY_DOWN:
        HistoryDown();
        break;
      case KEY_HOME:
        if (editor_.empty())
          scroll_ = std::max(0, TotalLines() - ScrollRows());
        else
          editor_.MoveLineStart();
        break;
      case KEY_END:
        if (editor_.empty())
          scroll_ = 0;
        else
          editor_.MoveLineEnd();
        break;
      case KEY_DC:
        editor_.DeleteAt();
        break;
      case KEY_BACKSPACE:
        editor_.DeleteBefore();
        break;
      case KEY_PPAGE:
        Scroll(ScrollRows() - 1);
        break;
      case KEY_NPAGE:
        Scroll(-(ScrollRows() - 1));
        break;
      case KEY_ENTER:
        Submit();
        break;
      case KEY_F(2):
        panel_ = !panel_;
        panel_chosen_ = true;
        Rewrap();
        break;
      default:
        break;
    }
  }

  // ESC was read: an Alt- key, a bracketed paste, or nothing.
  void Escape() {
    wint_t ch = 0;
    timeout(25);
    int kind = get_wch(&ch);
    timeout(50);
    if (kind == ERR || kind == KEY_CODE_YES) return;
    if (ch == '[') {  // ESC [ 2 0 0 ~ starts a paste, ESC [ 2 0 1 ~ ends it
      std::string seq;
      while (seq.size() < 4 && get_wch(&ch) == OK) seq += static_cast<char>(ch);
      if (seq == "200~") Paste();
      return;
    }
    switch (ch) {
      case 'b':
        editor_.MoveWordLeft();
        break;
      case 'f':
        editor_.MoveWordRight();
        break;
      case 'd':
        editor_.DeleteWordAfter();
        break;
      case '<':
        editor_.MoveTextStart();
        break;
      case '>':
        editor_.MoveTextEnd();
        break;
      case '\r':
      case '\n':
        editor_.InsertNewline();
        break;
      default:
        break;
    }
  }

  // The pasted text up to ESC [ 2 0 1 ~, inserted as it is: several lines are one message.
  void Paste() {
    std::string text;
    wint_t ch = 0;
    timeout(200);
    while (true) {
      const int kind = get_wch(&ch);
      if (kind == ERR) break;
      if (kind == KEY_CODE_YES) continue;
      if (ch == 27) {
        std::string seq;
        while (seq.size() < 5 && get_wch(&ch) == OK) seq += static_cast<char>(ch);
        if (seq == "[201~") break;
        continue;
      }
      if (ch == '\r') ch = '\n';
      tui::AppendUtf8(text, static_cast<char32_t>(ch));
    }
    timeout(50);
    editor_.Insert(text);
  }

  void Char(wchar_t ch) {
    if (ch != 3) quit_armed_ = false;
    if (rsearch_ && HistorySearchKey(false, static_cast<int>(ch))) return;
    if (ch == 27 && !find_typing_ && !find_.active()) {
      Escape();
      return;
    }
    if (FindKey(false, static_cast<int>(ch))) return;
    switch (ch) {
      case 3:
        CtrlC();
        return;  // Ctrl-C
      case 4:    // Ctrl-D
        if (editor_.empty() && !block_)
          quit_ = true;
        else
          editor_.DeleteAt();
        return;
      case 1:
        editor_.MoveLineStart();
        return;  // Ctrl-A
      case 5:
        editor_.MoveLineEnd();
        return;  // Ctrl-E
      case 2:
        editor_.MoveLeft();
        return;  // Ctrl-B
      case 6:    // Ctrl-F: find in the scrollback (Right moves the cursor)
        find_.Clear();
        find_typing_ = true;
        find_query_.clear();
        return;
      case 18:  // Ctrl-R: search the input history
        HistorySearchStart();
        return;
      case 23:
        editor_.DeleteWordBefore();
        return;  // Ctrl-W
      case 21:
        editor_.DeleteToLineStart();
        return;  // Ctrl-U
      case 11:
        editor_.DeleteToLineEnd();
        return;  // Ctrl-K
      case 25:
        editor_.Yank();
        return;  // Ctrl-Y
      case 12:
        clearok(curscr, TRUE);
        return;  // Ctrl-L
      case 9:
        Complete();
        return;  // Tab
      case 27:
        Escape();
        return;
      case 8:
      case 127:
        editor_.DeleteBefore();
        return;
      case '\r':
      case '\n':
        Submit();
        return;
      default:
        break;
    }
    if (ch < 32) return;
    std::string utf8;
    tui::AppendUtf8(utf8, static_cast<char32_t>(ch));
    editor_.Insert(utf8);
  }

  // ---- drawing

  void Rewrap() {
    for (Entry& e : entries_) e.SetWidth(TextWidth());
    scroll_ = std::min(scroll_, std::max(0, TotalLines() - ScrollRows()));
  }
  int InputRows() const { return std::min(5, std::max(1, editor_.line_count())); }
  int ScrollRows() const { return std::max(1, LINES - 2 - InputRows()); }
  int TotalLines() const {
    int n = 0;
    for (const Entry& e : entries_) n += static_cast<int>(std::max<size_t>(e.line_count(), 1)) + 1;
    return n;
  }
  // The scrollback's lines, top to bottom: each entry's, then a blank line.
  std::vector<ScreenLine> Lines() const {
    static const std::string kEmpty;
    std::vector<ScreenLine> all;
    for (const Entry& e : entries_) {
      if (e.md) {
        const auto& ls = e.md->lines();
        for (size_t i = 0; i < ls.size(); ++i) all.push_back({&ls[i], nullptr, e.role, i == 0});
      } else {
        const auto& ls = e.text.lines();
        for (size_t i = 0; i < ls.size(); ++i) all.push_back({nullptr, &ls[i], e.role, i == 0});
      }
      if (e.line_count() == 0) all.push_back({nullptr, &kEmpty, e.role, true});
      all.push_back({nullptr, &kEmpty, Entry::Role::kNotice, false});
    }
    return all;
  }

  tui::StatusFigures Status() const {
    const ChatFigures f = s_.figures();
    tui::StatusFigures t;
    t.state = f.state == ChatFigures::State::kIdle      ? tui::ChatState::kIdle
              : f.state == ChatFigures::State::kPrefill ? tui::ChatState::kPrefill
                                                        : tui::ChatState::kGenerating;
    t.prefill_percent = f.prefill_percent;
    if (f.reply_tokens > 1) t.tokens_per_s = f.tokens_per_s;
    if (f.ttft_s > 0) t.ttft_ms = f.ttft_s * 1000;
    t.ctx_tokens = f.ctx_tokens;
    t.ctx_size = f.ctx_size;
    t.reused_tokens = f.cached_tokens;
    if (f.kv_blocks_total > 0)
      t.kv_fill = static_cast<double>(f.kv_blocks_used) / f.kv_blocks_total;
    else if (f.ctx_size > 0)  // contiguous: the conversation's row
      t.kv_fill = static_cast<double>(f.ctx_tokens) / f.ctx_size;
    t.kv_bytes = f.kv_bytes_used;
    if (f.model_us_per_token > 0) t.mesh_us_per_tok = f.model_us_per_token;
    t.seed = f.seed;
    t.unsaved = f.save_warning;
    return t;
  }

  void DrawPanel(int x, int top, int rows, int width) {
    std::vector<std::string> lines;
    const LastAttention last = s_.last_attention();
    if (last.valid) {
      const MeshSpec mesh = MeshPreset(s_.run_options().mesh);
      tui::CoreGridFigures g = tui::CoreGridFromTrace(last.trace, 0, mesh.chip, last.kv_row_bytes);
      g.caption = Cat(g.caption.empty() ? "" : g.caption + " ", "layer ", last.layer);
      lines = tui::RenderCoreGrid(g, width);
    } else {
      lines.push_back(s_.run_options().attention == "flash" ? "Tensix 8x8: no attention yet"
                                                            : "reference attention: no mesh");
    }
    lines.push_back("");
    const ChatFigures f = s_.figures();
    tui::KVUsage kv;
    kv.blocks_used = f.kv_blocks_used;
    kv.blocks_total = f.kv_blocks_total;
    kv.format = f.kv_format;
    kv.bytes_used = f.kv_bytes_used;
    kv.bytes_total = f.kv_bytes_total;
    for (const std::string& l : tui::WrapText(tui::KVUsageLine(kv, 200), width)) lines.push_back(l);
    for (int i = 0; i < rows; ++i)
      PutLine(top + i, x, i < static_cast<int>(lines.size()) ? lines[i] : "", width,
              screen_->Text(kPanel));
  }

  void Draw() {
    erase();
    const int w = COLS, h = LINES;
    PutLine(0, 0, tui::TitleLine(title_, w), w, screen_->Bar(kTitle));
    const int input_rows = InputRows();
    const int status_y = h - 1 - input_rows;
    const int rows = std::max(1, status_y - 1);
    const int panel_w = PanelWidth();
    const int text_w = TextWidth();
    // The scrollback: the last `rows` lines above `scroll_` lines from the bottom.
    const std::vector<ScreenLine> all = Lines();
    if (find_.active()) find_.Refresh(tui::FindInLines(PlainLines(), find_.query()));
    const int end = static_cast<int>(all.size()) - scroll_;
    const int begin = std::max(0, end - rows);
    size_t m = 0;  // the first match at or after line `begin`
    const auto& matches = find_.matches();
    while (m < matches.size() && matches[m].line < begin) ++m;
    for (int i = begin; i < end; ++i) {
      const ScreenLine& l = all[i];
      const Pair p = l.role == Entry::Role::kUser     ? kUser
                     : l.role == Entry::Role::kNotice ? kNotice
                                                      : kPanel;
      const attr_t base = l.role == Entry::Role::kAssistant ? A_NORMAL : screen_->Text(p);
      const char* mark = !l.first ? "  " : l.role == Entry::Role::kUser ? "> " : "  ";
      const int y = 1 + (i - begin);
      PutLine(y, 0, mark, text_w + 2, base);
      // The line's spans, cut where /find's matches begin and end.
      std::vector<std::pair<size_t, size_t>> line_matches;
      std::vector<bool> line_current;
      for (size_t k = m; k < matches.size() && matches[k].line == i; ++k) {
        line_matches.emplace_back(matches[k].begin, matches[k].end);
        line_current.push_back(static_cast<int>(k) == find_.current_index());
      }
      move(y, 2);
      size_t at = 0;  // bytes of the line's plain text drawn
      auto draw = [&](const std::string& text, attr_t attr) {
        for (size_t b = 0; b < text.size();) {
          size_t e = text.size();
          attr_t a = attr;
          const size_t abs = at + b;
          for (size_t k = 0; k < line_matches.size(); ++k) {
            const auto [mb, me] = line_matches[k];
            if (abs >= mb && abs < me) {
              a = screen_->Match(line_current[k]);
              e = std::min(e, b + (me - abs));
            } else if (mb > abs) {
              e = std::min(e, b + (mb - abs));
            }
          }
          attrset(a);
          addnstr(text.data() + b, static_cast<int>(e - b));
          b = e;
        }
        at += text.size();
      };
      if (l.md != nullptr) {
        for (const tui::MdSpan& span : l.md->spans)
          draw(span.text, base | screen_->Span(span.style, span.syntax));
      } else {
        draw(*l.text, base);
      }
      attrset(A_NORMAL);
      while (m < matches.size() && matches[m].line == i) ++m;
    }
    if (scroll_ > 0)
      PutLine(rows, 0, Cat("-- ", scroll_, " lines below (PgDn, End) --"), text_w + 2, A_REVERSE);
    if (panel_w > 0) {
      attrset(A_DIM);
      for (int y = 1; y < status_y; ++y) mvaddstr(y, w - panel_w - 1, "│");
      attrset(A_NORMAL);
      DrawPanel(w - panel_w, 1, status_y - 1, panel_w);
    }
    PutLine(status_y, 0, tui::StatusLine(Status(), w), w, screen_->Bar(kStatus));
    if (find_typing_ || find_.active() || rsearch_) {
      // The find bar or Ctrl-R's line in place of the input.
      const std::string bar =
          rsearch_ ? HistorySearchLine()
          : find_typing_
              ? Cat("find: ", find_query_,
                    find_.active() ? Cat("  (", find_.matches().size(), " found; Enter walks them)")
                                   : "")
              : find_.Describe();
      for (int i = 0; i < input_rows; ++i)
        PutLine(status_y + 1 + i, 0, i == 0 ? bar : "", w, i == 0 ? A_BOLD : A_NORMAL);
      const int col = rsearch_       ? tui::DisplayWidth(HistorySearchLine())
                      : find_typing_ ? 6 + tui::DisplayWidth(find_query_)
                                     : 0;
      move(status_y + 1, std::min(w - 1, col));
      refresh();
      return;
    }
    // The input: "> " then the editor's view.
    const tui::EditorView v = editor_.Render(w - 2, input_rows);
    for (int i = 0; i < input_rows; ++i) {
      const std::string prefix = i == 0 ? (block_ ? "\" " : "> ") : "  ";
      PutLine(status_y + 1 + i, 0,
              prefix + (i < static_cast<int>(v.lines.size()) ? v.lines[i] : ""), w, A_NORMAL);
    }
    move(status_y + 1 + v.cursor_row, 2 + v.cursor_col);
    refresh();
  }

 public:
  Screen* screen_ = nullptr;

 private:
  ChatSession& s_;
  tui::History history_;
  tui::LineEditor editor_;
  tui::TitleInfo title_;
  std::vector<Entry> entries_;
  int reply_ = -1;                   // the entry a reply streams into
  std::vector<std::string> queued_;  // /load's user turns still to send
  int scroll_ = 0;                   // lines scrolled up from the bottom
  bool panel_ = false;
  bool panel_chosen_ = false;  // F2 or /mesh: until then the panel shows at >= 120 columns
  bool block_ = false;         // inside a """ block
  bool quit_armed_ = false;    // Ctrl-C once at an empty idle prompt
  bool quit_ = false;
  bool markdown_ = true;  // replies rendered (--render, /set render)
  bool opening_ = false;  // /open's re-prefill is running

  tui::FindWalk find_;        // /find's matches and the one shown
  bool find_typing_ = false;  // Ctrl-F: the find bar takes the keys
  std::string find_query_;    // what the find bar holds

  bool rsearch_ = false;  // Ctrl-R
  std::string rsearch_query_, rsearch_saved_;
  std::optional<size_t> rsearch_at_;  // the history entry matched
  bool rsearch_failed_ = false;

  std::mutex mu_;  // what the loop's thread hands over
  std::string pending_;
  bool done_ = false;
  std::condition_variable done_cv_;
  RequestResult result_;
};

}  // namespace

void RunChatTui(ChatSession& session, const ChatTuiOptions& options) {
  struct sigaction term {};
  term.sa_handler = OnTerminate;
  sigaction(SIGTERM, &term, nullptr);
  sigaction(SIGHUP, &term, nullptr);
  struct sigaction intr {};
  intr.sa_handler = OnInterrupt;
  sigaction(SIGINT, &intr, nullptr);
  Screen screen(options.mouse);
  ChatTui tui(session, options);
  tui.screen_ = &screen;
  tui.Run();
}

}  // namespace wc
