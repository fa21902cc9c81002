// Markdown of a reply as it streams in (app/tui/markdown.h's MarkdownText), and properties of
// the rendering over random texts: the width bound, WrapText's wrap for plain paragraphs, and
// streaming equal to a full rendering for any chunking. The UTF-8 locale is set by tui_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "app/tui/markdown.h"
#include "app/tui/text_width.h"
#include "app/tui/wrap.h"
#include "serving/text_stream.h"
#include "tests/app/markdown_test_util.h"

namespace wc::tui {
namespace {

using namespace md_test;  // NOLINT(build/namespaces): the shared helpers

// ---- properties over random texts ----

// Random markdown-ish text: block starts, markers, wide and combining characters, emoji, tabs,
// controls, invalid and truncated UTF-8.
std::string RandomMarkdown(std::mt19937& rng, int pieces) {
  static const std::vector<std::string> kPieces = {"# ",
                                                   "### ",
                                                   "- ",
                                                   "  - ",
                                                   "1. ",
                                                   "> ",
                                                   "> > ",
                                                   "```python\n",
                                                   "```\n",
                                                   "~~~\n",
                                                   "```c",
                                                   "**",
                                                   "*",
                                                   "_",
                                                   "`",
                                                   "``",
                                                   "[",
                                                   "](",
                                                   ")",
                                                   "<https://",
                                                   ">",
                                                   "\n",
                                                   "\n",
                                                   "\n\n",
                                                   " ",
                                                   " ",
                                                   "\t",
                                                   "word",
                                                   "snake_case",
                                                   "a",
                                                   "longerwordwithoutspaces",
                                                   kYi + "\xE4\xBA\x8C",
                                                   "e\xCC\x81",
                                                   "\xF0\x9F\x98\x80",
                                                   "\xFF",
                                                   "\xE4\xB8",
                                                   "|",
                                                   "| a | b |\n",
                                                   "---\n",
                                                   "\\",
                                                   "def f(x):  # c\n",
                                                   "\"str\"",
                                                   "/* c",
                                                   "*/",
                                                   "\r",
                                                   "\x1B"};
  std::string s;
  std::uniform_int_distribution<size_t> pick(0, kPieces.size() - 1);
  for (int i = 0; i < pieces; ++i) s += kPieces[pick(rng)];
  return s;
}

TEST(MarkdownProperties, NoLineExceedsTheWidth) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    const std::string text = RandomMarkdown(rng, 1 + iter % 60);
    for (int w = 1 + iter % 7; w <= 130; w += 1 + iter % 13) {
      for (const MdLine& line : RenderMarkdown(text, w)) {
        const std::string plain = line.Plain();
        ASSERT_LE(DisplayWidth(plain), w) << "width " << w << " line '" << plain << "' of:\n"
                                          << text;
        for (const MdSpan& s : line.spans) {
          ASSERT_FALSE(s.text.empty());
          for (const char c : s.text) {
            ASSERT_TRUE(static_cast<unsigned char>(c) >= 0x20 && c != 0x7F) << text;
          }
        }
        for (size_t k = 1; k < line.spans.size(); ++k) {
          ASSERT_FALSE(line.spans[k].style == line.spans[k - 1].style &&
                       line.spans[k].syntax == line.spans[k - 1].syntax);
        }
      }
    }
  }
}

TEST(MarkdownProperties, PlainParagraphsWrapAsWrapText) {
  const std::vector<std::string> kPieces = {"a",         "bc",
                                            "word",      " ",
                                            " ",         "  ",
                                            "\t",        kYi,
                                            "e\xCC\x81", "\xF0\x9F\x98\x80",
                                            "\xFF",      "longerwordwithoutspaces",
                                            "x.y",       ","};
  std::mt19937 rng(11);
  std::uniform_int_distribution<size_t> pick(0, kPieces.size() - 1);
  for (int iter = 0; iter < 400; ++iter) {
    std::string text = "w";  // no indentation (an indented paragraph hangs it)
    for (int i = 0; i < iter % 40; ++i) text += kPieces[pick(rng)];
    for (int w = 1; w <= 40; w += 1 + iter % 5) {
      ASSERT_EQ(Render(text, w), WrapText(text, w)) << "width " << w << ": '" << text << "'";
    }
  }
}

