// The line-mode chat's terminal line input (app/chat/tty_line.h): what the line holds after any
// sequence of keys, and what the terminal shows - the echo is run through a small terminal model
// (auto-wrap with the pending-wrap state at the margin, wide characters wrapped whole, CR, cursor
// up / right, erase below) and the screen compared with the prompt and the line wrapped at the
// width. No line-length limit: a 20,000-byte line is kept whole.
#include <gtest/gtest.h>

#include <clocale>
#include <random>
#include <string>
#include <vector>

#include "app/chat/tty_line.h"
#include "app/tui/text_width.h"

namespace wc {
namespace {

class Utf8LocaleEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (std::setlocale(LC_CTYPE, "C.UTF-8") == nullptr) tui::SetUtf8Locale();
  }
};
[[maybe_unused]] ::testing::Environment* const kLocale =
    ::testing::AddGlobalTestEnvironment(new Utf8LocaleEnvironment);

const std::string kYi = "\xE4\xB8\x80", kAcute = "\xCC\x81", kE = "\xC3\xA9";

// A terminal `columns` wide that never scrolls its history away: cells hold characters (a wide
// character's second cell is empty and marked), the cursor may sit at the margin with the wrap
// pending, as xterm's does.
class Terminal {
 public:
  Terminal(int columns, int rows) : columns_(columns), rows_(rows) { cells_.emplace_back(); }

  void Write(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
      const unsigned char b = static_cast<unsigned char>(s[i]);
      if (b == '\r') {
        c_ = 0, pending_ = false, ++i;
      } else if (b == '\n') {
        Down(), pending_ = false, ++i;
      } else if (b == 0x1b) {
        ASSERT_LT(i + 1, s.size());
        ASSERT_EQ(s[i + 1], '[') << "only CSI sequences are expected";
        size_t j = i + 2;
        int n = 0;
        bool has_n = false;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])))
          n = n * 10 + (s[j++] - '0'), has_n = true;
        ASSERT_LT(j, s.size());
        if (!has_n) n = 1;
        const char f = s[j];
        if (f == 'A') {
          r_ = std::max(Top(), r_ - n);
        } else if (f == 'C') {
          c_ = std::min(columns_ - 1, c_ + n);
        } else if (f == 'J') {
          Row(r_).resize(static_cast<size_t>(std::min<int>(c_, Row(r_).size())));
          cells_.resize(static_cast<size_t>(r_ + 1));
          if (last_r_ > r_ || (last_r_ == r_ && last_c_ >= c_)) last_r_ = last_c_ = -1;
        } else {
          FAIL() << "unexpected sequence " << f;
        }
        pending_ = false;
        i = j + 1;
      } else {
        const tui::CodePoint cp = tui::DecodeAt(s, i);
        const std::string bytes = s.substr(i, static_cast<size_t>(cp.len));
        i += static_cast<size_t>(cp.len);
        if (cp.valid && tui::IsZeroWidth(cp.cp)) {
          ASSERT_GE(last_r_, 0) << "a combining mark with nothing before it";
          ASSERT_LT(last_c_, static_cast<int>(Row(last_r_).size())) << "its cell was erased";
          Row(last_r_)[static_cast<size_t>(last_c_)] += bytes;
          continue;
        }
        const int w = cp.valid ? tui::CodePointWidth(cp.cp) : 1;
        if (pending_ || c_ + w > columns_) Down(), c_ = 0;
        pending_ = false;
        Put(c_, bytes);
        if (w == 2) Put(c_ + 1, kWideTail);
        last_r_ = r_, last_c_ = c_;
        if (c_ + w == columns_) {
          c_ = columns_ - 1, pending_ = true;
        } else {
          c_ += w;
        }
      }
    }
  }

  // The rows from the top of the screen, without trailing blanks.
  std::vector<std::string> Screen() const {
    std::vector<std::string> out;
    for (int r = Top(); r < static_cast<int>(cells_.size()); ++r) {
      std::string line;
      for (const std::string& cell : cells_[static_cast<size_t>(r)])
        if (cell != kWideTail) line += cell.empty() ? " " : cell;
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out.push_back(line);
    }
    while (!out.empty() && out.back().empty()) out.pop_back();
    return out;
  }

 private:
  static constexpr const char* kWideTail = "\x01";
  int Top() const { return std::max(0, static_cast<int>(cells_.size()) - rows_); }
  std::vector<std::string>& Row(int r) {
    while (static_cast<int>(cells_.size()) <= r) cells_.emplace_back();
    return cells_[static_cast<size_t>(r)];
  }
  void Down() { Row(++r_); }
  void Put(int c, const std::string& cell) {
    std::vector<std::string>& row = Row(r_);
    if (static_cast<int>(row.size()) <= c) row.resize(static_cast<size_t>(c + 1));
    row[static_cast<size_t>(c)] = cell;
  }

  int columns_, rows_;
  std::vector<std::vector<std::string>> cells_;
  int r_ = 0, c_ = 0;
  bool pending_ = false;
  int last_r_ = -1, last_c_ = -1;
};

