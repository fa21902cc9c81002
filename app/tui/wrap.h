// Word wrap of UTF-8 text to a width in terminal columns, for the scrollback (user turns and the
// replies streaming in). Characters and widths are those of app/tui/text_width.h (wcwidth: the
// locale requirement stated there applies).
//
// Rules, per paragraph (the text between explicit '\n's; each gives at least one line, so "" and
// "a\n" wrap to one and two lines):
//  - Lines break at spaces where possible; the spaces at a break are dropped, and continuation
//    lines never start with a space. A paragraph's leading spaces (indentation) are kept, cut down
//    if the first word would not fit after them.
//  - A word wider than the width starts where it is and is hard-broken at the edge, as a terminal
//    would; a word that fits the width but not the rest of the line moves to the next line.
//  - A character is never split, and a wide character that would straddle the right edge goes to
//    the next line (that line is one column short). At width 1 a wide character becomes U+FFFD.
//  - Tabs become spaces up to the next multiple of `tab_width` columns of the line, and are break
//    points like spaces.
//  - Output is safe to print: invalid UTF-8 bytes become U+FFFD, '\r' and other control
//    characters are dropped.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace wc::tui {

// `text` wrapped to `width` (>= 1) columns: every line at most `width` columns.
std::vector<std::string> WrapText(std::string_view text, int width, int tab_width = 8);

// A growing text and its wrapped lines, for a reply that streams in: Append re-wraps only the last
// (unfinished) paragraph, so streaming a reply costs O(its last paragraph) per chunk. lines()
// always equals WrapText(text(), width) (with an unfinished UTF-8 character at the very end left
// out until it completes).
class WrappedText {
 public:
  explicit WrappedText(int width, int tab_width = 8);

  void Append(std::string_view chunk);
  void Clear();
  // Re-wraps everything (a terminal resize).
  void SetWidth(int width);

  const std::string& text() const { return text_; }
  const std::vector<std::string>& lines() const { return lines_; }
  int width() const { return width_; }

 private:
  void WrapOpen();

  int width_, tab_width_;
  std::string text_;
  size_t open_start_ = 0;  // byte offset of the last paragraph in text_
  size_t open_line_ = 0;   // index in lines_ of its first line
  std::vector<std::string> lines_;
};

}  // namespace wc::tui
