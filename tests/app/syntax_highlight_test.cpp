// Syntax colours of code blocks (app/tui/syntax_highlight.h) from GNU source-highlight's
// language definitions: classes per language, state across lines, aliases, unknown languages.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "app/tui/syntax_highlight.h"

namespace wc::tui {
namespace {

// ---- syntax colours ----

// The text of each span of `spans` over `lines`, as "text:class".
std::vector<std::string> SpanTexts(const std::vector<std::string>& lines,
                                   const std::vector<std::vector<SyntaxSpan>>& spans) {
  std::vector<std::string> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    for (const SyntaxSpan& s : spans[i]) {
      out.push_back(lines[i].substr(s.begin, s.end - s.begin) + ":" +
                    std::to_string(static_cast<int>(s.cls)));
    }
    out.push_back("|");
  }
  return out;
}

std::string Cls(SyntaxClass c) {
  return std::to_string(static_cast<int>(c));
}

TEST(SyntaxHighlight, Python) {
  const std::vector<std::string> code = {"def f(x):  # hi", "    return 'a' + 12"};
  const auto spans = HighlightCode("python", code);
  ASSERT_TRUE(spans.has_value());
  EXPECT_EQ(SpanTexts(code, *spans),
            (std::vector<std::string>{
                "def:" + Cls(SyntaxClass::kKeyword), "f:" + Cls(SyntaxClass::kFunction),
                "(:" + Cls(SyntaxClass::kSymbol),
                ")::" + Cls(SyntaxClass::kSymbol),  // one span: "):"
                "# hi:" + Cls(SyntaxClass::kComment), "|", "return:" + Cls(SyntaxClass::kKeyword),
                "'a':" + Cls(SyntaxClass::kString), "+:" + Cls(SyntaxClass::kSymbol),
                "12:" + Cls(SyntaxClass::kNumber), "|"}));
  EXPECT_TRUE(HighlightCode("py", code).has_value());
  EXPECT_TRUE(HighlightCode("Python3 {.numberLines}", code).has_value());
}

TEST(SyntaxHighlight, CppCarriesCommentsAcrossLines) {
  const std::vector<std::string> code = {"#include <x>", "int a; /* one", "two */ return 0;"};
  const auto spans = HighlightCode("c++", code);
  ASSERT_TRUE(spans.has_value());
  EXPECT_EQ(SpanTexts(code, *spans),
            (std::vector<std::string>{
                "#include:" + Cls(SyntaxClass::kPreproc), "<x>:" + Cls(SyntaxClass::kString), "|",
                "int:" + Cls(SyntaxClass::kType), ";:" + Cls(SyntaxClass::kSymbol),
                "/* one:" + Cls(SyntaxClass::kComment), "|", "two */:" + Cls(SyntaxClass::kComment),
                "return:" + Cls(SyntaxClass::kKeyword), "0:" + Cls(SyntaxClass::kNumber),
                ";:" + Cls(SyntaxClass::kSymbol), "|"}));
  EXPECT_TRUE(HighlightCode("cpp", code).has_value());
}

TEST(SyntaxHighlight, Shell) {
  const std::vector<std::string> code = {"echo \"$HOME\" # c"};
  for (const char* lang : {"sh", "bash", "shell", "zsh"}) {
    const auto spans = HighlightCode(lang, code);
    ASSERT_TRUE(spans.has_value()) << lang;
    const std::vector<std::string> texts = SpanTexts(code, *spans);
    EXPECT_NE(std::find(texts.begin(), texts.end(), "# c:" + Cls(SyntaxClass::kComment)),
              texts.end())
        << lang;
  }
}

TEST(SyntaxHighlight, UnknownLanguagesAndMissingDataGiveNothing) {
  const std::vector<std::string> code = {"x = 1"};
  EXPECT_FALSE(HighlightCode("klingon", code).has_value());
  EXPECT_FALSE(HighlightCode("", code).has_value());
  EXPECT_FALSE(HighlightCodeFrom("/nonexistent/source-highlight", "python", code).has_value());
  for (const char* lang : {"rust", "rs", "golang", "js", "ts", "json", "java", "c"}) {
    EXPECT_TRUE(HighlightCode(lang, code).has_value()) << lang;
  }
  const auto empty = HighlightCode("python", {});
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace wc::tui
