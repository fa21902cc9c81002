// The terminal in curses mode (ncursesw) for the full-screen chat: the one place that sets the
// terminal up and maps what is drawn - bars, text roles, rendered markdown spans, /find matches -
// to curses attributes, in colour or (NO_COLOR, a monochrome terminal) without.
#pragma once

#include <curses.h>

#include <cstdint>
#include <string>

#include "app/tui/syntax_highlight.h"

namespace wc::tui {

// The colour pairs the chat draws with.
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
// alternate screen, and (with `mouse`) the wheel's events; restored by the destructor on every
// path out. Throws wc::Error when the terminal cannot be started.
class Screen {
 public:
  explicit Screen(bool mouse);
  ~Screen();
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  // A bar's attributes (reverse video without colours).
  attr_t Bar(Pair p) const;
  // A text role's (kUser, kNotice, kPanel).
  attr_t Text(Pair p) const;
  // A rendered span's (app/tui/markdown.h's MdStyle bits and syntax class). Without colours the
  // structure stays: bold, italic, underlined headings and inline code, dim frames.
  attr_t Span(uint16_t style, SyntaxClass syntax) const;
  // A /find match's: the current one stands out from the others (reverse video without colours).
  attr_t Match(bool current) const;

 private:
  bool color_ = false;
};

// Draws `text` at (y, x), cut to `width` columns and padded with spaces to it, in `attr`.
void PutLine(int y, int x, const std::string& text, int width, attr_t attr);

}  // namespace wc::tui
