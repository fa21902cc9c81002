#include "app/tui/markdown_cells.h"

#include <algorithm>
#include <cctype>

#include "app/tui/text_width.h"

namespace wc::tui::md {
namespace {

bool IsAsciiPunct(char c) {
  return c > 0 && std::ispunct(static_cast<unsigned char>(c)) != 0;
}
bool IsSpaceChar(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// One piece of a paragraph's inline text before emphasis is resolved.
struct Node {
  std::string text;  // literal text (delimiter runs: empty, see `count`)
  uint16_t style = 0;
  char delim = 0;  // '*' or '_' for a delimiter run
  int count = 0;   // delimiter characters still unused
  int orig = 0;    // the run's length as written (CommonMark's rule of 3)
  bool can_open = false, can_close = false;
};

void AddText(std::vector<Node>* nodes, std::string_view text, uint16_t style = 0) {
  if (!nodes->empty() && nodes->back().delim == 0 && nodes->back().style == style) {
    nodes->back().text.append(text);
  } else {
    nodes->push_back({std::string(text), style});
  }
}

// Pairs delimiter runs into emphasis (CommonMark's "process emphasis", without link brackets):
// the nodes between a matched opener and closer get kMdBold (2 characters used) or kMdItalic (1).
void ResolveEmphasis(std::vector<Node>* nodes) {
  std::vector<Node>& n = *nodes;
  std::vector<bool> active(n.size(), true);
  for (size_t c = 0; c < n.size(); ++c) {
    if (n[c].delim == 0 || !n[c].can_close) continue;
    while (n[c].count > 0) {
      size_t o = c;
      bool found = false;
      while (o-- > 0) {
        const Node& d = n[o];
        if (d.delim != n[c].delim || !active[o] || !d.can_open || d.count == 0) continue;
        if ((d.can_close || n[c].can_open) && (d.orig + n[c].orig) % 3 == 0 &&
            !(d.orig % 3 == 0 && n[c].orig % 3 == 0)) {
          continue;
        }
        found = true;
        break;
      }
      if (!found) break;
      const int used = n[o].count >= 2 && n[c].count >= 2 ? 2 : 1;
      for (size_t k = o + 1; k < c; ++k) {
        n[k].style |= used == 2 ? kMdBold : kMdItalic;
        if (n[k].delim != 0) active[k] = false;
      }
      n[o].count -= used;
      n[c].count -= used;
    }
  }
}

// The byte after a link's "[label](url)" starting at `open` ('['), or 0 when it is not one.
size_t ParseLink(std::string_view t, size_t open, std::string_view* label, std::string_view* url) {
  int depth = 0;
  size_t close = std::string_view::npos;
  for (size_t i = open; i < t.size(); ++i) {
    if (t[i] == '\\') {
      ++i;
    } else if (t[i] == '[') {
      ++depth;
    } else if (t[i] == ']' && --depth == 0) {
      close = i;
      break;
    }
  }
  if (close == std::string_view::npos || close + 1 >= t.size() || t[close + 1] != '(') return 0;
  depth = 0;
  for (size_t i = close + 1; i < t.size(); ++i) {
    if (IsSpaceChar(t[i])) return 0;
    if (t[i] == '(') ++depth;
    if (t[i] == ')' && --depth == 0) {
      *label = t.substr(open + 1, close - open - 1);
      *url = t.substr(close + 2, i - close - 2);
      return i + 1;
    }
  }
  return 0;
}

// Parses `t` into nodes with emphasis resolved.
std::vector<Node> ParseNodes(std::string_view t) {
  std::vector<Node> nodes;
  for (size_t i = 0; i < t.size();) {
    const char c = t[i];
    if (c == '\\' && i + 1 < t.size() && IsAsciiPunct(t[i + 1])) {
      AddText(&nodes, t.substr(i + 1, 1));
      i += 2;
    } else if (c == '`') {
      size_t n = 0;
      while (i + n < t.size() && t[i + n] == '`') ++n;
      // The closing run: exactly n backticks.
      size_t j = i + n, close = std::string_view::npos;
      while (j < t.size()) {
        if (t[j] != '`') {
          ++j;
          continue;
        }
        size_t m = 0;
        while (j + m < t.size() && t[j + m] == '`') ++m;
        if (m == n) {
          close = j;
          break;
        }
        j += m;
      }
      if (close == std::string_view::npos) {
        AddText(&nodes, t.substr(i, n));
        i += n;
        continue;
      }
      std::string_view code = t.substr(i + n, close - i - n);
      if (code.size() >= 2 && code.front() == ' ' && code.back() == ' ' &&
          code.find_first_not_of(' ') != std::string_view::npos) {
        code = code.substr(1, code.size() - 2);
      }
      nodes.push_back({std::string(code), kMdCode});
      i = close + n;
    } else if (c == '*' || c == '_') {
      size_t n = 0;
      while (i + n < t.size() && t[i + n] == c) ++n;
      const char before = i > 0 ? t[i - 1] : ' ', after = i + n < t.size() ? t[i + n] : ' ';
      const bool left = !IsSpaceChar(after) &&
                        (!IsAsciiPunct(after) || IsSpaceChar(before) || IsAsciiPunct(before));
      const bool right = !IsSpaceChar(before) &&
                         (!IsAsciiPunct(before) || IsSpaceChar(after) || IsAsciiPunct(after));
      Node d;
      d.delim = c;
      d.count = d.orig = static_cast<int>(n);
      d.can_open = c == '*' ? left : left && (!right || IsAsciiPunct(before));
      d.can_close = c == '*' ? right : right && (!left || IsAsciiPunct(after));
      nodes.push_back(std::move(d));
      i += n;
    } else if (c == '[' || (c == '!' && i + 1 < t.size() && t[i + 1] == '[')) {
      const size_t open = c == '!' ? i + 1 : i;
      std::string_view label, url;
      const size_t end = ParseLink(t, open, &label, &url);
      if (end == 0) {
        AddText(&nodes, t.substr(i, open + 1 - i));
        i = open + 1;
        continue;
      }
      for (Node& inner : ParseNodes(label)) {
        if (inner.delim != 0) inner.text.assign(static_cast<size_t>(inner.count), inner.delim);
        inner.delim = 0;
        nodes.push_back(std::move(inner));
      }
      if (label != url)
        AddText(&nodes, std::string(label.empty() ? "" : " ") + "(" + std::string(url) + ")");
      i = end;
    } else if (c == '<' && (t.substr(i + 1, 7) == "http://" || t.substr(i + 1, 8) == "https://")) {
      const size_t close = t.find_first_of("> <", i + 1);
      if (close != std::string_view::npos && t[close] == '>') {
        AddText(&nodes, t.substr(i + 1, close - i - 1));
        i = close + 1;
      } else {
        AddText(&nodes, "<");
        ++i;
      }
    } else {
      size_t j = i + 1;
      while (j < t.size() && std::string_view("\\`*_[!<").find(t[j]) == std::string_view::npos) {
        ++j;
      }
      AddText(&nodes, t.substr(i, j - i));
      i = j;
    }
  }
  ResolveEmphasis(&nodes);
  return nodes;
}

}  // namespace

Cell SpaceCell(uint16_t style, SyntaxClass syntax) {
  Cell c;
  c.bytes = " ";
  c.width = 1;
  c.style = style;
  c.syntax = syntax;
  return c;
}

void AppendCells(std::string_view text, uint16_t style, SyntaxClass syntax,
                 std::vector<Cell>* out) {
  for (size_t i = 0; i < text.size();) {
    const size_t next = NextChar(text, i);
    Cell c;
    c.style = style;
    c.syntax = syntax;
    if (text[i] == ' ') {
      c.kind = Cell::kSpace;
    } else if (text[i] == '\t') {
      c.kind = Cell::kTab;
    } else {
      c.width += AppendPrintable(text, i, next, c.bytes);
    }
    i = next;
    if (c.kind == Cell::kWord && c.bytes.empty()) continue;  // only control characters
    out->push_back(std::move(c));
  }
}

void AppendInline(std::string_view text, uint16_t base_style, std::vector<Cell>* out) {
  for (const Node& n : ParseNodes(text)) {
    const uint16_t style = n.style | base_style;
    if (n.delim != 0) {
      AppendCells(std::string(static_cast<size_t>(n.count), n.delim), style, SyntaxClass::kNone,
                  out);
    } else {
      AppendCells(n.text, style, SyntaxClass::kNone, out);
    }
  }
}

std::vector<std::vector<Cell>> WrapCells(const std::vector<Cell>& cells, int width, int tab_width) {
  std::vector<std::vector<Cell>> out;
  std::vector<Cell> line;
  int line_w = 0;
  bool content = false;        // `line` holds more than indentation
  int pending = 0;             // spaces seen after the line's content (dropped at a break)
  uint16_t pending_style = 0;  // their style (the last space's)
  const auto emit = [&] {
    out.push_back(std::move(line));
    line.clear();
    line_w = pending = 0;
    content = false;
  };
  const auto spaces = [&](int n) {
    for (int k = 0; k < n; ++k) line.push_back(SpaceCell(pending_style));
  };
  for (size_t i = 0; i < cells.size();) {
    if (cells[i].kind != Cell::kWord) {
      const int col = line_w + pending;
      pending += cells[i].kind == Cell::kTab ? tab_width - col % tab_width : 1;
      pending_style = cells[i].style;
      ++i;
      continue;
    }
    size_t end = i;
    int word_w = 0;
    for (; end < cells.size() && cells[end].kind == Cell::kWord; ++end) word_w += cells[end].width;
    if (line_w + pending + word_w <= width || (word_w <= width && !content)) {
      const int n = std::min(pending, width - line_w - word_w);
      spaces(n);
      line.insert(line.end(), cells.begin() + i, cells.begin() + end);
      line_w += n + word_w;
      content = true;
      pending = 0;
    } else if (word_w <= width) {
      emit();
      line.insert(line.end(), cells.begin() + i, cells.begin() + end);
      line_w = word_w;
      content = true;
    } else {
      // Wider than any line: start here (after the spaces, if a column is left), break at edges.
      if (line_w + pending < width) {
        spaces(pending);
        line_w += pending;
      } else if (content) {
        emit();
      }
      pending = 0;
      for (size_t k = i; k < end; ++k) {
        Cell c = cells[k];
        if (c.width > width) {  // a wide character at width 1
          c.bytes = kReplacementUtf8;
          c.width = 1;
        }
        if (line_w + c.width > width) emit();
        line_w += c.width;
        line.push_back(std::move(c));
        content = true;
      }
    }
    i = end;
  }
  out.push_back(std::move(line));
  return out;
}

std::vector<std::vector<Cell>> BreakCells(const std::vector<Cell>& cells, int width,
                                          int tab_width) {
  std::vector<std::vector<Cell>> out(1);
  int col = 0;     // in the unbroken line (tab stops)
  int line_w = 0;  // in the current output line
  const auto put = [&](Cell c) {
    if (c.width > width) {
      c.bytes = kReplacementUtf8;
      c.width = 1;
    }
    if (line_w + c.width > width) {
      out.emplace_back();
      line_w = 0;
    }
    line_w += c.width;
    col += c.width;
    out.back().push_back(std::move(c));
  };
  for (const Cell& c : cells) {
    if (c.kind == Cell::kWord) {
      put(c);
      continue;
    }
    const int n = c.kind == Cell::kTab ? tab_width - col % tab_width : 1;
    for (int k = 0; k < n; ++k) put(SpaceCell(c.style, c.syntax));
  }
  return out;
}

void LineBuilder::Add(std::string_view text, uint16_t style, SyntaxClass syntax) {
  if (text.empty()) return;
  std::vector<MdSpan>& spans = line_.spans;
  if (!spans.empty() && spans.back().style == style && spans.back().syntax == syntax) {
    spans.back().text.append(text);
  } else {
    spans.push_back({std::string(text), style, syntax});
  }
}

void LineBuilder::Add(const std::vector<Cell>& cells, uint16_t extra_style) {
  for (const Cell& c : cells) Add(c.bytes, c.style | extra_style, c.syntax);
}

MdLine LineBuilder::Take() {
  MdLine line = std::move(line_);
  line_ = MdLine();
  return line;
}

}  // namespace wc::tui::md
