// Syntax colours for the code blocks of a reply, from GNU source-highlight's language definitions
// (libsource-highlight, data files in its data directory, /usr/share/source-highlight on Debian).
// Terminal-free: returns classes of byte ranges; the front end picks the colours.
//
// Thread-safety: the loaded language definitions are cached in process-wide state without locks,
// so these functions must be called from one thread only (the chat's front end thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wc::tui {

// What a piece of code is, from source-highlight's element names.
enum class SyntaxClass : uint8_t {
  kNone,      // normal text (and elements without a class here)
  kKeyword,   // keyword
  kType,      // type, usertype, classname
  kString,    // string, regexp
  kComment,   // comment
  kNumber,    // number
  kPreproc,   // preproc (#include, #define)
  kFunction,  // function
  kSymbol,    // symbol, cbracket (operators, brackets, punctuation)
  kSpecial,   // specialchar (escapes such as \n inside strings)
  kVariable,  // variable ($HOME in a shell script)
};

struct SyntaxSpan {
  size_t begin = 0, end = 0;             // byte offsets within the line, begin < end <= line size
  SyntaxClass cls = SyntaxClass::kNone;  // never kNone
};

// A code block highlighted line by line as it streams in: keeps source-highlight's state after
// the lines given so far, so each line costs O(its length). Never throws, never prints.
class CodeHighlighter {
 public:
  // For `language`, a fence's info string such as "python", "c++", "sh" or "rs" (its first word
  // counts; case does not matter; common aliases are known: c++/cxx/cc, py/python3,
  // shell/bash/zsh/console, js/javascript/ts, rs/rust, go/golang, ...), with the definitions in
  // source-highlight's configured data directory (SOURCE_HIGHLIGHT_DATADIR or its built-in path)
  // or in `data_dir`. known() is false when source-highlight does not know the language or its
  // data files are missing or broken.
  explicit CodeHighlighter(std::string_view language);
  CodeHighlighter(std::string_view language, const std::string& data_dir);
  ~CodeHighlighter();
  CodeHighlighter(const CodeHighlighter&) = delete;
  CodeHighlighter& operator=(const CodeHighlighter&) = delete;

  bool known() const { return impl_ != nullptr; }
  // The spans of the block's next line (sorted, not overlapping, adjacent spans of one class
  // merged, uncovered bytes are normal text), with the state left by the lines before; the
  // state then moves past `line`. Empty when the language is not known.
  std::vector<SyntaxSpan> Next(const std::string& line);
  // The spans `line` would get from Next, leaving the state as it is (a line still arriving).
  std::vector<SyntaxSpan> Peek(const std::string& line);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // null when the language is not known
};

// Highlights `lines` (one code block, in order; the state is carried across lines, so multi-line
// comments and strings are coloured on every line) for `language` (as CodeHighlighter). Returns
// one vector of spans per line (as CodeHighlighter::Next), or nullopt when source-highlight does
// not know the language or its data files are missing or broken. Never throws, never prints.
std::optional<std::vector<std::vector<SyntaxSpan>>> HighlightCode(
    std::string_view language, const std::vector<std::string>& lines);

// As HighlightCode, with the language definitions and lang.map read from `data_dir`.
std::optional<std::vector<std::vector<SyntaxSpan>>> HighlightCodeFrom(
    const std::string& data_dir, std::string_view language, const std::vector<std::string>& lines);

}  // namespace wc::tui
