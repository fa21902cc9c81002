// The terminal-free TUI building blocks (app/tui/): characters and widths, and the line editor.
// History is in tui_history_test.cpp, wrap, status bar and core grid in tui_layout_test.cpp.
// Widths come from wcwidth, so the whole binary runs under a UTF-8 LC_CTYPE set here.
#include <gtest/gtest.h>

#include <clocale>
#include <string>

#include "app/tui/line_editor.h"
#include "app/tui/text_width.h"

namespace wc::tui {
namespace {

class Utf8LocaleEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (std::setlocale(LC_CTYPE, "C.UTF-8") == nullptr) SetUtf8Locale();
    ASSERT_TRUE(Utf8WidthsActive()) << "no UTF-8 locale: wide characters would measure 1 column";
  }
};
[[maybe_unused]] ::testing::Environment* const kLocale =
    ::testing::AddGlobalTestEnvironment(new Utf8LocaleEnvironment);

// é (precomposed, 2 bytes), 一 (3 bytes, 2 columns), 😀 (4 bytes, 2 columns), e + U+0301.
const std::string kE = "\xC3\xA9", kYi = "\xE4\xB8\x80", kSmile = "\xF0\x9F\x98\x80";
const std::string kAcute = "\xCC\x81", kFffd = "\xEF\xBF\xBD";

TEST(TuiText, WidthsComeFromWcwidth) {
  EXPECT_EQ(DisplayWidth("abc"), 3);
  EXPECT_EQ(DisplayWidth(kE), 1);
  EXPECT_EQ(DisplayWidth(kYi + kSmile), 4);
  EXPECT_EQ(DisplayWidth("e" + kAcute), 1);
  EXPECT_EQ(DisplayWidth("a\xFF"), 2);  // an invalid byte shows as U+FFFD
  EXPECT_EQ(CodePointWidth(0x4E00), 2);
  EXPECT_TRUE(IsZeroWidth(0x0301));
  EXPECT_FALSE(IsZeroWidth('\n'));
}

TEST(TuiText, CharactersKeepTheirMarksAndInvalidBytesStandAlone) {
  const std::string s = "e" + kAcute + kAcute + "x";  // e with two marks, then x
  EXPECT_EQ(NextChar(s, 0), 5u);
  EXPECT_EQ(PrevChar(s, 5), 0u);
  EXPECT_FALSE(IsCharBoundary(s, 1));  // before a mark
  EXPECT_FALSE(IsCharBoundary(s, 2));  // inside a mark's bytes
  // A truncated sequence and a stray continuation byte: one character per byte, and a valid
  // character right after them is not swallowed.
  const std::string bad = "\xE4\xB8" + kYi + "\x80";
  EXPECT_EQ(NextChar(bad, 0), 1u);
  EXPECT_EQ(NextChar(bad, 1), 2u);
  EXPECT_EQ(NextChar(bad, 2), 5u);
  EXPECT_EQ(NextChar(bad, 5), 6u);
  EXPECT_EQ(PrevChar(bad, 6), 5u);
  EXPECT_EQ(PrevChar(bad, 5), 2u);
  EXPECT_EQ(PrevChar(bad, 2), 1u);
  EXPECT_FALSE(IsCharBoundary(bad, 3));
  // A mark after '\n' does not join it.
  EXPECT_EQ(NextChar("\n" + kAcute, 0), 1u);
  EXPECT_EQ(PrevChar("\n" + kAcute, 3), 1u);
}

TEST(TuiText, FitWidthCutsWholeCharacters) {
  const std::string s = "ab" + kYi + "cd";  // 6 columns
  EXPECT_EQ(FitWidth(s, 6), s);
  EXPECT_EQ(FitWidth(s, 3), "ab");  // 一 would straddle the edge
  EXPECT_EQ(FitWidth(s, 4), "ab" + kYi);
  EXPECT_EQ(FitWidth(s, 4, true), "ab\xE2\x80\xA6");
  EXPECT_EQ(FitWidth(s, 1, true), "\xE2\x80\xA6");
  EXPECT_EQ(FitWidth("a\xFF", 5), "a" + kFffd);
  EXPECT_EQ(FitWidth(s, 0), "");
}

// ---- line editor ----

TEST(LineEditor, InsertAndMoveAscii) {
  LineEditor e;
  e.Insert("hello world");
  EXPECT_EQ(e.cursor(), 11u);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(e.MoveLeft());
  e.Insert("big ");
  EXPECT_EQ(e.text(), "hello big world");
  EXPECT_EQ(e.cursor(), 10u);
  EXPECT_TRUE(e.MoveLineStart());
  EXPECT_FALSE(e.MoveLeft());
  EXPECT_EQ(e.cursor(), 0u);
  EXPECT_TRUE(e.MoveLineEnd());
  EXPECT_FALSE(e.MoveRight());
  EXPECT_EQ(e.cursor(), 15u);
}

