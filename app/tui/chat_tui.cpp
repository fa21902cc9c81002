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
#include <string>
#include <vector>

#include "app/chat/clipboard.h"
#include "app/tui/core_grid.h"
#include "app/tui/history.h"
#include "app/tui/line_editor.h"
#include "app/tui/markdown.h"
#include "app/tui/screen.h"
#include "app/tui/scrollback.h"
#include "app/tui/search_bars.h"
#include "app/tui/status_line.h"
#include "app/tui/text_width.h"
#include "app/tui/wrap.h"
#include "util/error.h"

namespace wc {
namespace {

using tui::Pair;
using tui::PutLine;
using tui::Role;
using tui::Screen;
using tui::ScreenLine;

std::atomic<bool> g_terminate{false};  // SIGTERM, SIGHUP
std::atomic<bool> g_interrupt{false};  // SIGINT from outside (Ctrl-C itself arrives as a key)

void OnTerminate(int) {
  g_terminate.store(true);
}
void OnInterrupt(int) {
  g_interrupt.store(true);
}

// A character key as the search bars see it.
tui::BarKey BarKeyOf(wchar_t ch) {
  tui::BarKey k;
  switch (ch) {
    case 27:
      k.kind = tui::BarKey::kEscape;
      break;
    case 3:
      k.kind = tui::BarKey::kCtrlC;
      break;
    case 6:
      k.kind = tui::BarKey::kCtrlF;
      break;
    case 7:
      k.kind = tui::BarKey::kCtrlG;
      break;
    case 18:
      k.kind = tui::BarKey::kCtrlR;
      break;
    case 8:
    case 127:
      k.kind = tui::BarKey::kBackspace;
      break;
    case '\r':
    case '\n':
      k.kind = tui::BarKey::kEnter;
      break;
    default:
      k.kind = ch < 32 ? tui::BarKey::kControl : tui::BarKey::kChar;
      k.ch = static_cast<char32_t>(ch);
  }
  return k;
}

class ChatTui {
 public:
  ChatTui(ChatSession& session, const ChatTuiOptions& options)
      : s_(session), history_(tui::History::DefaultPath()), scrollback_(10, options.markdown) {
    panel_ = COLS >= 120;
    scrollback_.SetWidth(TextWidth());
    const ChatIdentity id = s_.identity();
    title_.model = id.model;
    title_.n_params = id.n_params;
    title_.dtype = id.dtype;
    title_.kv_format = id.kv_format;
    title_.mesh = id.mesh;
    Notice(Cat("wormchat: ", id.server.empty() ? id.model : Cat(id.model, " at ", id.server),
               id.ctx > 0 ? Cat(", context ", id.ctx) : std::string(), ", seed ",
               s_.settings().seed,
               ". Type a message and press Enter; /help lists the commands, F2 shows the ",
               id.server.empty() ? "mesh." : "server's figures."));
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
      if (!(kind == KEY_CODE_YES && (ch == KEY_RESIZE || ch == KEY_MOUSE))) note_.clear();
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

  int Add(Role role, const std::string& text) { return scrollback_.Add(role, text); }
  // The conversation's turns as they were (a resumed or opened chat).
  void ShowTurns() {
    for (const ConversationTurn& t : s_.turns()) {
      if (t.reset_before) Notice("(new conversation)");
      Add(Role::kUser, t.user);
      Add(Role::kAssistant, t.reply_text);
    }
  }
  void Notice(const std::string& text) { Add(Role::kNotice, text); }

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
    if (!text.empty() && reply_ >= 0) scrollback_.Append(reply_, text);
    if (!done) return;
    if (opening_) {  // /open's re-prefill has ended
      opening_ = false;
      Notice(s_.OpenedText(result));
      return;
    }
    if (result.reason == StopReason::kCancelled && reply_ >= 0)
      scrollback_.Append(reply_, " [cancelled]");
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
    Add(Role::kUser, message);
    reply_ = Add(Role::kAssistant, "");
    scroll_ = 0;
    try {
      s_.Send(message, OnText(), OnDone());
    } catch (const Error& e) {
      scrollback_.RemoveLast();
      reply_ = -1;
      Notice(e.what());
    }
  }

