#include "app/tui/screen.h"

#include <cstdio>
#include <cstdlib>

#include "app/tui/markdown.h"
#include "app/tui/text_width.h"
#include "util/error.h"

namespace wc::tui {

Screen::Screen(bool mouse) {
  SetUtf8Locale();
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
Screen::~Screen() {
  std::fputs("\033[?2004l", stdout);
  std::fflush(stdout);
  endwin();
}
attr_t Screen::Bar(Pair p) const {
  return color_ ? COLOR_PAIR(p) : A_REVERSE;
}
attr_t Screen::Text(Pair p) const {
  if (!color_) return p == kUser ? A_BOLD : p == kNotice ? A_DIM : A_NORMAL;
  return COLOR_PAIR(p) | (p == kUser ? A_BOLD : A_NORMAL);
}
attr_t Screen::Span(uint16_t style, SyntaxClass syntax) const {
  attr_t a = A_NORMAL;
  if (style & kMdBold) a |= A_BOLD;
  if (style & kMdItalic) a |= A_ITALIC;
  if (style & kMdHeading) a |= A_BOLD | (color_ ? COLOR_PAIR(kHeading) : A_UNDERLINE);
  if (style & (kMdFrame | kMdQuote)) a |= color_ ? COLOR_PAIR(kFrame) : A_DIM;
  if (style & kMdLanguage) a |= A_BOLD;
  if (style & kMdCode) a |= color_ ? COLOR_PAIR(kCode) : A_UNDERLINE;
  if (!color_ || !(style & kMdCodeBlock)) return a;
  switch (syntax) {
    case SyntaxClass::kKeyword:
      return a | COLOR_PAIR(kKeyword) | A_BOLD;
    case SyntaxClass::kType:
      return a | COLOR_PAIR(kType);
    case SyntaxClass::kString:
      return a | COLOR_PAIR(kString);
    case SyntaxClass::kComment:
      return a | COLOR_PAIR(kComment);
    case SyntaxClass::kNumber:
      return a | COLOR_PAIR(kNumber);
    case SyntaxClass::kPreproc:
      return a | COLOR_PAIR(kPreproc);
    case SyntaxClass::kFunction:
      return a | A_BOLD;
    default:
      return a;
  }
}
attr_t Screen::Match(bool current) const {
  if (!color_) return current ? A_REVERSE | A_BOLD | A_UNDERLINE : A_REVERSE;
  return COLOR_PAIR(current ? kCurrentMatch : kMatch) | (current ? A_BOLD : A_NORMAL);
}

void PutLine(int y, int x, const std::string& text, int width, attr_t attr) {
  attrset(attr);
  const std::string fitted = FitWidth(text, width);
  mvaddstr(y, x, fitted.c_str());
  for (int i = DisplayWidth(fitted); i < width; ++i) addch(' ');
  attrset(A_NORMAL);
}

}  // namespace wc::tui
