// The chat's input line: UTF-8 text (possibly several lines, joined by '\n') and a cursor, with
// readline-style editing, and what to draw for a given width. No key decoding and no terminal: the
// front end maps keys to the methods (suggested bindings in each comment) and draws Render()'s
// lines.
//
// Characters are those of app/tui/text_width.h (a code point plus its combining marks; the locale
// requirement stated there applies). The text is always valid UTF-8 holding no control
// characters other than '\n' and '\t': Insert and SetText replace invalid bytes with U+FFFD (one
// per byte, so an invalid byte never takes a neighbour with it), turn "\r\n" and '\r' into '\n'
// and drop other control characters, as serving/text_stream.h does for the model's output. A tab
// is kept in the text and drawn as spaces to the next multiple of 8 columns of its line.
//
// "Line" below means a line of the text (between '\n's), not a screen row: the editor never wraps;
// a line wider than the view scrolls horizontally.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace wc::tui {

// What to draw: at most `max_lines` lines of the text around the cursor's line, each scrolled
// horizontally by the same `scroll_col` so the cursor is visible.
struct EditorView {
  std::vector<std::string> lines;  // each at most `width` columns; no control characters
  int cursor_row = 0;              // index into `lines`
  int cursor_col = 0;              // column in that row, in [0, width)
  int first_line = 0;              // index of lines[0] among the text's lines
  int scroll_col = 0;              // columns of every line hidden on the left
  int line_count = 1;              // lines in the whole text
};

class LineEditor {
 public:
  static constexpr int kTabWidth = 8;

  const std::string& text() const { return text_; }
  size_t cursor() const { return cursor_; }  // byte offset, always a character boundary
  bool empty() const { return text_.empty(); }
  int line_count() const;
  int cursor_line() const;  // 0-based line of the cursor
  // Display column of the cursor in its line (tabs expanded, wide characters 2).
  int cursor_column() const;

  // Replaces the text (history recall); the cursor goes to the end.
  void SetText(std::string_view text);
  // Returns the text and empties the editor (Enter). The kill buffer survives.
  std::string Take();
  void Clear();

  // Typed or pasted text at the cursor; the cursor ends after it.
  void Insert(std::string_view text);
  void InsertNewline();  // Alt-Enter

  // Moves return false (and change nothing) when the cursor cannot move.
  bool MoveLeft();       // Left, Ctrl-B: one character ('\n' counts as one)
  bool MoveRight();      // Right, Ctrl-F
  bool MoveLineStart();  // Home, Ctrl-A: start of the cursor's line
  bool MoveLineEnd();    // End, Ctrl-E: end of the cursor's line
  bool MoveWordLeft();   // Alt-B: to the start of the word before the cursor
  bool MoveWordRight();  // Alt-F: to the end of the word after the cursor
  // Up/Down within multi-line text, keeping the display column of the first vertical move (the
  // goal column). False on the first/last line: the front end then walks the history instead.
  bool MoveUp();
  bool MoveDown();
  bool MoveTextStart();  // Ctrl-Home, Alt-<
  bool MoveTextEnd();    // Ctrl-End, Alt->

  // Deletions return false when there was nothing to delete.
  bool DeleteBefore();  // Backspace: the character before the cursor
  bool DeleteAt();      // Delete, Ctrl-D: the character under the cursor
  // Ctrl-W (readline's unix-word-rubout): back over whitespace, then back to the previous
  // whitespace; the deleted text goes to the kill buffer.
  bool DeleteWordBefore();
  // Alt-D: forward like MoveWordRight, into the kill buffer.
  bool DeleteWordAfter();
  // Ctrl-U: from the start of the cursor's line to the cursor; at a line start, the '\n' before
  // it (joining the lines). Into the kill buffer.
  bool DeleteToLineStart();
  // Ctrl-K: from the cursor to the end of its line; at a line end, the '\n' after it (joining the
  // lines, as Emacs does). Into the kill buffer.
  bool DeleteToLineEnd();
  // Ctrl-Y: inserts the last killed text.
  bool Yank();
  const std::string& kill_buffer() const { return killed_; }

  // The view for a window `width` columns wide (>= 1) and `max_lines` rows high (>= 1):
  // max_lines = 1 shows the cursor's line only. Scrolling is sticky (not const): the window moves
  // only as far as needed to show the cursor, and back when the text leaves room.
  EditorView Render(int width, int max_lines = 1);

 private:
  size_t LineStart(size_t pos) const;
  size_t LineEnd(size_t pos) const;
  int ColumnOf(size_t line_start, size_t pos) const;  // display column of `pos` in its line
  size_t PosAtColumn(size_t line_start, int col) const;
  void Edit(size_t from, size_t to, std::string_view replacement, bool kill);
  bool SetCursor(size_t pos);
  void SnapCursor();
  std::string DrawLine(size_t line_start, int scroll, int width) const;

  std::string text_;
  size_t cursor_ = 0;
  std::string killed_;
  int goal_col_ = -1;  // display column kept by consecutive MoveUp/MoveDown; -1: none
  int scroll_col_ = 0, first_line_ = 0;
};

}  // namespace wc::tui
