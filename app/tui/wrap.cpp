#include "app/tui/wrap.h"

#include <algorithm>

#include "app/tui/text_width.h"
#include "serving/text_stream.h"
#include "util/error.h"

namespace wc::tui {
namespace {

// One character of a paragraph, made safe to print.
struct Cell {
  enum Kind { kSpace, kTab, kWord } kind = kWord;
  std::string bytes;  // kWord only
  int width = 0;      // kWord only
};

std::vector<Cell> Cells(std::string_view para) {
  std::vector<Cell> cells;
  for (size_t i = 0; i < para.size();) {
    const size_t next = NextChar(para, i);
    Cell c;
    if (para[i] == ' ') {
      c.kind = Cell::kSpace;
    } else if (para[i] == '\t') {
      c.kind = Cell::kTab;
    } else {
      c.width += AppendPrintable(para, i, next, c.bytes);
    }
    i = next;
    if (c.kind == Cell::kWord && c.bytes.empty()) continue;  // only control characters
    cells.push_back(std::move(c));
  }
  return cells;
}

// Appends the lines of one paragraph (no '\n') to `out`.
void WrapParagraph(std::string_view para, int width, int tab_width, std::vector<std::string>* out) {
  const std::vector<Cell> cells = Cells(para);
  std::string line;
  int line_w = 0;
  // Lines after a break always start with a word (every break is made for one), so only a
  // paragraph's first line can hold spaces without content: its indentation.
  bool content = false;  // `line` holds more than indentation
  int pending = 0;       // spaces seen after the line's content (dropped at a break)
  const auto emit = [&] {
    out->push_back(std::move(line));
    line.clear();
    line_w = pending = 0;
    content = false;
  };
  for (size_t i = 0; i < cells.size();) {
    if (cells[i].kind != Cell::kWord) {
      const int col = line_w + pending;
      pending += cells[i].kind == Cell::kTab ? tab_width - col % tab_width : 1;
      ++i;
      continue;
    }
    size_t end = i;
    int word_w = 0;
    for (; end < cells.size() && cells[end].kind == Cell::kWord; ++end) word_w += cells[end].width;
    if (line_w + pending + word_w <= width || (word_w <= width && !content)) {
      // Fits after the spaces; or a fitting word after indentation that leaves too little room:
      // the indentation gives way.
      const int spaces = std::min(pending, width - line_w - word_w);
      line.append(static_cast<size_t>(spaces), ' ');
      for (size_t k = i; k < end; ++k) line += cells[k].bytes;
      line_w += spaces + word_w;
      content = true;
      pending = 0;
    } else if (word_w <= width) {
      emit();
      for (size_t k = i; k < end; ++k) line += cells[k].bytes;
      line_w = word_w;
      content = true;
    } else {
      // Wider than any line: start here (after the spaces, if a column is left), break at edges.
      if (line_w + pending < width) {
        line.append(static_cast<size_t>(pending), ' ');
        line_w += pending;
      } else if (content) {
        emit();
      }
      pending = 0;
      for (size_t k = i; k < end; ++k) {
        std::string_view bytes = cells[k].bytes;
        int w = cells[k].width;
        if (w > width) {  // a wide character at width 1
          bytes = kReplacementUtf8;
          w = 1;
        }
        if (line_w + w > width) emit();
        line += bytes;
        line_w += w;
        content = true;
      }
    }
    i = end;
  }
  out->push_back(std::move(line));
}

}  // namespace

std::vector<std::string> WrapText(std::string_view text, int width, int tab_width) {
  WC_CHECK(width >= 1 && tab_width >= 1, "width ", width, ", tab_width ", tab_width);
  std::vector<std::string> lines;
  size_t begin = 0;
  for (size_t nl = text.find('\n'); nl != std::string_view::npos; nl = text.find('\n', begin)) {
    WrapParagraph(text.substr(begin, nl - begin), width, tab_width, &lines);
    begin = nl + 1;
  }
  WrapParagraph(text.substr(begin), width, tab_width, &lines);
  return lines;
}

WrappedText::WrappedText(int width, int tab_width) : width_(width), tab_width_(tab_width) {
  WC_CHECK(width >= 1 && tab_width >= 1, "width ", width, ", tab_width ", tab_width);
  WrapOpen();
}

void WrappedText::Append(std::string_view chunk) {
  text_.append(chunk);
  WrapOpen();
}

void WrappedText::Clear() {
  text_.clear();
  open_start_ = open_line_ = 0;
  WrapOpen();
}

void WrappedText::SetWidth(int width) {
  WC_CHECK(width >= 1, "width ", width);
  width_ = width;
  open_start_ = open_line_ = 0;
  WrapOpen();
}

void WrappedText::WrapOpen() {
  // Paragraphs completed since the last call are final; the last one is wrapped again.
  lines_.resize(open_line_);
  const std::string_view text(text_);
  for (size_t nl = text.find('\n', open_start_); nl != std::string_view::npos;
       nl = text.find('\n', open_start_)) {
    WrapParagraph(text.substr(open_start_, nl - open_start_), width_, tab_width_, &lines_);
    open_start_ = nl + 1;
    open_line_ = lines_.size();
  }
  const std::string_view open = text.substr(open_start_);
  WrapParagraph(open.substr(0, Utf8CompletePrefix(open)), width_, tab_width_, &lines_);
}

}  // namespace wc::tui