// The prompt and `text` as the terminal should show them: wrapped at `columns`, a wide character
// that does not fit moved whole to the next row, tabs as spaces to the next multiple of 8.
std::vector<std::string> Wrapped(const std::string& prompt, const std::string& text, int columns) {
  std::vector<std::string> rows(1);
  int col = 0;
  auto put = [&](const std::string& bytes, int w) {
    if (col + w > columns) rows.emplace_back(), col = 0;
    rows.back() += bytes;
    col += w;
  };
  const std::string all = prompt + text;
  for (size_t i = 0; i < all.size();) {
    const tui::CodePoint cp = tui::DecodeAt(all, i);
    const std::string bytes = all.substr(i, static_cast<size_t>(cp.len));
    i += static_cast<size_t>(cp.len);
    if (cp.cp == '\t') {
      const int c = col >= columns ? 0 : col;
      const int n = std::max(1, std::min(8 - c % 8, columns - c));
      put(std::string(static_cast<size_t>(n), ' '), n);
    } else if (cp.valid && tui::IsZeroWidth(cp.cp) && i - bytes.size() == prompt.size()) {
      put(std::string(tui::kReplacementUtf8), 1);  // a mark with no character of the line
    } else if (cp.valid && tui::IsZeroWidth(cp.cp)) {
      rows.back() += bytes;
    } else {
      put(cp.valid ? bytes : std::string(tui::kReplacementUtf8),
          cp.valid ? tui::CodePointWidth(cp.cp) : 1);
    }
  }
  for (std::string& r : rows)
    while (!r.empty() && r.back() == ' ') r.pop_back();
  while (rows.size() > 1 && rows.back().empty()) rows.pop_back();
  return rows;
}

// Feeds `keys` to a line after `prompt` on a terminal; returns the last event.
struct Session {
  Session(int columns, int rows, std::string prompt = "> ")
      : term(columns, rows), line(prompt, columns, rows) {
    term.Write(prompt);
  }
  TtyLine::Event Keys(const std::string& keys) {
    TtyLine::Event e = TtyLine::Event::kMore;
    for (unsigned char b : keys) {
      std::string echo;
      e = line.Feed(b, echo);
      term.Write(echo);
    }
    return e;
  }
  Terminal term;
  TtyLine line;
};

TEST(TtyLine, TypingEditingAndEnter) {
  Session s(80, 24);
  EXPECT_EQ(s.Keys("hellx\x7fo wrld"), TtyLine::Event::kMore);
  EXPECT_EQ(s.line.text(), "hello wrld");
  s.Keys("\x17world");  // Ctrl-W: the word before the cursor
  EXPECT_EQ(s.line.text(), "hello world");
  EXPECT_EQ(s.term.Screen(), std::vector<std::string>{"> hello world"});
  s.Keys(
      "\x15"
      "again");  // Ctrl-U: the whole line
  EXPECT_EQ(s.line.text(), "again");
  EXPECT_EQ(s.term.Screen(), std::vector<std::string>{"> again"});
  EXPECT_EQ(s.Keys("\r"), TtyLine::Event::kLine);
  EXPECT_EQ(s.line.text(), "again");
}

TEST(TtyLine, CtrlDEndsInputOnlyOnAnEmptyLine) {
  Session s(80, 24);
  EXPECT_EQ(s.Keys("x\x04"), TtyLine::Event::kMore);
  EXPECT_EQ(s.Keys("\x7f\x04"), TtyLine::Event::kEof);
}

TEST(TtyLine, KeySequencesAndControlBytesAreNotText) {
  Session s(80, 24);
  // Up, Left, F5, Alt-b, a bell, then text.
  s.Keys(
      "\x1b[A\x1b[D\x1b[15~\x1b"
      "b\x07ok");
  EXPECT_EQ(s.line.text(), "ok");
  EXPECT_EQ(s.term.Screen(), std::vector<std::string>{"> ok"});
}

