// UTF-8 characters and their display width in terminal columns, for the terminal-free TUI building
// blocks (line editor, word wrap, status and title bars, core grid).
//
// A "character" here is what the cursor steps over and what is never split: one code point plus
// the zero-width code points that follow it (combining marks, variation selectors, ZWJ), unless it
// is '\n' or '\t', which never take marks. A byte that does not start a valid UTF-8 sequence
// (stray continuation, overlong form, surrogate, truncated sequence) is a character of its own,
// shown as U+FFFD. Widths come from the C library's wcwidth (no hand-written tables): wide
// characters (CJK, most emoji) take 2 columns, combining marks 0, a code point wcwidth does not
// know (-1) takes 1.
//
// Locale requirement: wcwidth answers for non-ASCII code points only under a UTF-8 LC_CTYPE. The
// program must call setlocale(LC_ALL, "") (ncursesw needs it too) with a UTF-8 locale in the
// environment, or call SetUtf8Locale(). Under the "C" locale every non-ASCII code point counts
// as one column and combining marks become characters of their own (nothing breaks, widths of CJK
// and emoji are wrong).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace wc::tui {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";  // U+FFFD, 1 column

struct CodePoint {
  char32_t cp = 0;  // kReplacementChar for an invalid byte
  int len = 0;      // bytes it takes in the text (1 for an invalid byte)
  bool valid = false;
};

// The code point starting at byte `i` of `s` (i < s.size()).
CodePoint DecodeAt(std::string_view s, size_t i);
// Appends the UTF-8 encoding of `cp` (a valid scalar value).
void AppendUtf8(std::string& out, char32_t cp);
// Appends the characters of `s[begin, end)` to `out` as they can be printed: control characters
// dropped, an invalid byte as U+FFFD. Returns the columns they take (CodePointWidth each).
int AppendPrintable(std::string_view s, size_t begin, size_t end, std::string& out);
// Removes the last character of `s` (its continuation bytes and lead byte; one byte of invalid
// UTF-8). Nothing for an empty string.
void PopUtf8Char(std::string& s);

// Columns `cp` takes: wcwidth, 1 where wcwidth says -1. Control characters (including '\n' and
// '\t', whose width depends on where they are) are the caller's business: this returns 1 for them.
int CodePointWidth(char32_t cp);
// A code point that joins the character before it: wcwidth 0 and not a control character.
bool IsZeroWidth(char32_t cp);

// Byte offset of the character after the one starting at `i` (i < s.size()).
size_t NextChar(std::string_view s, size_t i);
// Byte offset of the character that ends at `i` (0 < i <= s.size(), `i` a character boundary).
size_t PrevChar(std::string_view s, size_t i);
// Whether `i` is a character boundary (0 and s.size() are), assuming the text before `i` decodes
// from a boundary (always true for offsets produced by NextChar/PrevChar from 0).
bool IsCharBoundary(std::string_view s, size_t i);

// Columns of `s`, a piece of text without '\n' or '\t' (an invalid byte is 1, other control
// characters 0).
int DisplayWidth(std::string_view s);
// The longest prefix of `s` (whole characters) that fits `width` columns; with `ellipsis`, a cut
// string ends in "…" (U+2026, 1 column) inside the width. Invalid bytes become U+FFFD.
std::string FitWidth(std::string_view s, int width, bool ellipsis = false);

// Sets LC_CTYPE to a UTF-8 locale so wcwidth knows wide and combining characters: the
// environment's locale (setlocale(LC_CTYPE, "")) if it is UTF-8, else C.UTF-8. Returns whether
// wide characters now measure 2 columns (Utf8WidthsActive()).
bool SetUtf8Locale();
// Whether the current locale gives CJK characters 2 columns (the widths above are right).
bool Utf8WidthsActive();

}  // namespace wc::tui
