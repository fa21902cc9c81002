// Markdown rendering of the chat's replies (app/tui/markdown.h): a scripted reply at three widths,
// inline markup, each kind of block, and the code blocks /copy takes. Streaming and properties
// over random texts are in markdown_stream_test.cpp. The UTF-8 locale is set by tui_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/tui/markdown.h"
#include "app/tui/text_width.h"
#include "tests/app/markdown_test_util.h"

namespace wc::tui {
namespace {

using namespace md_test;  // NOLINT(build/namespaces): the shared helpers

TEST(Markdown, ScriptedReplyAt80Columns) {
  const int w = 80;
  EXPECT_EQ(
      Render(kReply, w),
      (Lines{
          "# Wormhole attention",
          "",
          "The paged KV cache keeps each user's keys in 64-token blocks, so a long reply",
          "never moves memory; see the docs (https://example.com/kv) and snake_case_names.",
          "",
          kBullet + " Bullet one with a fairly long text that has to wrap onto a second line at",
          "  narrow widths",
          "  " + kBullet +
              " nested bullet, also long enough to wrap when the terminal is thirty columns",
          "    wide",
          kBullet + " Bullet two",
          "",
          "1. First step that explains what happens when the request arrives at the serving",
          "   loop",
          "2. Second step",
          "",
          Top(w, "python"),
          Row(w, "def greet(name):  # say hello"),
          Row(w, "    \"\"\"Doc.\"\"\""),
          Row(w, "    return f\"hi {name}\" + 'x'"),
          Bottom(w),
          "",
          kV + " A quote that is long enough to wrap inside its bar at thirty columns.",
          "",
          Rep(kH, w),
          "",
          "| col | other |",
          "|-----|-------|",
          "| a   | b     |",
      }));
}

TEST(Markdown, ScriptedReplyAt130Columns) {
  const int w = 130;
  EXPECT_EQ(
      Render(kReply, w),
      (Lines{
          "# Wormhole attention",
          "",
          "The paged KV cache keeps each user's keys in 64-token blocks, so a long reply "
          "never moves memory; see the docs",
          "(https://example.com/kv) and snake_case_names.",
          "",
          kBullet + " Bullet one with a fairly long text that has to wrap onto a second line at "
                    "narrow widths",
          "  " + kBullet +
              " nested bullet, also long enough to wrap when the terminal is thirty columns "
              "wide",
          kBullet + " Bullet two",
          "",
          "1. First step that explains what happens when the request arrives at the "
          "serving loop",
          "2. Second step",
          "",
          Top(w, "python"),
          Row(w, "def greet(name):  # say hello"),
          Row(w, "    \"\"\"Doc.\"\"\""),
          Row(w, "    return f\"hi {name}\" + 'x'"),
          Bottom(w),
          "",
          kV + " A quote that is long enough to wrap inside its bar at thirty columns.",
          "",
          Rep(kH, w),
          "",
          "| col | other |",
          "|-----|-------|",
          "| a   | b     |",
      }));
}

TEST(Markdown, ScriptedReplyAt30Columns) {
  const int w = 30;
  EXPECT_EQ(Render(kReply, w), (Lines{
                                   "# Wormhole attention",
                                   "",
                                   "The paged KV cache keeps each",
                                   "user's keys in 64-token",
                                   "blocks, so a long reply never",
                                   "moves memory; see the docs",
                                   "(https://example.com/kv) and",
                                   "snake_case_names.",
                                   "",
                                   kBullet + " Bullet one with a fairly",
                                   "  long text that has to wrap",
                                   "  onto a second line at narrow",
                                   "  widths",
                                   "  " + kBullet + " nested bullet, also long",
                                   "    enough to wrap when the",
                                   "    terminal is thirty columns",
                                   "    wide",
                                   kBullet + " Bullet two",
                                   "",
                                   "1. First step that explains",
                                   "   what happens when the",
                                   "   request arrives at the",
                                   "   serving loop",
                                   "2. Second step",
                                   "",
                                   Top(w, "python"),
                                   Row(w, "def greet(name):  # say he"),
                                   Row(w, "llo", true),
                                   Row(w, "    \"\"\"Doc.\"\"\""),
                                   Row(w, "    return f\"hi {name}\" +  "),
                                   Row(w, "'x'", true),
                                   Bottom(w),
                                   "",
                                   kV + " A quote that is long enough",
                                   kV + " to wrap inside its bar at",
                                   kV + " thirty columns.",
                                   "",
                                   Rep(kH, w),
                                   "",
                                   "| col | other |",
                                   "|-----|-------|",
                                   "| a   | b     |",
                               }));
}

TEST(Markdown, ScriptedReplyStyles) {
  const std::vector<MdLine> lines = RenderMarkdown(kReply, 80);
  const MdLine& heading = lines[0];
  ASSERT_EQ(heading.spans.size(), 1u);
  EXPECT_EQ(heading.spans[0].style, kMdHeading | kMdBold);

  const MdSpan* bold = FindSpan(lines, "The paged", "paged KV cache");
  ASSERT_NE(bold, nullptr);
  EXPECT_EQ(bold->style, kMdBold);
  const MdSpan* italic = FindSpan(lines, "The paged", "each user's");
  ASSERT_NE(italic, nullptr);
  EXPECT_EQ(italic->style, kMdItalic);
  const MdSpan* code = FindSpan(lines, "The paged", "64-token");
  ASSERT_NE(code, nullptr);
  EXPECT_EQ(code->style, kMdCode);

  EXPECT_EQ(lines[5].spans[0].text, kBullet);
  EXPECT_EQ(lines[5].spans[0].style, kMdFrame);
  const MdSpan* number = FindSpan(lines, "First step", "1.");
  ASSERT_NE(number, nullptr);
  EXPECT_EQ(number->style, kMdFrame);

  const MdSpan* lang = FindSpan(lines, "python", "python");
  ASSERT_NE(lang, nullptr);
  EXPECT_EQ(lang->style, kMdFrame | kMdLanguage);
  const MdSpan* def = FindSpan(lines, "def greet", "def");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->style, kMdCodeBlock);
  EXPECT_EQ(def->syntax, SyntaxClass::kKeyword);
  const MdSpan* comment = FindSpan(lines, "def greet", "# say hello");
  ASSERT_NE(comment, nullptr);
  EXPECT_EQ(comment->syntax, SyntaxClass::kComment);
  const MdSpan* str = FindSpan(lines, "return", "'x'");
  ASSERT_NE(str, nullptr);
  EXPECT_EQ(str->syntax, SyntaxClass::kString);
  EXPECT_EQ(str->style, kMdCodeBlock);
  const MdSpan* border = FindSpan(lines, "def greet", kV);
  ASSERT_NE(border, nullptr);
  EXPECT_EQ(border->style, kMdFrame);