TEST(LineEditor, MovesByCodePointOverMultiByteAndWideCharacters) {
  LineEditor e;
  e.Insert("a" + kE + kYi + kSmile + "b");  // bytes 1 + 2 + 3 + 4 + 1
  EXPECT_EQ(e.cursor(), 11u);
  const size_t expected[] = {10, 6, 3, 1, 0};
  for (const size_t pos : expected) {
    EXPECT_TRUE(e.MoveLeft());
    EXPECT_EQ(e.cursor(), pos);
  }
  EXPECT_TRUE(e.MoveRight());
  EXPECT_TRUE(e.MoveRight());
  EXPECT_EQ(e.cursor(), 3u);
  EXPECT_EQ(e.cursor_column(), 2);
  EXPECT_TRUE(e.MoveRight());
  EXPECT_EQ(e.cursor_column(), 4);  // 一 is two columns
}

TEST(LineEditor, CombiningMarkIsPartOfThePreviousCharacter) {
  LineEditor e;
  e.Insert("e" + kAcute + "x");
  EXPECT_TRUE(e.MoveLeft());
  EXPECT_EQ(e.cursor(), 3u);
  EXPECT_TRUE(e.MoveLeft());
  EXPECT_EQ(e.cursor(), 0u);
  EXPECT_TRUE(e.MoveRight());
  EXPECT_EQ(e.cursor(), 3u);
  EXPECT_TRUE(e.DeleteBefore());  // e and its mark go together
  EXPECT_EQ(e.text(), "x");
  // A mark typed after a character joins it; a base typed before a lone mark takes it.
  e.Clear();
  e.Insert(kAcute + "z");
  e.MoveLineStart();
  e.Insert("a");
  EXPECT_EQ(e.text(), "a" + kAcute + "z");
  EXPECT_EQ(e.cursor(), 3u);  // after a + mark, not between them
}

TEST(LineEditor, CleansInput) {
  LineEditor e;
  // Invalid bytes become one U+FFFD each; "\r\n" and '\r' become '\n'; other controls go.
  e.Insert(
      "a\xFF\xE4\xB8"
      "b\r\nc\rd\x01\x1B[A\te");
  EXPECT_EQ(e.text(), "a" + kFffd + kFffd + kFffd + "b\nc\nd[A\te");
  e.SetText("x\xC0y");
  EXPECT_EQ(e.text(), "x" + kFffd + "y");
  EXPECT_EQ(e.cursor(), e.text().size());
  e.MoveLeft();
  e.MoveLeft();
  EXPECT_EQ(e.cursor(), 1u);  // the replacement is one character
}

TEST(LineEditor, BackspaceAndDelete) {
  LineEditor e;
  e.Insert("ab" + kYi + kSmile);
  EXPECT_TRUE(e.DeleteBefore());
  EXPECT_EQ(e.text(), "ab" + kYi);
  e.MoveLineStart();
  EXPECT_FALSE(e.DeleteBefore());
  e.MoveRight();
  EXPECT_TRUE(e.DeleteAt());
  EXPECT_EQ(e.text(), "a" + kYi);
  EXPECT_TRUE(e.DeleteAt());
  EXPECT_EQ(e.text(), "a");
  EXPECT_FALSE(e.DeleteAt());
}

TEST(LineEditor, DeleteWordBeforeIsUnixWordRubout) {
  LineEditor e;
  e.Insert("git commit -m fix");
  EXPECT_TRUE(e.DeleteWordBefore());
  EXPECT_EQ(e.text(), "git commit -m ");
  EXPECT_EQ(e.kill_buffer(), "fix");
  EXPECT_TRUE(e.DeleteWordBefore());
  EXPECT_EQ(e.text(), "git commit ");
  EXPECT_EQ(e.kill_buffer(), "-m ");
  e.SetText("foo bar-baz  ");
  EXPECT_TRUE(e.DeleteWordBefore());
  EXPECT_EQ(e.text(), "foo ");
  e.SetText("\xE4\xBD\xA0\xE5\xA5\xBD \xE4\xB8\x96\xE7\x95\x8C");  // 你好 世界
  e.DeleteWordBefore();
  EXPECT_EQ(e.text(), "\xE4\xBD\xA0\xE5\xA5\xBD ");
  e.Clear();
  EXPECT_FALSE(e.DeleteWordBefore());
}

