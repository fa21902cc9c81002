// The full-screen chat's two search bars, which take the input line's place while they are open:
// the find bar (Ctrl-F, /find: the scrollback's matches, walked with n / N) and Ctrl-R's reverse
// incremental search of the input history, as readline has it. Terminal-free: the front end maps
// its keys to BarKey and draws text().
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/tui/scrollback_search.h"

namespace wc::tui {

// A key as the bars see it.
struct BarKey {
  enum Kind {
    kChar,  // a printable character: `ch`
    kBackspace,
    kEnter,
    kEscape,
    kCtrlC,
    kCtrlF,
    kCtrlG,
    kCtrlR,
    kControl,   // another control character (Ctrl-A, Tab, ...)
    kFunction,  // a function key: arrows, PgUp, PgDn, Home, End, F-keys
  };
  Kind kind = kControl;
  char32_t ch = 0;
};

// Ctrl-F opens it to type the text (matches light up as it is typed: Ctrl-F / Ctrl-G walk them
// already; Enter keeps them and walks; Esc or Ctrl-C closes); /find TEXT opens it walking. While
// walking, n or Ctrl-F goes to the older match, N or Ctrl-G to the newer (round at either end),
// Esc or Enter closes, function keys (PgUp, PgDn, the wheel) pass on and leave it open, and any
// other key closes it and goes on to the input line.
class FindBar {
 public:
  // The scrollback's lines as shown (ScreenLine::Plain), asked for only when searching.
  using LinesFn = std::function<std::vector<std::string>()>;

  // Ctrl-F: typing, with nothing typed yet.
  void Open();
  // /find TEXT: its matches, walking from the latest.
  void Find(std::string query, const std::vector<std::string>& lines);
  // A key while shown(): true if the bar used it (false: it goes on as usual).
  bool Key(const BarKey& key, const LinesFn& lines);
  // The same query over the lines as they are now (more text streamed in, a resize).
  void Refresh(const std::vector<std::string>& lines);
  void Close();

  bool shown() const { return typing_ || walk_.active(); }
  bool typing() const { return typing_; }
  const FindWalk& walk() const { return walk_; }
  // The bar's line: "find: TEXT  (N found; Enter walks them)" while typing, else the walk's.
  std::string text() const;
  // The cursor's column on it (after the typed text; 0 while walking).
  int cursor_column() const;

 private:
  bool typing_ = false;
  std::string query_;  // typed so far
  FindWalk walk_;
};

// Ctrl-R: typed characters narrow the search to the newest entry holding them (the match stays
// while it still holds them), Backspace widens it again from the newest, Ctrl-R steps to the
// next older match. Enter takes the match and sends it; Esc takes it into the line to edit;
// Ctrl-G or Ctrl-C gives back the line as it was; any other control or function key takes the
// match and goes on as usual (as readline does with cursor keys). With no match the line stays
// as it was.
class HistorySearch {
 public:
  struct Result {
    bool used = true;   // false: the key goes on as usual (the search has ended)
    bool send = false;  // Enter: send the line
  };

  // Opens the search over the line being edited, `line` (what Ctrl-G gives back).
  void Start(std::string line);
  // A key while active(); `entries` the history, oldest first.
  Result Key(const BarKey& key, const std::vector<std::string>& entries);
  bool active() const { return active_; }
  // Once the search has ended: the text the input line holds now.
  const std::string& line() const { return line_; }
  // The bar: "(reverse-i-search)`QUERY': MATCH" ("failed" when the last step found nothing; a
  // multi-line match shows its first line and " ...").
  std::string text(const std::vector<std::string>& entries) const;

 private:
  void Search(const std::vector<std::string>& entries, size_t before);
  void End(const std::vector<std::string>& entries, bool accept);

  bool active_ = false;
  std::string query_, saved_, line_;
  std::optional<size_t> at_;  // the entry matched
  bool failed_ = false;
};

}  // namespace wc::tui