// Streams `text` in random chunks (splitting UTF-8 characters too); after every chunk the lines
// must equal a full rendering of what has arrived (an unfinished character at the end left out).
void CheckStreaming(const std::string& text, int width, std::mt19937& rng) {
  MarkdownText md(width);
  std::uniform_int_distribution<size_t> len(1, 12);
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = std::min(len(rng), text.size() - pos);
    md.Append(std::string_view(text).substr(pos, n));
    pos += n;
    const std::string arrived = text.substr(0, pos);
    ASSERT_EQ(Dump(md.lines()),
              Dump(RenderMarkdown(arrived.substr(0, Utf8CompletePrefix(arrived)), width)))
        << "width " << width << " after " << pos << " bytes of:\n"
        << text;
  }
  EXPECT_EQ(md.text(), text);
}

TEST(MarkdownProperties, StreamingEqualsAFullRendering) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 200; ++iter) {
    CheckStreaming(RandomMarkdown(rng, 10 + iter % 80), 1 + (iter * 7) % 100, rng);
  }
  for (int width : {30, 80, 130}) CheckStreaming(kReply, width, rng);
}

TEST(MarkdownProperties, SetWidthAndClearRenderAgain) {
  wc::tui::MarkdownText md(80);
  md.Append(kReply.substr(0, 300));
  md.Append(kReply.substr(300));
  EXPECT_EQ(Dump(md.lines()), Dump(RenderMarkdown(kReply, 80)));
  md.SetWidth(30);
  EXPECT_EQ(md.width(), 30);
  EXPECT_EQ(Dump(md.lines()), Dump(RenderMarkdown(kReply, 30)));
  md.Append("\nmore **text**");
  EXPECT_EQ(Dump(md.lines()), Dump(RenderMarkdown(kReply + "\nmore **text**", 30)));
  md.Clear();
  EXPECT_TRUE(md.lines().empty());
  EXPECT_TRUE(md.text().empty());
  md.Append("*a*");
  EXPECT_EQ(Dump(md.lines()), "a{2,0}\n");
  md.Append("\xE4\xB8");  // half a character: left out until it completes
  EXPECT_EQ(Dump(md.lines()), "a{2,0}\n");
  md.Append("\x80");
  EXPECT_EQ(Dump(md.lines()), "a{2,0}" + kYi + "{0,0}\n");
}

TEST(MarkdownProperties, AppendKeepsFinishedBlocks) {
  MarkdownText md(40);
  md.Append("# T\npara one\n- item");
  EXPECT_EQ(md.final_bytes(), 4u);  // the heading: the paragraph after it may continue
  md.Append("\n");
  EXPECT_EQ(md.final_bytes(), 13u);  // "- item" starts a block, whatever follows
  md.Append("\n");
  EXPECT_EQ(md.final_bytes(), md.text().size());  // a blank line ends the list
  md.Append("```py\n");
  EXPECT_EQ(md.final_bytes(), md.text().size());  // the box's top
  std::string code;
  for (int i = 0; i < 500; ++i) code += "x" + std::to_string(i) + " = '''a\n";
  for (size_t i = 0; i < code.size(); i += 5) md.Append(code.substr(i, 5));
  // Only the last, unfinished line of an open fence is rendered again (not 500 lines a chunk).
  EXPECT_EQ(md.final_bytes(), md.text().rfind('\n') + 1);
  md.Append("```");
  EXPECT_EQ(md.final_bytes(), md.text().size() - 3);  // "```" may still become "```x", code
  md.Append("\n");
  EXPECT_EQ(md.final_bytes(), md.text().size());
  EXPECT_EQ(Dump(md.lines()), Dump(RenderMarkdown(md.text(), 40)));
  md.SetWidth(20);
  EXPECT_EQ(md.final_bytes(), md.text().size());
  EXPECT_EQ(Dump(md.lines()), Dump(RenderMarkdown(md.text(), 20)));
}

}  // namespace
}  // namespace wc::tui
