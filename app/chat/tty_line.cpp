#include "app/chat/tty_line.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "app/tui/text_width.h"
#include "util/error.h"

namespace wc {
namespace {

constexpr unsigned char kCtrlD = 0x04, kCtrlH = 0x08, kCtrlU = 0x15, kCtrlW = 0x17, kEsc = 0x1b,
                        kDel = 0x7f;

// Bytes a UTF-8 sequence starting with `lead` takes; 1 for a byte that cannot start one.
int SequenceLength(unsigned char lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 1;
}

bool IsBlank(const std::string& text, size_t offset) {
  return text[offset] == ' ' || text[offset] == '\t';
}

}  // namespace

TtyLine::TtyLine(std::string prompt, int columns, int rows)
    : prompt_(std::move(prompt)), columns_(std::max(1, columns)), rows_(std::max(1, rows)) {
  const int width = tui::DisplayWidth(prompt_);
  prompt_row_ = width / columns_;  // a prompt wider than the terminal (never in practice)
  prompt_col_ = width % columns_;
  row_ = prompt_row_;
  col_ = prompt_col_;
}

TtyLine::Event TtyLine::Feed(unsigned char byte, std::string& echo) {
  if (escape_ == 1) {  // ESC [ ... or ESC O x: a key's sequence; ESC x: Alt-x
    escape_ = (byte == '[' || byte == 'O') ? 2 : 0;
    return Event::kMore;
  }
  if (escape_ == 2) {
    if (byte >= 0x40 && byte <= 0x7e) escape_ = 0;  // the final byte
    return Event::kMore;
  }
  if (!pending_.empty()) {
    if (byte >= 0x80 && byte <= 0xBF) {
      pending_ += static_cast<char>(byte);
      if (static_cast<int>(pending_.size()) < SequenceLength(pending_[0])) return Event::kMore;
      Append(pending_, echo);
      pending_.clear();
      return Event::kMore;
    }
    Append(pending_, echo);  // cut short: shown as U+FFFD, then this byte on its own
    pending_.clear();
  }
  if (byte >= 0x80) {
    if (SequenceLength(byte) == 1) {
      Append(std::string(1, static_cast<char>(byte)), echo);
    } else {
      pending_.assign(1, static_cast<char>(byte));
    }
    return Event::kMore;
  }
  switch (byte) {
    case '\r':
    case '\n':
      echo += "\r\n";
      return Event::kLine;
    case kCtrlD:
      if (!text_.empty()) return Event::kMore;
      echo += "\r\n";
      return Event::kEof;
    case kDel:
    case kCtrlH:
      if (!chars_.empty()) EraseTo(chars_.size() - 1, echo);
      return Event::kMore;
    case kCtrlU:
      EraseTo(0, echo);
      return Event::kMore;
    case kCtrlW: {
      size_t n = chars_.size();
      while (n > 0 && IsBlank(text_, chars_[n - 1].offset)) --n;
      while (n > 0 && !IsBlank(text_, chars_[n - 1].offset)) --n;
      EraseTo(n, echo);
      return Event::kMore;
    }
    case kEsc:
      escape_ = 1;
      return Event::kMore;
    case '\t': {
      const int col = col_ >= columns_ ? 0 : col_;
      const int spaces = std::max(1, std::min(8 - col % 8, columns_ - col));
      Insert("\t", spaces, echo, std::string(static_cast<size_t>(spaces), ' '));
      return Event::kMore;
    }
    default:
      if (byte >= 0x20) Append(std::string(1, static_cast<char>(byte)), echo);
      return Event::kMore;  // other control bytes are ignored
  }
}

void TtyLine::Append(const std::string& bytes, std::string& echo) {
  const tui::CodePoint cp = tui::DecodeAt(bytes, 0);
  if (!cp.valid || cp.len != static_cast<int>(bytes.size())) {
    Insert(bytes, 1, echo, std::string(tui::kReplacementUtf8));
    return;
  }
  if (tui::IsZeroWidth(cp.cp)) {
    if (chars_.empty()) {  // nothing to join (it would join the prompt): shown as U+FFFD
      Insert(bytes, 1, echo, std::string(tui::kReplacementUtf8));
      return;
    }
    // Joins the character before it. Terminals differ in which cell a mark joins once the cursor
    // has moved (after an erase, at the start of a row): the character is shown again with it.
    text_ += bytes;
    chars_.back().shown += bytes;
    ShowLast(echo);
    return;
  }
  Insert(bytes, tui::CodePointWidth(cp.cp), echo, bytes);
}

void TtyLine::Insert(const std::string& bytes, int width, std::string& echo,
                     const std::string& shown) {
  Char c{text_.size(), row_, col_, width, shown};
  if (col_ + width > columns_) {  // the terminal wraps it to the next row
    c.row = row_ + 1;
    c.col = 0;
  }
  chars_.push_back(c);
  text_ += bytes;
  echo += shown;
  row_ = c.row;
  col_ = c.col + width;  // == columns_: at the margin, the wrap pending
}

void TtyLine::EraseTo(size_t n_chars, std::string& echo) {
  if (n_chars >= chars_.size()) return;
  const int to_row = n_chars > 0 ? chars_[n_chars - 1].row : prompt_row_;
  if (row_ - to_row >= rows_ - 1) {
    // The place is scrolled off the screen, where the cursor cannot go: start a fresh prompt
    // line below with what is kept.
    const std::string kept = text_.substr(0, chars_[n_chars].offset);
    text_.clear();
    chars_.clear();
    echo += "\r\n" + prompt_;
    row_ = prompt_row_;
    col_ = prompt_col_;
    for (unsigned char b : kept) Feed(b, echo);
    return;
  }
  text_.resize(chars_[n_chars].offset);
  chars_.resize(n_chars);
  if (n_chars == 0) {
    MoveTo(prompt_row_, prompt_col_, echo);
    echo += "\x1b[J";  // clear to the end of the screen
  } else {
    ShowLast(echo);
  }
}

void TtyLine::ShowLast(std::string& echo) {
  // Printing the last character again from its start (rather than placing the cursor after it)
  // leaves the terminal exactly as typing it did, the pending wrap at the margin included.
  const Char& last = chars_.back();
  MoveTo(last.row, last.col, echo);
  echo += "\x1b[J" + last.shown;
  col_ = last.col + last.width;
}

void TtyLine::MoveTo(int row, int col, std::string& echo) {
  if (row_ > row) echo += Cat("\x1b[", row_ - row, "A");
  echo += '\r';
  if (col > 0) echo += Cat("\x1b[", col, "C");
  row_ = row;
  col_ = col;
}

// ---- The terminal ----

namespace {

// What RestoreTtyFromSignal needs, set while ReadTtyLine runs.
struct termios g_saved;
volatile sig_atomic_t g_saved_fd = -1;

void OnEndingSignal(int sig) {
  RestoreTtyFromSignal();
  signal(sig, SIG_DFL);
  raise(sig);
}

// Bytes read past the end of the last line (a paste of several lines): the next lines.
std::string& Unread() {
  static std::string unread;
  return unread;
}

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the terminal is gone: nothing more to show
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void RestoreTtyFromSignal() {
  const int fd = g_saved_fd;
  if (fd >= 0) tcsetattr(fd, TCSANOW, &g_saved);
}

bool ReadTtyLine(int fd, const std::string& prompt, std::string& line, const std::string& initial) {
  struct termios old;
  if (tcgetattr(fd, &old) != 0) throw Error("chat: standard input is not a terminal");
  std::fflush(stdout);
  // Echo goes to the terminal itself, as the kernel's does (stdout may be a file).
  int echo_fd = -1;
  if (const char* name = ttyname(fd)) echo_fd = open(name, O_WRONLY | O_NOCTTY | O_CLOEXEC);
  const int out_fd = echo_fd >= 0 ? echo_fd : fd;
  struct winsize ws {};
  int columns = 80, rows = 24;
  if (ioctl(out_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    columns = ws.ws_col;
    rows = ws.ws_row;
  }

  struct termios raw = old;
  raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO | IEXTEN);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  g_saved = old;
  g_saved_fd = fd;
  struct sigaction ending {
  }, old_term{}, old_hup{}, old_quit{};
  ending.sa_handler = OnEndingSignal;
  sigaction(SIGTERM, &ending, &old_term);
  sigaction(SIGHUP, &ending, &old_hup);
  sigaction(SIGQUIT, &ending, &old_quit);
  tcsetattr(fd, TCSANOW, &raw);

  TtyLine editor(prompt, columns, rows);
  WriteAll(out_fd, prompt);
  TtyLine::Event event = TtyLine::Event::kMore;
  {
    std::string echo;  // the initial text, as typed (its newlines and controls are not Enter)
    for (unsigned char byte : initial)
      if (byte >= 0x20 || byte == '\t') editor.Feed(byte, echo);
    WriteAll(out_fd, echo);
  }
  std::string& unread = Unread();
  while (event == TtyLine::Event::kMore) {
    if (unread.empty()) {
      char buf[4096];
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        event = editor.text().empty() ? TtyLine::Event::kEof : TtyLine::Event::kLine;
        break;
      }
      unread.assign(buf, static_cast<size_t>(n));
    }
    std::string echo;
    size_t used = 0;
    while (used < unread.size() && event == TtyLine::Event::kMore)
      event = editor.Feed(static_cast<unsigned char>(unread[used++]), echo);
    unread.erase(0, used);
    WriteAll(out_fd, echo);
  }

  tcsetattr(fd, TCSANOW, &old);
  g_saved_fd = -1;
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  if (echo_fd >= 0) close(echo_fd);
  line = editor.text();
  return event == TtyLine::Event::kLine;
}

}  // namespace wc