TEST(LineEditor, KillToLineStartAndEndAndYank) {
  LineEditor e;
  e.Insert("hello world");
  for (int i = 0; i < 5; ++i) e.MoveLeft();
  EXPECT_TRUE(e.DeleteToLineEnd());
  EXPECT_EQ(e.text(), "hello ");
  EXPECT_EQ(e.kill_buffer(), "world");
  EXPECT_EQ(e.cursor(), 6u);
  EXPECT_TRUE(e.Yank());
  EXPECT_EQ(e.text(), "hello world");
  EXPECT_EQ(e.cursor(), 11u);
  for (int i = 0; i < 5; ++i) e.MoveLeft();
  EXPECT_TRUE(e.DeleteToLineStart());
  EXPECT_EQ(e.text(), "world");
  EXPECT_EQ(e.kill_buffer(), "hello ");
  EXPECT_EQ(e.cursor(), 0u);
  EXPECT_FALSE(e.DeleteToLineStart());
}

TEST(LineEditor, KillsStopAtLinesAndJoinThemAtTheEdges) {
  LineEditor e;
  e.Insert("one two\nthree four");
  e.MoveWordLeft();  // before "four"
  EXPECT_TRUE(e.DeleteToLineStart());
  EXPECT_EQ(e.text(), "one two\nfour");
  EXPECT_TRUE(e.DeleteToLineStart());  // at a line start: the '\n' before it
  EXPECT_EQ(e.text(), "one twofour");
  EXPECT_EQ(e.cursor(), 7u);
  e.SetText("ab\ncd");
  e.MoveUp();
  EXPECT_EQ(e.cursor(), 2u);
  EXPECT_TRUE(e.DeleteToLineEnd());  // at a line end: the '\n' after it
  EXPECT_EQ(e.text(), "abcd");
  EXPECT_EQ(e.cursor(), 2u);
}

TEST(LineEditor, WordMotion) {
  LineEditor e;
  e.Insert("foo-bar  baz");
  e.MoveTextStart();
  const size_t forward[] = {3, 7, 12};
  for (const size_t pos : forward) {
    EXPECT_TRUE(e.MoveWordRight());
    EXPECT_EQ(e.cursor(), pos);
  }
  EXPECT_FALSE(e.MoveWordRight());
  const size_t backward[] = {9, 4, 0};
  for (const size_t pos : backward) {
    EXPECT_TRUE(e.MoveWordLeft());
    EXPECT_EQ(e.cursor(), pos);
  }
  // Letters beyond ASCII are word characters; so are CJK ideographs.
  e.SetText("na\xC3\xAFve caf\xC3\xA9, \xE4\xB8\x80\xE4\xBA\x8C");  // naïve café, 一二
  EXPECT_TRUE(e.MoveWordLeft());
  EXPECT_EQ(e.cursor(), 14u);
  EXPECT_TRUE(e.MoveWordLeft());
  EXPECT_EQ(e.cursor(), 7u);
  EXPECT_TRUE(e.DeleteWordAfter());
  EXPECT_EQ(e.text(), "na\xC3\xAFve , \xE4\xB8\x80\xE4\xBA\x8C");
  EXPECT_EQ(e.kill_buffer(), "caf\xC3\xA9");
}

TEST(LineEditor, NewlinesAndVerticalMovesKeepTheGoalColumn) {
  LineEditor e;
  e.Insert("abcdef");
  e.InsertNewline();
  e.Insert("xy");
  e.InsertNewline();
  e.Insert("ab" + kYi + "\xE4\xBA\x8C");  // ab一二: a0 b1 一2-3 二4-5
  EXPECT_EQ(e.line_count(), 3);
  EXPECT_EQ(e.text(), "abcdef\nxy\nab" + kYi + "\xE4\xBA\x8C");
  e.MoveTextStart();
  for (int i = 0; i < 4; ++i) e.MoveRight();
  EXPECT_TRUE(e.MoveDown());
  EXPECT_EQ(e.cursor(), 9u);  // end of "xy": the line is shorter
  EXPECT_TRUE(e.MoveDown());
  EXPECT_EQ(e.cursor(), 15u);  // column 4: before 二
  EXPECT_EQ(e.cursor_line(), 2);
  EXPECT_FALSE(e.MoveDown());
  EXPECT_TRUE(e.MoveUp());
  EXPECT_TRUE(e.MoveUp());
  EXPECT_EQ(e.cursor(), 4u);  // back at column 4
  EXPECT_FALSE(e.MoveUp());   // the front end walks the history instead
  // A goal column inside a wide character lands before it.
  e.MoveRight();
  e.MoveLeft();
  e.MoveLeft();  // column 3
  e.MoveDown();
  e.MoveDown();
  EXPECT_EQ(e.cursor(), 12u);  // before 一 (columns 2-3)
  e.MoveLineStart();
  EXPECT_EQ(e.cursor(), 10u);
  e.MoveLineEnd();
  EXPECT_EQ(e.cursor(), e.text().size());
  EXPECT_EQ(e.Take(), "abcdef\nxy\nab" + kYi + "\xE4\xBA\x8C");
  EXPECT_TRUE(e.empty());
  EXPECT_EQ(e.cursor(), 0u);
}