  const MdSpan* bar = FindSpan(lines, "A quote", kV + " ");
  ASSERT_NE(bar, nullptr);
  EXPECT_EQ(bar->style, kMdFrame | kMdQuote);
  const MdSpan* quoted = FindSpan(lines, "A quote",
                                  "A quote that is long enough to wrap inside "
                                  "its bar at thirty columns.");
  ASSERT_NE(quoted, nullptr);
  EXPECT_EQ(quoted->style, kMdQuote);
  const MdSpan* rule = FindSpan(lines, Rep(kH, 80), Rep(kH, 80));
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->style, kMdFrame);
  const MdSpan* table = FindSpan(lines, "| col", "| col | other |");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->style, 0);
}

// ---- inline markup ----

// The spans of a one-line rendering as "text{style}".
std::string Spans(const std::string& text, int width = 80) {
  const std::vector<MdLine> lines = RenderMarkdown(text, width);
  std::string out;
  for (const MdLine& l : lines) {
    for (const MdSpan& s : l.spans) out += s.text + "{" + std::to_string(s.style) + "}";
    out += "|";
  }
  return out;
}

TEST(MarkdownInline, CodeSpansDropTheirBackticks) {
  EXPECT_EQ(Spans("a `b*c*` d"), "a {0}b*c*{4} d{0}|");
  EXPECT_EQ(Spans("``x `y` z``"), "x `y` z{4}|");    // double backticks hold single ones
  EXPECT_EQ(Spans("`` `a` ``"), "`a`{4}|");          // one space each side is stripped
  EXPECT_EQ(Spans("open `code"), "open `code{0}|");  // unclosed: literal
}

