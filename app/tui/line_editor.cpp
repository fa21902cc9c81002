#include "app/tui/line_editor.h"

#include <algorithm>
#include <cwctype>

#include "app/tui/text_width.h"
#include "serving/text_stream.h"
#include "util/error.h"

namespace wc::tui {
namespace {

// "\r\n" and '\r' to '\n', then the text policy of the model's output: invalid bytes to U+FFFD,
// other control characters dropped.
std::string CleanInput(std::string_view in) {
  std::string s;
  s.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\r') {
      s += in[i];
    } else if (i + 1 >= in.size() || in[i + 1] != '\n') {
      s += '\n';
    }
  }
  return SanitizeUtf8(s);
}

// Columns of the character [i, next) of `s` starting at column `col` of its line.
int CharColumns(std::string_view s, size_t i, size_t next, int col) {
  if (s[i] == '\t') return LineEditor::kTabWidth - col % LineEditor::kTabWidth;
  int w = 0;
  for (size_t k = i; k < next;) {
    const CodePoint d = DecodeAt(s, k);
    w += CodePointWidth(d.cp);
    k += d.len;
  }
  return w;
}

bool IsWordChar(std::string_view s, size_t i) {
  const CodePoint d = DecodeAt(s, i);
  return d.valid && std::iswalnum(static_cast<wint_t>(d.cp));
}

bool IsSpaceChar(std::string_view s, size_t i) {
  const CodePoint d = DecodeAt(s, i);
  return d.valid && std::iswspace(static_cast<wint_t>(d.cp));
}

}  // namespace

int LineEditor::line_count() const {
  return 1 + static_cast<int>(std::count(text_.begin(), text_.end(), '\n'));
}

int LineEditor::cursor_line() const {
  return static_cast<int>(std::count(text_.begin(), text_.begin() + cursor_, '\n'));
}

int LineEditor::cursor_column() const {
  return ColumnOf(LineStart(cursor_), cursor_);
}

void LineEditor::SetText(std::string_view text) {
  text_ = CleanInput(text);
  cursor_ = text_.size();
  goal_col_ = -1;
}

std::string LineEditor::Take() {
  std::string out = std::move(text_);
  Clear();
  return out;
}

void LineEditor::Clear() {
  text_.clear();
  cursor_ = 0;
  goal_col_ = -1;
  scroll_col_ = first_line_ = 0;
}

void LineEditor::Insert(std::string_view text) {
  const std::string clean = CleanInput(text);
  if (!clean.empty()) Edit(cursor_, cursor_, clean, false);
}

void LineEditor::InsertNewline() {
  Edit(cursor_, cursor_, "\n", false);
}

bool LineEditor::MoveLeft() {
  return cursor_ > 0 && SetCursor(PrevChar(text_, cursor_));
}

bool LineEditor::MoveRight() {
  return cursor_ < text_.size() && SetCursor(NextChar(text_, cursor_));
}

bool LineEditor::MoveLineStart() {
  return SetCursor(LineStart(cursor_));
}

bool LineEditor::MoveLineEnd() {
  return SetCursor(LineEnd(cursor_));
}

bool LineEditor::MoveWordLeft() {
  size_t p = cursor_;
  while (p > 0 && !IsWordChar(text_, PrevChar(text_, p))) p = PrevChar(text_, p);
  while (p > 0 && IsWordChar(text_, PrevChar(text_, p))) p = PrevChar(text_, p);
  return SetCursor(p);
}

bool LineEditor::MoveWordRight() {
  size_t p = cursor_;
  while (p < text_.size() && !IsWordChar(text_, p)) p = NextChar(text_, p);
  while (p < text_.size() && IsWordChar(text_, p)) p = NextChar(text_, p);
  return SetCursor(p);
}

bool LineEditor::MoveUp() {
  const size_t ls = LineStart(cursor_);
  if (ls == 0) return false;
  if (goal_col_ < 0) goal_col_ = ColumnOf(ls, cursor_);
  cursor_ = PosAtColumn(LineStart(ls - 1), goal_col_);
  return true;
}

bool LineEditor::MoveDown() {
  const size_t le = LineEnd(cursor_);
  if (le == text_.size()) return false;
  if (goal_col_ < 0) goal_col_ = ColumnOf(LineStart(cursor_), cursor_);
  cursor_ = PosAtColumn(le + 1, goal_col_);
  return true;
}

bool LineEditor::MoveTextStart() {
  return SetCursor(0);
}

bool LineEditor::MoveTextEnd() {
  return SetCursor(text_.size());
}

bool LineEditor::DeleteBefore() {
  if (cursor_ == 0) return false;
  Edit(PrevChar(text_, cursor_), cursor_, "", false);
  return true;
}

bool LineEditor::DeleteAt() {
  if (cursor_ == text_.size()) return false;
  Edit(cursor_, NextChar(text_, cursor_), "", false);
  return true;
}

bool LineEditor::DeleteWordBefore() {
  size_t p = cursor_;
  while (p > 0 && IsSpaceChar(text_, PrevChar(text_, p))) p = PrevChar(text_, p);
  while (p > 0 && !IsSpaceChar(text_, PrevChar(text_, p))) p = PrevChar(text_, p);
  if (p == cursor_) return false;
  Edit(p, cursor_, "", true);
  return true;
}

