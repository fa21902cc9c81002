// /find's and Ctrl-R's matching (app/tui/scrollback_search.h): smart case, matches per line, the
// walk through them, and the history search.
#include "app/tui/scrollback_search.h"

#include <gtest/gtest.h>

#include "app/tui/search_bars.h"
#include "app/tui/text_width.h"

namespace wc::tui {
namespace {

using Ranges = std::vector<std::pair<size_t, size_t>>;

TEST(ScrollbackSearch, SmartCaseAndNonOverlappingMatches) {
  EXPECT_EQ(MatchesInLine("Falcon flies; falcons FALCON", "falcon"),
            (Ranges{{0, 6}, {14, 20}, {22, 28}}));
  EXPECT_EQ(MatchesInLine("Falcon flies; falcons FALCON", "Falcon"), (Ranges{{0, 6}}));
  EXPECT_EQ(MatchesInLine("aaaa", "aa"), (Ranges{{0, 2}, {2, 4}}));
  EXPECT_TRUE(MatchesInLine("abc", "").empty());
  EXPECT_TRUE(MatchesInLine("ab", "abc").empty());
  // Non-ASCII letters match exactly; their bytes are never folded.
  EXPECT_EQ(MatchesInLine("Ärger und ärger", "ärger"), (Ranges{{11, 17}}));
  EXPECT_EQ(MatchesInLine("日本語の本", "本"), (Ranges{{3, 6}, {12, 15}}));
}

TEST(ScrollbackSearch, FindInLinesListsMatchesTopToBottom) {
  const std::vector<std::string> lines = {"the sea", "", "sea and sea", "nothing"};
  const std::vector<ScrollMatch> m = FindInLines(lines, "sea");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].line, 0);
  EXPECT_EQ(m[0].begin, 4u);
  EXPECT_EQ(m[1].line, 2);
  EXPECT_EQ(m[1].begin, 0u);
  EXPECT_EQ(m[2].line, 2);
  EXPECT_EQ(m[2].begin, 8u);
  EXPECT_EQ(m[2].end, 11u);
}

TEST(ScrollbackSearch, TheWalkStartsAtTheLatestAndWrapsAtBothEnds) {
  FindWalk w;
  EXPECT_FALSE(w.active());
  EXPECT_EQ(w.current(), nullptr);
  const std::vector<std::string> lines = {"a x", "x", "b x"};
  w.Start("x", FindInLines(lines, "x"));
  ASSERT_TRUE(w.active());
  ASSERT_NE(w.current(), nullptr);
  EXPECT_EQ(w.current()->line, 2);
  EXPECT_EQ(w.Describe(), "find 'x': 3 of 3 - n older, N newer, Esc leaves");
  w.Older();
  EXPECT_EQ(w.current()->line, 1);
  EXPECT_FALSE(w.wrapped());
  w.Older();
  w.Older();  // past the first: round to the last
  EXPECT_EQ(w.current()->line, 2);
  EXPECT_TRUE(w.wrapped());
  EXPECT_EQ(w.Describe(), "find 'x': 3 of 3 (wrapped) - n older, N newer, Esc leaves");
  w.Newer();  // past the last: round to the first
  EXPECT_EQ(w.current()->line, 0);
  EXPECT_TRUE(w.wrapped());
  w.Newer();
  EXPECT_EQ(w.current()->line, 1);
  EXPECT_FALSE(w.wrapped());
  // The same matches again (a redraw): the walk stays where it is.
  w.Refresh(FindInLines(lines, "x"));
  EXPECT_EQ(w.current()->line, 1);
  // More text streamed in with another match: back to the latest.
  w.Refresh(FindInLines({"a x", "x", "b x", "x again"}, "x"));
  EXPECT_EQ(w.current()->line, 3);
  w.Clear();
  EXPECT_FALSE(w.active());
}

TEST(ScrollbackSearch, NoMatchSaysSo) {
  FindWalk w;
  w.Start("zebra", FindInLines({"a", "b"}, "zebra"));
  EXPECT_TRUE(w.active());
  EXPECT_EQ(w.current(), nullptr);
  EXPECT_EQ(w.current_index(), -1);
  w.Older();
  w.Newer();
  EXPECT_EQ(w.current(), nullptr);
  EXPECT_EQ(w.Describe(), "find 'zebra': no match (Esc leaves)");
}

TEST(ScrollbackSearch, HistorySearchFindsTheNewestEntryBeforeAnIndex) {
  const std::vector<std::string> h = {"/set top-k 7", "hello", "/set top-p 0.8", "/stats"};
  EXPECT_EQ(FindInHistory(h, "top", h.size()), 2u);
  EXPECT_EQ(FindInHistory(h, "top", 2), 0u);
  EXPECT_EQ(FindInHistory(h, "top", 0), std::nullopt);
  EXPECT_EQ(FindInHistory(h, "TOP", h.size()), std::nullopt);  // a capital matches exactly
  EXPECT_EQ(FindInHistory(h, "", h.size()), std::nullopt);
  EXPECT_EQ(FindInHistory(h, "stats", 99), 3u);  // past the end: from the newest
}

TEST(ScrollbackSearch, PopUtf8CharRemovesOneWholeCharacter) {
  std::string s = "a\xC3\xA9\xE6\x97\xA5";  // a é 日
  PopUtf8Char(s);
  EXPECT_EQ(s, "a\xC3\xA9");
  PopUtf8Char(s);
  EXPECT_EQ(s, "a");
  PopUtf8Char(s);
  EXPECT_EQ(s, "");
  PopUtf8Char(s);
  EXPECT_EQ(s, "");
  std::string bad = "x\x80\x80";  // stray continuation bytes: one byte at a time
  PopUtf8Char(bad);
  EXPECT_EQ(bad, "x\x80");
}