TEST(MarkdownInline, BoldAndItalic) {
  EXPECT_EQ(Spans("**b** and __b__"), "b{1} and {0}b{1}|");
  EXPECT_EQ(Spans("*i* and _i_"), "i{2} and {0}i{2}|");
  EXPECT_EQ(Spans("***both***"), "both{3}|");
  EXPECT_EQ(Spans("**bold *and italic* inside**"), "bold {1}and italic{3} inside{1}|");
  EXPECT_EQ(Spans("snake_case_names and 2*3*4"), "snake_case_names and 2{0}3{2}4{0}|");
  EXPECT_EQ(Spans("a_b_ _c_d"), "a_b_ _c_d{0}|");  // underscores inside words stay
  EXPECT_EQ(Spans("5 * 3 and a * b"), "5 * 3 and a * b{0}|");
}

TEST(MarkdownInline, UnclosedMarkersStayLiteralUntilClosed) {
  EXPECT_EQ(Spans("say **bol"), "say **bol{0}|");
  EXPECT_EQ(Spans("say **bold**"), "say {0}bold{1}|");
  EXPECT_EQ(Spans("say *it"), "say *it{0}|");
  EXPECT_EQ(Spans("**a *b**"), "*{0}a b{2}|");  // as CommonMark pairs them
}

TEST(MarkdownInline, EscapesAndLinks) {
  EXPECT_EQ(Spans("\\*not\\* \\`x\\` a\\b"), "*not* `x` a\\b{0}|");
  EXPECT_EQ(Spans("see [the **docs**](https://x.org/a_(b)) now"),
            "see the {0}docs{1} (https://x.org/a_(b)) now{0}|");
  EXPECT_EQ(Spans("[https://x.org](https://x.org)"), "https://x.org{0}|");
  EXPECT_EQ(Spans("<https://x.org/a> and ![logo](l.png)"), "https://x.org/a and logo (l.png){0}|");
  EXPECT_EQ(Spans("[not a link] (x) [open](http"), "[not a link] (x) [open](http{0}|");
}

// ---- blocks ----

TEST(Markdown, HeadingsKeepTheirMarks) {
  EXPECT_EQ(Render("# One\n## Two ##\n###### Six\n####### seven\n#tag", 40),
            (Lines{"# One", "## Two", "###### Six", "####### seven #tag"}));  // not headings: text
  const std::vector<MdLine> lines = RenderMarkdown("## A `code` word", 40);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(Spans("## A `code` word"),
            "## A {9}code{13} word{9}|");  // heading | bold, and code inside
  EXPECT_EQ(Render("## A heading that wraps", 12), (Lines{"## A heading", "that wraps"}));
  EXPECT_EQ(Spans("# H\ntext"), "# H{9}|text{0}|");  // a heading takes no continuation
}

