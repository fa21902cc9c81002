// Markdown of a reply rendered to styled lines for a width in terminal columns, incrementally as
// the reply streams in. Terminal-free: spans carry style bits and syntax classes, the front end
// maps them to attributes (and keeps the text readable without colour: markers stay visible).
// Characters and widths are those of app/tui/text_width.h (its UTF-8 locale requirement applies).
//
// Blocks (a line's kind is decided by its start; a paragraph's next line may continue it):
//  - Paragraphs: lines joined by spaces and word-wrapped exactly as WrapText (app/tui/wrap.h):
//    spaces at breaks dropped, wide characters never straddle the edge, tabs expanded (8),
//    control characters dropped, invalid UTF-8 shown as U+FFFD. A paragraph whose first line is
//    indented keeps that indentation (at most half the width) on all its lines.
//  - Inline: `code` and ``code`` (kMdCode, backticks removed), **bold** / __bold__, *italic* /
//    _italic_ (underscores only at word boundaries: snake_case_names stay), ***both***, backslash
//    escapes. Unclosed markers stay literal text. [text](url) shows as "text (url)" ("url" alone
//    when text is the url), <https://...> as the url.
//  - Headings "#".."######": the '#' marks kept, the whole line kMdHeading | kMdBold.
//  - Lists "-", "*", "+" (shown as "•") and "1." / "1)" (the number as written), kMdFrame, at the
//    source's indentation (nesting), with a hanging indent: continuation lines align under the
//    item's text. Task boxes "[ ]" stay text.
//  - Fenced code ("```" or "~~~", any indentation, info string optional) in a box:
//      ╭─ python ───╮     (no language: ╭────────────╮)
//      │ code       │     code lines are not wrapped; tabs expand to 4 columns
//      │↪more code  │     a line wider than the box is broken at the edge, marked with "↪"
//      ╰────────────╯     drawn once the closing fence has arrived (an open fence has none)
//    Borders kMdFrame (the language also kMdLanguage); code and its padding kMdCodeBlock, with
//    syntax classes from HighlightCode (app/tui/syntax_highlight.h). Below 6 columns: no box,
//    code lines broken at the edge.
//  - Block quotes "> ": "│ " (kMdFrame | kMdQuote) before the quote's own content, rendered as
//    markdown 2 columns narrower with kMdQuote added. Rules (---, ***, ___): a full-width line of
//    "─" (kMdFrame). Table rows (lines starting with '|'): verbatim, one line each, broken at the
//    edge when too wide.
//  - Blank lines between blocks: one blank line per run; leading blank lines dropped.
// Every rendered line is at most `width` columns, for any input and any width >= 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "app/tui/syntax_highlight.h"

namespace wc::tui {
namespace md {
struct OpenFence;  // markdown.cpp: where a stream's rendering resumes inside a code block
}  // namespace md

// Style bits of a span (combined with |).
enum MdStyle : uint16_t {
  kMdBold = 1,
  kMdItalic = 2,
  kMdCode = 4,        // inline code
  kMdHeading = 8,     // a heading's line
  kMdCodeBlock = 16,  // text inside a fence (and the padding of its box)
  kMdFrame = 32,      // drawing: box border, rule, quote bar, list marker
  kMdLanguage = 64,   // the language name on a fence's border
  kMdQuote = 128,     // inside a block quote
};

struct MdSpan {
  std::string text;                         // UTF-8, safe to print, no '\n' or '\t'
  uint16_t style = 0;                       // MdStyle bits
  SyntaxClass syntax = SyntaxClass::kNone;  // inside a fence with a known language
};

struct MdLine {
  std::vector<MdSpan> spans;  // adjacent spans differ in style or syntax; none is empty
  // The line's text without styles.
  std::string Plain() const;
};

// `text` (markdown) rendered to lines of at most `width` (>= 1) columns.
std::vector<MdLine> RenderMarkdown(std::string_view text, int width);

// A growing markdown text and its rendered lines, for a reply that streams in (as WrappedText).
// Append keeps the lines of finished blocks and renders again only from the first unfinished one
// (a paragraph or list finishes at a blank line, a fence at its closing fence); inside an open
// fence, only from its last, unfinished line, so a long code block streams in O(its last line)
// per chunk. lines() always
// equals RenderMarkdown(text(), width()) (with an unfinished UTF-8 character at the very end left
// out until it completes).
class MarkdownText {
 public:
  explicit MarkdownText(int width);

  void Append(std::string_view chunk);
  void Clear();
  // Renders everything again (a terminal resize); width >= 1.
  void SetWidth(int width);

  const std::string& text() const { return text_; }
  const std::vector<MdLine>& lines() const { return lines_; }
  int width() const { return width_; }
  // Bytes of text() whose rendering is final: Append keeps their lines and renders again only
  // what follows (for tests and diagnostics).
  size_t final_bytes() const { return open_start_; }

 private:
  void RenderOpen();

  int width_;
  std::string text_;
  size_t open_start_ = 0;  // byte offset in text_ of the first block that may still change
  size_t open_line_ = 0;   // index in lines_ of its first line
  std::shared_ptr<md::OpenFence> open_fence_;  // the code block open_start_ is inside, if any
  std::vector<MdLine> lines_;
};

// A fenced code block of a markdown text, for copying it.
struct CodeBlock {
  std::string language;  // the info string's first word as written ("" when none)
  std::string code;      // the lines between the fences joined by '\n', no trailing newline
};

// The fenced code blocks of `markdown`, in order, found as RenderMarkdown finds them (a fence
// inside a block quote is not one); an unclosed final fence counts. The opening fence's
// indentation is taken off each line (as many spaces as it had, at most); a final '\r' too.
std::vector<CodeBlock> ExtractCodeBlocks(std::string_view markdown);

}  // namespace wc::tui
