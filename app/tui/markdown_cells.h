// The pieces app/tui/markdown.cpp renders with: styled characters ("cells"), inline markdown
// parsed into them, and their word wrap (WrapText's rules) or hard break into lines. Internal to
// markdown.cpp; in a header of its own so each file keeps one concern.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "app/tui/markdown.h"

namespace wc::tui::md {

// One character of rendered text, made safe to print, with its style.
struct Cell {
  enum Kind : uint8_t { kSpace, kTab, kWord } kind = kWord;
  std::string bytes;                        // kWord: the character; kSpace/kTab: empty
  int width = 0;                            // kWord: columns it takes
  uint16_t style = 0;                       // MdStyle bits
  SyntaxClass syntax = SyntaxClass::kNone;  // inside a fence
};

// A printed space (kWord, 1 column): what spaces and tabs become in output lines.
Cell SpaceCell(uint16_t style = 0, SyntaxClass syntax = SyntaxClass::kNone);

// Appends the characters of `text` as cells: ' ' and '\t' as kSpace/kTab, control characters
// dropped, invalid bytes as U+FFFD; every cell gets `style` and `syntax`.
void AppendCells(std::string_view text, uint16_t style, SyntaxClass syntax, std::vector<Cell>* out);

// Appends the cells of one paragraph's inline markdown (code spans, emphasis, escapes, links;
// see markdown.h), each with `base_style` added.
void AppendInline(std::string_view text, uint16_t base_style, std::vector<Cell>* out);

// `cells` word-wrapped to `width` (>= 1) columns by WrapText's rules (app/tui/wrap.h), tabs
// expanded to `tab_width`; at least one line. Output cells are kWord only (spaces included).
std::vector<std::vector<Cell>> WrapCells(const std::vector<Cell>& cells, int width, int tab_width);

// `cells` broken at the edge of `width` (>= 1) columns, never at spaces, tabs expanded to
// `tab_width` columns of the whole unbroken line; a wide character that cannot fit in width 1
// becomes U+FFFD. At least one line. Output cells are kWord only.
std::vector<std::vector<Cell>> BreakCells(const std::vector<Cell>& cells, int width, int tab_width);

// Builds an MdLine from pieces, merging adjacent pieces of equal style and syntax.
class LineBuilder {
 public:
  void Add(std::string_view text, uint16_t style, SyntaxClass syntax = SyntaxClass::kNone);
  void Add(const std::vector<Cell>& cells, uint16_t extra_style = 0);
  // The line built so far (the builder is left empty).
  MdLine Take();

 private:
  MdLine line_;
};

}  // namespace wc::tui::md