TEST(Markdown, ListsHangTheirContinuationLines) {
  EXPECT_EQ(Render("- one two three four\n  more words here\n* star\n+ plus", 14),
            (Lines{kBullet + " one two", "  three four", "  more words", "  here",
                   kBullet + " star", kBullet + " plus"}));
  EXPECT_EQ(Render("10. ten items in a list\n9) nine", 12),
            (Lines{"10. ten", "    items in", "    a list", "9) nine"}));
  EXPECT_EQ(Render("- a\n  - b b b b\n    - c c c c", 10),
            (Lines{kBullet + " a", "  " + kBullet + " b b b", "    b", "    " + kBullet + " c c",
                   "      c c"}));
  EXPECT_EQ(Render("- [ ] task\n- [x] done", 20),
            (Lines{kBullet + " [ ] task", kBullet + " [x] done"}));
  // Deep nesting at a narrow width gives up indentation, not the text's room.
  EXPECT_EQ(Render("            - deep item", 10),
            (Lines{"    " + kBullet + " deep", "      item"}));
  EXPECT_EQ(Render("- ab cd", 2), (Lines{kBullet, "ab", "cd"}));  // no room to hang
  EXPECT_EQ(Render("-notalist 3.14 1.5x", 40), (Lines{"-notalist 3.14 1.5x"}));
}

TEST(Markdown, IndentedParagraphsKeepTheirIndentation) {
  EXPECT_EQ(Render("- item\n\n  more about the item", 14),
            (Lines{kBullet + " item", "", "  more about", "  the item"}));
}

TEST(Markdown, CodeBlocksInABox) {
  const int w = 20;
  EXPECT_EQ(Render("```\nplain\n```", w), (Lines{Top(w), Row(w, "plain"), Bottom(w)}));
  EXPECT_EQ(Render("~~~ rust ignore\nfn x\n~~~", w),
            (Lines{Top(w, "rust"), Row(w, "fn x"), Bottom(w)}));
  EXPECT_EQ(Render("```\n\ta\tb\n```", w), (Lines{Top(w), Row(w, "    a   b"), Bottom(w)}));
  // Too wide: broken at the box's edge, the rest marked with ↪; no word wrap.
  EXPECT_EQ(Render("```\nabcdefghijklmnopqrstuvwxyz\n```", w),
            (Lines{Top(w), Row(w, "abcdefghijklmnop"), Row(w, "qrstuvwxyz", true), Bottom(w)}));
  EXPECT_EQ(Render("```\n" + Rep(kYi, 9) + "\n```", w),  // 18 columns into 16
            (Lines{Top(w), Row(w, Rep(kYi, 8)), Row(w, kYi, true), Bottom(w)}));
  // A long language name is cut with an ellipsis.
  EXPECT_EQ(Render("```averyveryverylonglanguage\n```", w),
            (Lines{Top(w, "averyveryvery\xE2\x80\xA6"), Bottom(w)}));
  EXPECT_EQ(Render("```\n```", w), (Lines{Top(w), Bottom(w)}));
  // Inside, markdown is text; the fence's indentation comes off; a longer fence holds shorter.
  EXPECT_EQ(Render("  ````md\n  # no\n  ```\n  ````", w),
            (Lines{Top(w, "md"), Row(w, "# no"), Row(w, "```"), Bottom(w)}));
  // Backticks in the info string: inline code, not a fence.
  EXPECT_EQ(Render("```a`b```", w), (Lines{"a`b"}));
}

TEST(Markdown, AnOpenFenceClosesWhenItsFenceArrives) {
  const int w = 16;
  EXPECT_EQ(Render("```sh\necho hi\n", w), (Lines{Top(w, "sh"), Row(w, "echo hi")}));
  EXPECT_EQ(Render("```sh\necho hi\n``", w),
            (Lines{Top(w, "sh"), Row(w, "echo hi"), Row(w, "``")}));
  EXPECT_EQ(Render("```sh\necho hi\n```", w), (Lines{Top(w, "sh"), Row(w, "echo hi"), Bottom(w)}));
  EXPECT_EQ(Render("```sh\necho hi\n```\nafter", w),
            (Lines{Top(w, "sh"), Row(w, "echo hi"), Bottom(w), "after"}));
}