TEST(TtyLine, Utf8WideCharactersCombiningMarksAndBadBytes) {
  Session s(10, 24);
  s.Keys(kYi + kYi + "e" + kAcute + kE + "\xFF" + kYi + kYi);
  EXPECT_EQ(s.line.text(), kYi + kYi + "e" + kAcute + kE + "\xFF" + kYi + kYi);
  EXPECT_EQ(s.term.Screen(), Wrapped("> ", s.line.text(), 10));
  s.Keys("\x7f\x7f\x7f\x7f");  // 一, 一, the bad byte, é: whole characters
  EXPECT_EQ(s.line.text(), kYi + kYi + "e" + kAcute);
  s.Keys("\x7f");  // e with its mark
  EXPECT_EQ(s.line.text(), kYi + kYi);
  EXPECT_EQ(s.term.Screen(), Wrapped("> ", s.line.text(), 10));
  // A sequence split across reads stays whole.
  s.Keys(kYi.substr(0, 1));
  s.Keys(kYi.substr(1));
  EXPECT_EQ(s.line.text(), kYi + kYi + kYi);
}

TEST(TtyLine, ALineFarPastTheKernelsLimitIsKeptWhole) {
  // Canonical mode keeps 4095 bytes; here 20,000 arrive and all stay.
  Session s(80, 24);
  std::string text;
  for (int i = 0; text.size() < 20000; ++i) text += "word" + std::to_string(i) + " ";
  EXPECT_EQ(s.Keys(text + "\n"), TtyLine::Event::kLine);
  EXPECT_EQ(s.line.text(), text);
}

TEST(TtyLine, ErasingAcrossTheMarginAndWrappedRows) {
  for (int columns : {7, 10, 80}) {
    Session s(columns, 200);
    // Fill to the margin exactly (the wrap pending), past it, then back over both.
    const std::string row(static_cast<size_t>(columns - 2), 'a');
    s.Keys(row);
    EXPECT_EQ(s.term.Screen(), Wrapped("> ", s.line.text(), columns));
    s.Keys("b");
    EXPECT_EQ(s.term.Screen(), Wrapped("> ", s.line.text(), columns));
    s.Keys("\x7f\x7f");
    EXPECT_EQ(s.term.Screen(), Wrapped("> ", s.line.text(), columns)) << columns;
    s.Keys("xy" + kYi + "z");
    EXPECT_EQ(s.term.Screen(), Wrapped("> ", s.line.text(), columns)) << columns;
    s.Keys(row + row + "\x17");
    EXPECT_EQ(s.term.Screen(), Wrapped("> ", s.line.text(), columns)) << columns;
  }
}

TEST(TtyLine, RandomEditsShowExactlyTheLine) {
  // Random keys (ASCII, wide, combining, tabs, Backspace, Ctrl-W, Ctrl-U, arrows) at narrow and
  // usual widths: after every key the screen is the prompt and the line, wrapped.
  const std::vector<std::string> keys = {"a",  "b",    " ",    "  ",   kYi,      kE,   kAcute,
                                         "\t", "\x7f", "\x7f", "\x17", "\x1b[D", "xyz"};
  std::mt19937 rng(7);
  for (int columns : {5, 9, 13, 80}) {
    Session s(columns, 1000);
    for (int step = 0; step < 3000; ++step) {
      std::string k = keys[rng() % keys.size()];
      if (rng() % 97 == 0) k = "\x15";
      s.Keys(k);
      ASSERT_EQ(s.term.Screen(), Wrapped("> ", s.line.text(), columns))
          << "columns " << columns << ", step " << step << ", key " << ::testing::PrintToString(k)
          << ", line " << ::testing::PrintToString(s.line.text());
    }
  }
}

TEST(TtyLine, ErasingRowsScrolledOffTheScreenStartsAFreshPromptLine) {
  Session s(10, 5);
  s.Keys(std::string(100, 'q'));
  s.Keys(
      "\x17"
      "kept");  // the word started 12 rows up, off a 5-row screen
  EXPECT_EQ(s.line.text(), "kept");
  const std::vector<std::string> screen = s.term.Screen();
  ASSERT_FALSE(screen.empty());
  EXPECT_EQ(screen.back(), "> kept");
}

}  // namespace
}  // namespace wc
