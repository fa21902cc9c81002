// The block structure of markdown source lines, for app/tui/markdown.cpp: which lines open and
// close fences, and which blocks (paragraphs, headings, list items, quotes, tables, rules) a run
// of non-blank lines holds. Internal to markdown.cpp; the rules are listed in markdown.h.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wc::tui::md {

// Whether `line` holds only spaces, tabs and '\r'.
bool IsBlank(std::string_view line);
// Columns of a line's leading spaces and tabs (tabs to multiples of 4).
int Indentation(std::string_view line);

// One line of the source, without its '\n'.
struct SourceLine {
  std::string_view text;
  size_t next = 0;        // byte offset of the line after (the text's size for the last line)
  bool complete = false;  // ends in '\n' (a complete line never changes as text streams in)
};

// The line starting at byte `pos` of `text` (pos < text.size()).
SourceLine LineAt(std::string_view text, size_t pos);

// An opening fence: "```python" or "~~~", at any indentation.
struct Fence {
  char ch = '`';      // '`' or '~'
  size_t count = 0;   // fence characters (>= 3)
  size_t indent = 0;  // leading spaces, taken off the content lines
  std::string info;   // the info string, trimmed
};

// The fence `line` opens, if it is an opening fence (3 or more '`' or '~'; a '`' fence's info
// string holds no '`', else the line is inline code).
std::optional<Fence> FenceOpen(std::string_view line);
// Whether `line` closes `f`: at least as many of its character, then only blanks.
bool IsFenceClose(std::string_view line, const Fence& f);
// A fence's content line: the opening fence's indentation (at most) and a final '\r' taken off.
std::string_view CodeLine(std::string_view line, const Fence& f);
// The info string's first word (the language); "" when none.
std::string_view InfoLanguage(std::string_view info);

// One block of a run of non-blank lines.
struct Block {
  enum Kind { kParagraph, kHeading, kItem, kQuote, kTable, kRule } kind = kParagraph;
  std::string text;                // paragraph, heading, item: the inline text, lines joined
  int indent = 0;                  // paragraph, item: source indentation in columns
  int level = 0;                   // heading: 1..6
  std::string marker;              // item: "•", "1." or "1)"
  std::vector<std::string> lines;  // quote: its content lines ('>' taken off); table: its rows
  size_t first_line = 0;           // index of its first line in the run
};

// The blocks of `lines`: consecutive non-blank lines without an opening fence. A line's start
// decides its block (rule, heading, quote, table row, list item); other lines continue the
// paragraph, list item or quote before them, or start a paragraph. So a block that starts a new
// block starts the same block whatever lines come before it.
std::vector<Block> ParseGroup(const std::vector<std::string_view>& lines);

}  // namespace wc::tui::md