TEST(Markdown, CodeBlocksAtTinyWidthsHaveNoBox) {
  EXPECT_EQ(Render("```py\nabcdefg\n```", 5), (Lines{"abcde", "fg"}));
  EXPECT_EQ(Render("```py\n" + kYi + "x\n```", 1), (Lines{kFffd, "x"}));
  EXPECT_EQ(Render("```py\nab\n```", 6), (Lines{Top(6), Row(6, "ab"), Bottom(6)}));
}

TEST(Markdown, UnknownLanguagesHaveNoSyntaxClasses) {
  const std::vector<MdLine> lines = RenderMarkdown("```klingon\ndef x # y\n```", 30);
  ASSERT_EQ(lines.size(), 3u);
  for (const MdSpan& s : lines[1].spans) EXPECT_EQ(s.syntax, SyntaxClass::kNone) << s.text;
  EXPECT_EQ(lines[0].Plain(), Top(30, "klingon"));
}

TEST(Markdown, QuotesRules_Tables) {
  EXPECT_EQ(Render("> one\n>\n> > two\nlazy", 20),
            (Lines{kV + " one", kV, kV + " " + kV + " two lazy"}));
  EXPECT_EQ(Render("> - item\n> ```\n> code\n> ```", 12),
            (Lines{kV + " " + kBullet + " item", kV + " " + Top(10), kV + " " + Row(10, "code"),
                   kV + " " + Bottom(10)}));
  EXPECT_EQ(Render("***\n___\n- - -", 3), (Lines{Rep(kH, 3), Rep(kH, 3), Rep(kH, 3)}));
  EXPECT_EQ(Render("| a | b |\n|---|---|\n| c | **d** |", 6),
            (Lines{"| a | ", "b |", "|---|-", "--|", "| c | ", "**d** ", "|"}));
  EXPECT_EQ(Render("> quote", 2), (Lines{"qu", "ot", "e"}));  // no room for the bar
}

TEST(Markdown, BlankLinesCollapseToOne) {
  EXPECT_EQ(Render("\n\n  \na\n\n\n\nb\n \t\nc\n\n", 10), (Lines{"a", "", "b", "", "c", ""}));
  EXPECT_EQ(Render("a\nb", 10), (Lines{"a b"}));  // a soft break is a space
  EXPECT_EQ(Render("", 10), (Lines{}));
}

TEST(Markdown, ControlsTabsAndInvalidBytes) {
  EXPECT_EQ(Render("a\x07\x1B[2Jb\r\n\xFFx\ty", 30),
            (Lines{"a[2Jb " + kFffd + "x" + std::string(8, ' ') + "y"}));
}

// ---- code blocks for /copy ----

TEST(MarkdownCodeBlocks, ExtractedVerbatim) {
  const std::vector<CodeBlock> blocks = ExtractCodeBlocks(
      "text\n```python\ndef f():\n\treturn 1\n\n```\n> ```\n> quoted\n> ```\n"
      "1. step\n   ```sh\n   ls -l\n     indented\n   ```\n````md\n```\n````\n~~~\nopen\nend");
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[0].language, "python");
  EXPECT_EQ(blocks[0].code, "def f():\n\treturn 1\n");
  EXPECT_EQ(blocks[1].language, "sh");
  EXPECT_EQ(blocks[1].code, "ls -l\n  indented");
  EXPECT_EQ(blocks[2].language, "md");
  EXPECT_EQ(blocks[2].code, "```");
  EXPECT_EQ(blocks[3].language, "");
  EXPECT_EQ(blocks[3].code, "open\nend");  // unclosed: to the end
  EXPECT_TRUE(ExtractCodeBlocks("no code `here`").empty());
  EXPECT_EQ(ExtractCodeBlocks("```\n```")[0].code, "");
  EXPECT_EQ(ExtractCodeBlocks("```c\r\nint x;\r\n```\r\n")[0].code, "int x;");
}

}  // namespace
}  // namespace wc::tui