  // Erases the last exchange from the screen: from its user message (kept if `keep_user`) to the
  // end, notices after it included (none repeats what was removed).
  void EraseFromLastUser(bool keep_user) {
    scrollback_.EraseFromLastUser(keep_user);
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
    reply_ = Add(Role::kAssistant, "");
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
    scrollback_.Clear();
    queued_.clear();
    find_.Close();
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
      case ChatCommand::Kind::kCopy: {
        // The scrollback keeps what was sent and how to make a terminal take it; the status bar
        // says it until the next key, since no terminal answers an OSC 52.
        const std::string line = s_.Copy(c, STDOUT_FILENO);
        Notice(line);
        const size_t cut = line.find(" to the clipboard");
        note_ = line.rfind("copied ", 0) == 0 && cut != std::string::npos
                    ? line.substr(0, cut) + " by OSC 52"
                    : line.substr(0, line.find(':'));
        return;
      }
      case ChatCommand::Kind::kExport:
        Notice(s_.Export(c.path, c.value == 1));
        return;
      case ChatCommand::Kind::kOpen:
        Open(static_cast<int>(c.value));
        return;
      case ChatCommand::Kind::kFind:
        find_.Find(c.text, PlainLines());
        ShowMatch();
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
          scrollback_.SetMarkdown(c.value == 1);
          Rewrap();
          Notice(Cat("(replies shown as ",
                     scrollback_.markdown() ? "rendered markdown" : "plain text", ")"));
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

  // ---- /find, Ctrl-F and Ctrl-R (app/tui/search_bars.h)

  std::vector<std::string> PlainLines() const {
    std::vector<std::string> out;
    for (const ScreenLine& l : Lines()) out.push_back(l.Plain());
    return out;
  }
  void ShowMatch() {
    if (const tui::ScrollMatch* m = find_.walk().current()) ScrollTo(m->line);
  }
  // A key for the search bar that is open, if one is: true if it used it.
  bool SearchKey(const tui::BarKey& key) {
    if (rsearch_.active()) {
      const tui::HistorySearch::Result r = rsearch_.Key(key, history_.entries());
      if (!rsearch_.active()) {
        history_.EndWalk();
        editor_.SetText(rsearch_.line());
        if (r.send) Submit();
      }
      return r.used;
    }
    if (!find_.shown()) return false;
    const bool used = find_.Key(key, [this] { return PlainLines(); });
    if (used) ShowMatch();
    return used;
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
      tui::BarKey k;
      k.kind = key == KEY_BACKSPACE ? tui::BarKey::kBackspace
               : key == KEY_ENTER   ? tui::BarKey::kEnter
                                    : tui::BarKey::kFunction;
      if (SearchKey(k)) return;
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
    if ((rsearch_.active() || find_.shown()) && SearchKey(BarKeyOf(ch))) return;
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
        find_.Open();
        return;
      case 18:  // Ctrl-R: search the input history
        rsearch_.Start(editor_.text());
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
    scrollback_.SetWidth(TextWidth());
    scroll_ = std::min(scroll_, std::max(0, TotalLines() - ScrollRows()));
  }
  int InputRows() const { return std::min(5, std::max(1, editor_.line_count())); }
  int ScrollRows() const { return std::max(1, LINES - 2 - InputRows()); }
  int TotalLines() const { return scrollback_.line_count(); }
  std::vector<ScreenLine> Lines() const { return scrollback_.Lines(); }

  tui::StatusFigures Status() const {
    const ChatFigures f = s_.figures();
    tui::StatusFigures t;
    t.state = f.state == ChatFigures::State::kIdle      ? tui::ChatState::kIdle
              : f.state == ChatFigures::State::kPrefill ? tui::ChatState::kPrefill
                                                        : tui::ChatState::kGenerating;
    t.prefill_percent = f.prefill_percent;
    if (f.reply_tokens > 1) t.tokens_per_s = f.tokens_per_s;
    if (f.tokens_per_step > 0) t.tokens_per_step = f.tokens_per_step;
    if (f.ttft_s > 0) t.ttft_ms = f.ttft_s * 1000;
    t.ctx_tokens = f.ctx_tokens;
    t.ctx_size = f.ctx_size;
    t.reused_tokens = f.cached_tokens;
    if (!f.kv_known) {  // a server that sends no KV figures: left out
    } else if (f.kv_blocks_total > 0) {
      t.kv_fill = static_cast<double>(f.kv_blocks_used) / f.kv_blocks_total;
    } else if (f.ctx_size > 0) {  // contiguous: the conversation's row
      t.kv_fill = static_cast<double>(f.ctx_tokens) / f.ctx_size;
    }
    if (f.kv_known) t.kv_bytes = f.kv_bytes_used;
    t.unavailable = f.remote_note;
    if (f.model_us_per_token > 0) t.mesh_us_per_tok = f.model_us_per_token;
    t.mesh_estimated = f.model_us_estimated;
    t.seed = f.seed;
    t.unsaved = f.save_warning;
    t.note = note_;
    return t;
  }

  void DrawPanel(int x, int top, int rows, int width) {
    std::vector<std::string> lines;
    const LastAttention last = s_.last_attention();
    const ChatIdentity id = s_.identity();
    if (last.valid) {
      const MeshSpec mesh = MeshPreset(id.mesh);
      tui::CoreGridFigures g = tui::CoreGridFromTrace(last.trace, 0, mesh.chip, last.kv_row_bytes);
      g.caption = Cat(g.caption.empty() ? "" : g.caption + " ", "layer ", last.layer);
      lines = tui::RenderCoreGrid(g, width);
    } else {
      lines.push_back(!id.server.empty() ? "the mesh panel needs the model in this process: not "
                                           "available from a server"
                      : id.flash         ? "Tensix 8x8: no attention yet"
                                         : "reference attention: no mesh");
    }
    lines.push_back("");
    const ChatFigures f = s_.figures();
    if (!f.panel_text.empty()) {  // a server's chat: its figures, or what it cannot show
      for (const std::string& l : tui::WrapText(f.panel_text, width)) lines.push_back(l);
      for (int i = 0; i < rows; ++i)
        PutLine(top + i, x, i < static_cast<int>(lines.size()) ? lines[i] : "", width,
                screen_->Text(tui::kPanel));
      return;
    }
    tui::KVUsage kv;
    kv.blocks_used = f.kv_blocks_used;
    kv.blocks_total = f.kv_blocks_total;
    kv.format = f.kv_format;
    kv.bytes_used = f.kv_bytes_used;
    kv.bytes_total = f.kv_bytes_total;
    for (const std::string& l : tui::WrapText(tui::KVUsageLine(kv, 200), width)) lines.push_back(l);
    for (int i = 0; i < rows; ++i)
      PutLine(top + i, x, i < static_cast<int>(lines.size()) ? lines[i] : "", width,
              screen_->Text(tui::kPanel));
  }

  void Draw() {
    erase();
    const int w = COLS, h = LINES;
    PutLine(0, 0, tui::TitleLine(title_, w), w, screen_->Bar(tui::kTitle));
    const int input_rows = InputRows();
    const int status_y = h - 1 - input_rows;
    const int rows = std::max(1, status_y - 1);
    const int panel_w = PanelWidth();
    const int text_w = TextWidth();
    // The scrollback: the last `rows` lines above `scroll_` lines from the bottom.
    const std::vector<ScreenLine> all = Lines();
    if (find_.walk().active() && find_version_ != scrollback_.version()) {
      find_.Refresh(PlainLines());  // new text or a new wrap: the matches move
      find_version_ = scrollback_.version();
    }
    const int end = static_cast<int>(all.size()) - scroll_;
    const int begin = std::max(0, end - rows);
    size_t m = 0;  // the first match at or after line `begin`
    const auto& matches = find_.walk().matches();
    while (m < matches.size() && matches[m].line < begin) ++m;
    for (int i = begin; i < end; ++i) {
      const ScreenLine& l = all[i];
      const Pair p = l.role == Role::kUser     ? tui::kUser
                     : l.role == Role::kNotice ? tui::kNotice
                                               : tui::kPanel;
      const attr_t base = l.role == Role::kAssistant ? A_NORMAL : screen_->Text(p);
      const char* mark = !l.first ? "  " : l.role == Role::kUser ? "> " : "  ";
      const int y = 1 + (i - begin);
      PutLine(y, 0, mark, text_w + 2, base);
      // The line's spans, cut where /find's matches begin and end.
      std::vector<std::pair<size_t, size_t>> line_matches;
      std::vector<bool> line_current;
      for (size_t k = m; k < matches.size() && matches[k].line == i; ++k) {
        line_matches.emplace_back(matches[k].begin, matches[k].end);
        line_current.push_back(static_cast<int>(k) == find_.walk().current_index());
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
    PutLine(status_y, 0, tui::StatusLine(Status(), w), w, screen_->Bar(tui::kStatus));
    if (find_.shown() || rsearch_.active()) {  // a search bar in place of the input
      const std::string bar = rsearch_.active() ? rsearch_.text(history_.entries()) : find_.text();
      for (int i = 0; i < input_rows; ++i)
        PutLine(status_y + 1 + i, 0, i == 0 ? bar : "", w, i == 0 ? A_BOLD : A_NORMAL);
      const int col = rsearch_.active() ? tui::DisplayWidth(bar) : find_.cursor_column();
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
  tui::Scrollback scrollback_;
  int reply_ = -1;                   // the entry a reply streams into
  std::vector<std::string> queued_;  // /load's user turns still to send
  int scroll_ = 0;                   // lines scrolled up from the bottom
  bool panel_ = false;
  bool panel_chosen_ = false;  // F2 or /mesh: until then the panel shows at >= 120 columns
  bool block_ = false;         // inside a """ block
  bool quit_armed_ = false;    // Ctrl-C once at an empty idle prompt
  bool quit_ = false;
  bool opening_ = false;  // /open's re-prefill is running

  std::string note_;  // the status bar's passing message (/copy's), until the next key
  tui::FindBar find_;
  uint64_t find_version_ =
      0;  // the scrollback's version the find bar's matches are of           // /find, Ctrl-F
  tui::HistorySearch rsearch_;  // Ctrl-R

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
