#include "app/tui/markdown.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "app/tui/markdown_blocks.h"
#include "app/tui/markdown_cells.h"
#include "app/tui/text_width.h"
#include "serving/text_stream.h"
#include "util/error.h"

namespace wc::tui {
namespace md {

// A fence still open where the rendering is final: what rendering resumes with inside it.
struct OpenFence {
  Fence fence;
  CodeHighlighter highlighter;  // its state after the code lines rendered

  explicit OpenFence(Fence f) : fence(std::move(f)), highlighter(InfoLanguage(fence.info)) {}
};

}  // namespace md
namespace {

using md::Block;
using md::CodeLine;
using md::Fence;
using md::FenceOpen;
using md::InfoLanguage;
using md::IsBlank;
using md::IsFenceClose;
using md::LineAt;
using md::ParseGroup;
using md::SourceLine;

using md::Cell;
using md::LineBuilder;

constexpr int kTextTab = 8;      // tab stops in paragraphs and tables (as WrapText)
constexpr int kCodeTab = 4;      // tab stops in code blocks
constexpr int kMinBoxWidth = 6;  // narrower code blocks have no box
constexpr std::string_view kHorizontal = "\xE2\x94\x80";  // ─
constexpr std::string_view kVertical = "\xE2\x94\x82";    // │

std::string Repeat(std::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.append(s);
  return out;
}

// ---- rendering ----

struct Progress {
  size_t offset = 0;                     // text before this byte offset is final...
  size_t lines = 0;                      // ...and has rendered to this many lines...
  std::shared_ptr<md::OpenFence> fence;  // ...ending inside this fence (null: between blocks)
};

Progress RenderFrom(std::string_view text, size_t start, std::shared_ptr<md::OpenFence> resume,
                    int width, std::vector<MdLine>* out);

// Lines of `rows`, each after `first` (the first row) or `rest` (the others), both `prefix_w`
// columns wide.
void EmitRows(const std::vector<std::vector<Cell>>& rows, const std::vector<Cell>& first,
              const std::vector<Cell>& rest, uint16_t extra_style, std::vector<MdLine>* out) {
  for (size_t r = 0; r < rows.size(); ++r) {
    LineBuilder b;
    b.Add(r == 0 ? first : rest);
    b.Add(rows[r], extra_style);
    out->push_back(b.Take());
  }
}

std::vector<Cell> Spaces(int n) {
  return std::vector<Cell>(static_cast<size_t>(n), md::SpaceCell());
}

void RenderParagraph(const Block& b, int width, std::vector<MdLine>* out) {
  std::vector<Cell> cells;
  md::AppendInline(b.text, 0, &cells);
  const int indent = std::min(b.indent, width / 2);
  EmitRows(md::WrapCells(cells, width - indent, kTextTab), Spaces(indent), Spaces(indent), 0, out);
}

void RenderHeading(const Block& b, int width, std::vector<MdLine>* out) {
  const uint16_t style = kMdHeading | kMdBold;
  std::vector<Cell> cells;
  md::AppendCells(std::string(static_cast<size_t>(b.level), '#') + " ", style, SyntaxClass::kNone,
                  &cells);
  md::AppendInline(b.text, style, &cells);
  EmitRows(md::WrapCells(cells, width, kTextTab), {}, {}, 0, out);
}

void RenderItem(const Block& b, int width, std::vector<MdLine>* out) {
  const int marker_w = DisplayWidth(b.marker);
  std::vector<Cell> marker;
  if (width < marker_w + 2) {  // no room for a hanging indent: marker and text as a paragraph
    md::AppendCells(b.marker + " ", kMdFrame, SyntaxClass::kNone, &marker);
    md::AppendInline(b.text, 0, &marker);
    EmitRows(md::WrapCells(marker, width, kTextTab), {}, {}, 0, out);
    return;
  }
  const int indent = std::min(b.indent, (width - marker_w - 1) / 2);
  std::vector<Cell> first = Spaces(indent);
  md::AppendCells(b.marker, kMdFrame, SyntaxClass::kNone, &first);
  first.push_back(md::SpaceCell());
  std::vector<Cell> cells;
  md::AppendInline(b.text, 0, &cells);
  const int prefix_w = indent + marker_w + 1;
  EmitRows(md::WrapCells(cells, width - prefix_w, kTextTab), first, Spaces(prefix_w), 0, out);
}

void RenderQuote(const Block& b, int width, std::vector<MdLine>* out) {
  std::string content;
  for (const std::string& line : b.lines) content += line + "\n";
  content.pop_back();
  const bool bar = width >= 3;
  std::vector<MdLine> inner;
  RenderFrom(content, 0, nullptr, bar ? width - 2 : width, &inner);
  for (MdLine& line : inner) {
    LineBuilder lb;
    if (bar) {  // "│ " before text, "│" alone on an empty line (no trailing space)
      lb.Add(line.spans.empty() ? std::string(kVertical) : std::string(kVertical) + " ",
             kMdFrame | kMdQuote);
    }
    for (const MdSpan& s : line.spans) lb.Add(s.text, s.style | kMdQuote, s.syntax);
    out->push_back(lb.Take());
  }
}

void RenderTable(const Block& b, int width, std::vector<MdLine>* out) {
  for (const std::string& row : b.lines) {
    std::vector<Cell> cells;
    md::AppendCells(row, 0, SyntaxClass::kNone, &cells);
    EmitRows(md::BreakCells(cells, width, kTextTab), {}, {}, 0, out);
  }
}

void RenderRule(int width, std::vector<MdLine>* out) {
  LineBuilder b;
  b.Add(Repeat(kHorizontal, width), kMdFrame);
  out->push_back(b.Take());
}

void RenderCodeTop(const Fence& f, int width, std::vector<MdLine>* out) {
  if (width < kMinBoxWidth) return;
  LineBuilder b;
  const std::string label = FitWidth(InfoLanguage(f.info), width - 6, /*ellipsis=*/true);
  if (label.empty()) {
    b.Add("\xE2\x95\xAD" + Repeat(kHorizontal, width - 2) + "\xE2\x95\xAE", kMdFrame);  // ╭─╮
  } else {
    b.Add("\xE2\x95\xAD" + std::string(kHorizontal) + " ", kMdFrame);
    b.Add(label, kMdFrame | kMdLanguage);
    b.Add(" " + Repeat(kHorizontal, width - 5 - DisplayWidth(label)) + "\xE2\x95\xAE", kMdFrame);
  }
  out->push_back(b.Take());
}

void RenderCodeBottom(int width, std::vector<MdLine>* out) {
  if (width < kMinBoxWidth) return;
  LineBuilder b;
  b.Add("\xE2\x95\xB0" + Repeat(kHorizontal, width - 2) + "\xE2\x95\xAF", kMdFrame);  // ╰─╯
  out->push_back(b.Take());
}

// One code line (`spans` from its highlighter), broken at the box's inner edge.
void RenderCodeLine(std::string_view line, const std::vector<SyntaxSpan>& spans, int width,
                    std::vector<MdLine>* out) {
  const bool box = width >= kMinBoxWidth;
  const int inner = box ? width - 4 : width;
  std::vector<Cell> cells;
  size_t pos = 0;
  const auto add = [&](size_t end, SyntaxClass cls) {
    if (end > pos) md::AppendCells(line.substr(pos, end - pos), kMdCodeBlock, cls, &cells);
    pos = std::max(pos, end);
  };
  for (const SyntaxSpan& s : spans) {
    add(s.begin, SyntaxClass::kNone);
    add(s.end, s.cls);
  }
  add(line.size(), SyntaxClass::kNone);
  const std::vector<std::vector<Cell>> rows = md::BreakCells(cells, inner, kCodeTab);
  for (size_t r = 0; r < rows.size(); ++r) {
    LineBuilder b;
    if (box) {
      b.Add(std::string(kVertical), kMdFrame);
      b.Add(r == 0 ? " " : "\xE2\x86\xAA", r == 0 ? kMdCodeBlock : kMdFrame);  // ↪
    }
    b.Add(rows[r]);
    if (box) {
      int used = 0;
      for (const Cell& c : rows[r]) used += c.width;
      b.Add(std::string(static_cast<size_t>(inner - used + 1), ' '), kMdCodeBlock);
      b.Add(std::string(kVertical), kMdFrame);
    }
    out->push_back(b.Take());
  }
}

// Renders a fence's code lines from `pos` (after its opening line or a code line rendered
// before) and its bottom once the closing fence is there. A complete code line is final where
// everything before is (`*final_so_far`): `progress` moves past it, holding `fence` to resume
// with. Returns the offset after the fence (the text's end when it is open).
size_t RenderFenceBody(std::string_view text, size_t pos,
                       const std::shared_ptr<md::OpenFence>& fence, int width,
                       std::vector<MdLine>* out, bool* final_so_far, Progress* progress) {
  while (pos < text.size()) {
    const SourceLine l = LineAt(text, pos);
    pos = l.next;
    if (IsFenceClose(l.text, fence->fence)) {
      RenderCodeBottom(width, out);
      *final_so_far = *final_so_far && l.complete;
      if (*final_so_far) *progress = {pos, out->size(), nullptr};
      return pos;
    }
    const std::string code(CodeLine(l.text, fence->fence));
    if (l.complete) {
      RenderCodeLine(code, fence->highlighter.Next(code), width, out);
      if (*final_so_far) *progress = {pos, out->size(), fence};
    } else {  // the text's last line, still arriving
      RenderCodeLine(code, fence->highlighter.Peek(code), width, out);
      *final_so_far = false;
    }
  }
  *final_so_far = false;
  return pos;
}

// Renders the text from `start` (a line start; inside `resume`'s fence when given) to its end,
// appending to `out`. Returns how far the rendering is final: blocks whose end is marked by a
// complete line, and the complete lines of a fence.
Progress RenderFrom(std::string_view text, size_t start, std::shared_ptr<md::OpenFence> resume,
                    int width, std::vector<MdLine>* out) {
  Progress progress{start, out->size(), resume};
  bool final_so_far = true;
  const auto done = [&](size_t end, bool final) {
    final_so_far = final_so_far && final;
    if (final_so_far) progress = {end, out->size(), nullptr};
  };
  size_t pos = start;
  if (resume) pos = RenderFenceBody(text, pos, resume, width, out, &final_so_far, &progress);
  // Whether the line before `pos` is blank (the text's start counts as one: no leading blank).
  bool prev_blank = true;
  if (pos > 0) {
    const std::string_view before = text.substr(0, pos - 1);  // without the '\n' at pos - 1
    const size_t nl = before.rfind('\n');
    prev_blank = IsBlank(before.substr(nl == std::string_view::npos ? 0 : nl + 1));
  }
  while (pos < text.size()) {
    const SourceLine line = LineAt(text, pos);
    if (IsBlank(line.text)) {
      if (!prev_blank) out->emplace_back();
      prev_blank = true;
      pos = line.next;
      done(pos, line.complete);
      continue;
    }
    prev_blank = false;
    if (std::optional<Fence> opening = FenceOpen(line.text)) {
      const auto fence = std::make_shared<md::OpenFence>(std::move(*opening));
      RenderCodeTop(fence->fence, width, out);
      final_so_far = final_so_far && line.complete;
      if (final_so_far) progress = {line.next, out->size(), fence};
      pos = RenderFenceBody(text, line.next, fence, width, out, &final_so_far, &progress);
      continue;
    }
    std::vector<std::string_view> lines{line.text};
    size_t p = line.next;
    bool final = false;
    while (p < text.size()) {
      const SourceLine l = LineAt(text, p);
      if (IsBlank(l.text) || FenceOpen(l.text)) {
        final = l.complete;
        break;
      }
      lines.push_back(l.text);
      p = l.next;
    }
    const std::vector<Block> blocks = ParseGroup(lines);
    for (size_t k = 0; k < blocks.size(); ++k) {
      const Block& b = blocks[k];
      if (k > 0) {
        // A block's start is final once its first line is complete: that line ends the block
        // before, and starts the same block whatever came before it.
        const std::string_view first = lines[b.first_line];
        const size_t offset = static_cast<size_t>(first.data() - text.data());
        if (final_so_far && offset + first.size() < text.size())
          progress = {offset, out->size(), nullptr};
      }
      switch (b.kind) {
        case Block::kParagraph:
          RenderParagraph(b, width, out);
          break;
        case Block::kHeading:
          RenderHeading(b, width, out);
          break;
        case Block::kItem:
          RenderItem(b, width, out);
          break;
        case Block::kQuote:
          RenderQuote(b, width, out);
          break;
        case Block::kTable:
          RenderTable(b, width, out);
          break;
        case Block::kRule:
          RenderRule(width, out);
          break;
      }
    }
    pos = p;
    done(pos, final);
  }
  return progress;
}

}  // namespace

std::string MdLine::Plain() const {
  std::string s;
  for (const MdSpan& span : spans) s += span.text;
  return s;
}

std::vector<MdLine> RenderMarkdown(std::string_view text, int width) {
  WC_CHECK(width >= 1, "width ", width);
  std::vector<MdLine> lines;
  RenderFrom(text, 0, nullptr, width, &lines);
  return lines;
}

MarkdownText::MarkdownText(int width) : width_(width) {
  WC_CHECK(width >= 1, "width ", width);
}

void MarkdownText::Append(std::string_view chunk) {
  text_.append(chunk);
  RenderOpen();
}

void MarkdownText::Clear() {
  text_.clear();
  open_start_ = open_line_ = 0;
  open_fence_.reset();
  RenderOpen();
}

void MarkdownText::SetWidth(int width) {
  WC_CHECK(width >= 1, "width ", width);
  width_ = width;
  open_start_ = open_line_ = 0;
  open_fence_.reset();
  RenderOpen();
}

void MarkdownText::RenderOpen() {
  // Blocks finished since the last call are final; the rest is rendered again.
  lines_.resize(open_line_);
  const std::string_view text(text_);
  const size_t end = open_start_ + Utf8CompletePrefix(text.substr(open_start_));
  const Progress p = RenderFrom(text.substr(0, end), open_start_, open_fence_, width_, &lines_);
  open_start_ = p.offset;
  open_line_ = p.lines;
  open_fence_ = p.fence;
}

std::vector<CodeBlock> ExtractCodeBlocks(std::string_view markdown) {
  std::vector<CodeBlock> blocks;
  for (size_t pos = 0; pos < markdown.size();) {
    const SourceLine line = LineAt(markdown, pos);
    pos = line.next;
    const std::optional<Fence> fence = FenceOpen(line.text);
    if (!fence) continue;
    CodeBlock block{std::string(InfoLanguage(fence->info)), ""};
    bool first = true;
    while (pos < markdown.size()) {
      const SourceLine l = LineAt(markdown, pos);
      pos = l.next;
      if (IsFenceClose(l.text, *fence)) break;
      if (!first) block.code += '\n';
      block.code.append(CodeLine(l.text, *fence));
      first = false;
    }
    blocks.push_back(std::move(block));
  }
  return blocks;
}

}  // namespace wc::tui