TEST(LineEditor, RenderScrollsStickilyAndShowsTheCursor) {
  LineEditor e;
  e.Insert("0123456789abcdef");
  EditorView v = e.Render(10);
  ASSERT_EQ(v.lines.size(), 1u);
  EXPECT_EQ(v.lines[0], "789abcdef");  // room for the cursor after the last character
  EXPECT_EQ(v.cursor_col, 9);
  EXPECT_EQ(v.scroll_col, 7);
  e.MoveLineStart();
  v = e.Render(10);
  EXPECT_EQ(v.lines[0], "0123456789");
  EXPECT_EQ(v.cursor_col, 0);
  for (int i = 0; i < 12; ++i) e.MoveRight();
  v = e.Render(10);
  EXPECT_EQ(v.lines[0], "3456789abc");
  EXPECT_EQ(v.cursor_col, 9);
  for (int i = 0; i < 5; ++i) e.MoveLeft();
  v = e.Render(10);
  EXPECT_EQ(v.lines[0], "3456789abc");  // the window stays while the cursor is in it
  EXPECT_EQ(v.cursor_col, 4);
  e.SetText("short");
  v = e.Render(10);
  EXPECT_EQ(v.lines[0], "short");  // and comes back when the text leaves room
  EXPECT_EQ(v.cursor_col, 5);
}

TEST(LineEditor, RenderNeverCutsAWideCharacter) {
  LineEditor e;
  e.Insert("\xE4\xB8\x80\xE4\xBA\x8C\xE4\xB8\x89\xE5\x9B\x9B\xE4\xBA\x94\xE5\x85\xAD");  // 一..六
  EditorView v = e.Render(5);
  EXPECT_EQ(v.lines[0], "\xE4\xBA\x94\xE5\x85\xAD");  // 五六, columns 8-11
  EXPECT_EQ(v.cursor_col, 4);
  e.MoveLineStart();
  e.MoveRight();
  e.MoveRight();
  v = e.Render(5);
  EXPECT_EQ(v.scroll_col, 4);
  EXPECT_EQ(v.lines[0], "\xE4\xB8\x89\xE5\x9B\x9B ");  // 三四 and a blank for half of 五
  EXPECT_EQ(v.cursor_col, 0);
  // A window starting inside a wide character shows a blank for its visible half.
  e.SetText("a" + kYi + "\xE4\xBA\x8C\xE4\xB8\x89");  // a一二三: 二 at columns 3-4
  v = e.Render(4);
  EXPECT_EQ(v.scroll_col, 4);
  EXPECT_EQ(v.lines[0], " \xE4\xB8\x89");
  EXPECT_EQ(v.cursor_col, 3);
  // Tabs are spaces to the next multiple of 8.
  e.SetText("a\tb");
  v = e.Render(20);
  EXPECT_EQ(v.lines[0], "a       b");
  EXPECT_EQ(v.cursor_col, 9);
}

TEST(LineEditor, RenderShowsSeveralLinesAroundTheCursor) {
  LineEditor e;
  e.Insert("l0\nl1\nl2\nl3");
  EditorView v = e.Render(10, 2);
  EXPECT_EQ(v.lines, (std::vector<std::string>{"l2", "l3"}));
  EXPECT_EQ(v.first_line, 2);
  EXPECT_EQ(v.cursor_row, 1);
  EXPECT_EQ(v.cursor_col, 2);
  EXPECT_EQ(v.line_count, 4);
  e.MoveUp();
  v = e.Render(10, 2);
  EXPECT_EQ(v.first_line, 2);  // sticky: l2 is still in view
  EXPECT_EQ(v.cursor_row, 0);
  e.MoveUp();
  e.MoveUp();
  v = e.Render(10, 2);
  EXPECT_EQ(v.lines, (std::vector<std::string>{"l0", "l1"}));
  EXPECT_EQ(v.cursor_row, 0);
  v = e.Render(10, 1);  // one row: the cursor's line only
  EXPECT_EQ(v.lines, (std::vector<std::string>{"l0"}));
  v = e.Render(10, 8);
  EXPECT_EQ(v.lines.size(), 4u);
  EXPECT_EQ(v.first_line, 0);
  // Every line scrolls with the cursor's line.
  e.SetText("abcdefgh\nxyz");
  e.MoveUp();
  e.MoveLineEnd();
  v = e.Render(4, 2);
  EXPECT_EQ(v.scroll_col, 5);
  EXPECT_EQ(v.lines, (std::vector<std::string>{"fgh", ""}));
  EXPECT_EQ(v.cursor_col, 3);
}

}  // namespace
}  // namespace wc::tui