BarKey Char(char32_t c) {
  BarKey k;
  k.kind = BarKey::kChar;
  k.ch = c;
  return k;
}
BarKey Kind(BarKey::Kind kind) {
  BarKey k;
  k.kind = kind;
  return k;
}

TEST(FindBar, TypingSearchesAsItGoesEnterWalksOtherKeysClose) {
  const std::vector<std::string> lines = {"sea one", "sea two", "land"};
  auto get = [&] { return lines; };
  FindBar bar;
  EXPECT_FALSE(bar.shown());
  bar.Open();
  EXPECT_TRUE(bar.typing());
  EXPECT_EQ(bar.text(), "find: ");
  EXPECT_TRUE(bar.Key(Char('s'), get));
  EXPECT_TRUE(bar.Key(Char('e'), get));
  EXPECT_TRUE(bar.Key(Char('x'), get));
  EXPECT_EQ(bar.text(), "find: sex  (0 found; Enter walks them)");
  EXPECT_TRUE(bar.Key(Kind(BarKey::kBackspace), get));
  EXPECT_TRUE(bar.Key(Char('a'), get));
  EXPECT_EQ(bar.text(), "find: sea  (2 found; Enter walks them)");
  EXPECT_EQ(bar.cursor_column(), 9);
  EXPECT_EQ(bar.walk().current()->line, 1);
  EXPECT_TRUE(bar.Key(Kind(BarKey::kCtrlF), get));  // walks while typing
  EXPECT_EQ(bar.walk().current()->line, 0);
  EXPECT_FALSE(bar.Key(Kind(BarKey::kFunction), get));  // PgUp scrolls as ever
  EXPECT_TRUE(bar.typing());
  EXPECT_TRUE(bar.Key(Kind(BarKey::kEnter), get));
  EXPECT_FALSE(bar.typing());
  EXPECT_TRUE(bar.shown());
  EXPECT_EQ(bar.text(), "find 'sea': 1 of 2 - n older, N newer, Esc leaves");
  EXPECT_TRUE(bar.Key(Char('N'), get));
  EXPECT_EQ(bar.walk().current()->line, 1);
  EXPECT_FALSE(bar.Key(Kind(BarKey::kFunction), get));  // passes, stays open
  EXPECT_TRUE(bar.shown());
  EXPECT_FALSE(bar.Key(Char('x'), get));  // closes and goes to the input line
  EXPECT_FALSE(bar.shown());
  // Enter on nothing typed closes; Esc closes; /find opens walking.
  bar.Open();
  EXPECT_TRUE(bar.Key(Kind(BarKey::kEnter), get));
  EXPECT_FALSE(bar.shown());
  bar.Find("land", lines);
  EXPECT_EQ(bar.text(), "find 'land': 1 of 1 - n older, N newer, Esc leaves");
  EXPECT_TRUE(bar.Key(Kind(BarKey::kEscape), get));
  EXPECT_FALSE(bar.shown());
}

TEST(HistorySearch, NarrowsStepsOlderAndEndsAsReadlineDoes) {
  const std::vector<std::string> h = {"/set top-k 7", "hello\nworld", "/set top-p 0.8", "/stats"};
  HistorySearch r;
  r.Start("draft");
  EXPECT_TRUE(r.active());
  EXPECT_EQ(r.text(h), "(reverse-i-search)`': ");
  for (char32_t c : std::u32string(U"top")) EXPECT_TRUE(r.Key(Char(c), h).used);
  EXPECT_EQ(r.text(h), "(reverse-i-search)`top': /set top-p 0.8");
  r.Key(Kind(BarKey::kCtrlR), h);
  EXPECT_EQ(r.text(h), "(reverse-i-search)`top': /set top-k 7");
  r.Key(Kind(BarKey::kCtrlR), h);  // nothing older: the match stays
  EXPECT_EQ(r.text(h), "(failed reverse-i-search)`top': /set top-k 7");
  r.Key(Char('-'), h);  // "top-": the current match still holds it
  EXPECT_EQ(r.text(h), "(reverse-i-search)`top-': /set top-k 7");
  r.Key(Kind(BarKey::kCtrlG), h);
  EXPECT_FALSE(r.active());
  EXPECT_EQ(r.line(), "draft");
  // Backspace widens from the newest; a multi-line entry shows its first line.
  r.Start("");
  r.Key(Char('w'), h);
  r.Key(Char('x'), h);
  EXPECT_EQ(r.text(h), "(failed reverse-i-search)`wx': hello ...");  // the last match stays
  r.Key(Kind(BarKey::kBackspace), h);
  EXPECT_EQ(r.text(h), "(reverse-i-search)`w': hello ...");
  const HistorySearch::Result enter = r.Key(Kind(BarKey::kEnter), h);
  EXPECT_TRUE(enter.used);
  EXPECT_TRUE(enter.send);
  EXPECT_EQ(r.line(), "hello\nworld");
  // Esc takes the match to edit; a cursor key takes it and goes on.
  r.Start("x");
  r.Key(Char('s'), h);
  r.Key(Char('t'), h);
  EXPECT_TRUE(r.Key(Kind(BarKey::kEscape), h).used);
  EXPECT_EQ(r.line(), "/stats");
  r.Start("x");
  r.Key(Char('7'), h);
  const HistorySearch::Result left = r.Key(Kind(BarKey::kFunction), h);
  EXPECT_FALSE(left.used);
  EXPECT_FALSE(r.active());
  EXPECT_EQ(r.line(), "/set top-k 7");
  // No match at all: the line stays as it was.
  r.Start("mine");
  r.Key(Char('Q'), h);
  r.Key(Kind(BarKey::kEscape), h);
  EXPECT_EQ(r.line(), "mine");
}

}  // namespace
}  // namespace wc::tui