bool LineEditor::DeleteWordAfter() {
  const size_t from = cursor_;
  size_t p = cursor_;
  while (p < text_.size() && !IsWordChar(text_, p)) p = NextChar(text_, p);
  while (p < text_.size() && IsWordChar(text_, p)) p = NextChar(text_, p);
  if (p == from) return false;
  Edit(from, p, "", true);
  return true;
}

bool LineEditor::DeleteToLineStart() {
  if (cursor_ == 0) return false;
  const size_t ls = LineStart(cursor_);
  Edit(ls == cursor_ ? cursor_ - 1 : ls, cursor_, "", true);
  return true;
}

bool LineEditor::DeleteToLineEnd() {
  if (cursor_ == text_.size()) return false;
  const size_t le = LineEnd(cursor_);
  const size_t from = cursor_;
  Edit(from, le == from ? from + 1 : le, "", true);
  return true;
}

bool LineEditor::Yank() {
  if (killed_.empty()) return false;
  const std::string text = killed_;
  Edit(cursor_, cursor_, text, false);
  return true;
}

EditorView LineEditor::Render(int width, int max_lines) {
  WC_CHECK(width >= 1 && max_lines >= 1, "width ", width, ", max_lines ", max_lines);
  std::vector<size_t> starts{0};  // byte offset of each line
  for (size_t i = 0; i < text_.size(); ++i) {
    if (text_[i] == '\n') starts.push_back(i + 1);
  }
  const int n_lines = static_cast<int>(starts.size());
  const int line = cursor_line();
  first_line_ = std::min(first_line_, line);
  first_line_ = std::max(first_line_, line - max_lines + 1);
  first_line_ = std::min(first_line_, std::max(0, n_lines - max_lines));

  // Horizontal: the whole character under the cursor (one cell at a line end) must show.
  const size_t ls = starts[line];
  const int col = ColumnOf(ls, cursor_);
  const size_t le = LineEnd(cursor_);
  int cell = 1;
  if (cursor_ < le) cell = CharColumns(text_, cursor_, NextChar(text_, cursor_), col);
  cell = std::clamp(cell, 1, width);
  const int line_width = ColumnOf(ls, le);
  scroll_col_ = std::min(scroll_col_, col);
  scroll_col_ = std::max(scroll_col_, col + cell - width);
  scroll_col_ = std::min(scroll_col_, std::max(0, line_width + 1 - width));
  scroll_col_ = std::max(scroll_col_, 0);

  EditorView v;
  v.first_line = first_line_;
  v.scroll_col = scroll_col_;
  v.line_count = n_lines;
  v.cursor_row = line - first_line_;
  v.cursor_col = col - scroll_col_;
  for (int l = first_line_; l < std::min(n_lines, first_line_ + max_lines); ++l) {
    v.lines.push_back(DrawLine(starts[l], scroll_col_, width));
  }
  return v;
}

size_t LineEditor::LineStart(size_t pos) const {
  if (pos == 0) return 0;
  const size_t k = text_.rfind('\n', pos - 1);
  return k == std::string::npos ? 0 : k + 1;
}

size_t LineEditor::LineEnd(size_t pos) const {
  const size_t k = text_.find('\n', pos);
  return k == std::string::npos ? text_.size() : k;
}

int LineEditor::ColumnOf(size_t line_start, size_t pos) const {
  int col = 0;
  for (size_t i = line_start; i < pos;) {
    const size_t next = NextChar(text_, i);
    col += CharColumns(text_, i, next, col);
    i = next;
  }
  return col;
}

size_t LineEditor::PosAtColumn(size_t line_start, int goal) const {
  const size_t le = LineEnd(line_start);
  int col = 0;
  size_t i = line_start;
  while (i < le) {
    const size_t next = NextChar(text_, i);
    const int w = CharColumns(text_, i, next, col);
    if (col + w > goal) break;
    col += w;
    i = next;
  }
  return i;
}

void LineEditor::Edit(size_t from, size_t to, std::string_view replacement, bool kill) {
  if (kill) killed_ = text_.substr(from, to - from);
  text_.replace(from, to - from, replacement);
  cursor_ = from + replacement.size();
  goal_col_ = -1;
  SnapCursor();
}

bool LineEditor::SetCursor(size_t pos) {
  goal_col_ = -1;
  if (pos == cursor_) return false;
  cursor_ = pos;
  return true;
}

void LineEditor::SnapCursor() {
  // An edit can leave combining marks right after the cursor that now join the character before
  // it (a base inserted before a lone mark, a '\n' deleted before one): step over them.
  while (!IsCharBoundary(text_, cursor_)) cursor_ += DecodeAt(text_, cursor_).len;
}

std::string LineEditor::DrawLine(size_t line_start, int scroll, int width) const {
  const size_t le = LineEnd(line_start);
  const int right = scroll + width;
  std::string out;
  int col = 0;
  for (size_t i = line_start; i < le && col < right;) {
    const size_t next = NextChar(text_, i);
    const int w = CharColumns(text_, i, next, col);
    if (col >= scroll && col + w <= right && text_[i] != '\t') {
      out.append(text_, i, next - i);
    } else {
      // A tab, or a character cut by an edge of the window: spaces for its visible columns.
      const int visible = std::min(col + w, right) - std::max(col, scroll);
      if (visible > 0) out.append(static_cast<size_t>(visible), ' ');
    }
    col += w;
    i = next;
  }
  return out;
}

}  // namespace wc::tui
