// Finding text in the chat: /find and Ctrl-F over the scrollback's lines as they are shown, and
// Ctrl-R over the input history. Terminal-free: the front end draws what these return.
//
// Matching is "smart case", as in less -i and vim's smartcase: a query with no uppercase letter
// matches any case (ASCII letters are folded; other characters match exactly), one with an
// uppercase letter matches case for case. A match never spans two lines of the screen (a word the
// wrap broke is found in neither half), and matches on one line do not overlap.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wc::tui {

// Byte offsets of each match of `query` in `text`, left to right; none for an empty query.
std::vector<std::pair<size_t, size_t>> MatchesInLine(std::string_view text, std::string_view query);

struct ScrollMatch {
  int line = 0;      // index in the lines searched
  size_t begin = 0;  // bytes of the line's text: [begin, end)
  size_t end = 0;
};

// Every match in `lines` (top to bottom, each line left to right).
std::vector<ScrollMatch> FindInLines(const std::vector<std::string>& lines, std::string_view query);

// The walk through the matches of /find: starts at the latest (bottom-most) match; Older() and
// Newer() step and wrap around at either end, saying so.
class FindWalk {
 public:
  // A new search over `matches` (FindInLines'): the current match is the last one.
  void Start(std::string query, std::vector<ScrollMatch> matches);
  // The same query over new lines (more text streamed in, a resize re-wrapped them): keeps the
  // current match's ordinal counted from the end when the count is unchanged, else the last.
  void Refresh(std::vector<ScrollMatch> matches);
  // n / Ctrl-F: the match above the current one (the last after the first: wrapped() says so).
  void Older();
  // N / Ctrl-G: the match below (the first after the last).
  void Newer();
  void Clear();

  bool active() const { return active_; }
  const std::string& query() const { return query_; }
  const std::vector<ScrollMatch>& matches() const { return matches_; }
  // The current match, or nullptr when there is none.
  const ScrollMatch* current() const;
  int current_index() const { return current_; }  // -1: no match
  bool wrapped() const { return wrapped_; }       // the last step went round an end
  // "find 'text': 3 of 12 (n older, N newer, Esc leaves)" or "find 'text': no match".
  std::string Describe() const;

 private:
  bool active_ = false;
  std::string query_;
  std::vector<ScrollMatch> matches_;
  int current_ = -1;
  bool wrapped_ = false;
};

// Ctrl-R over the input history (oldest first, as History::entries() holds it): the index of the
// newest entry before `before` (entries.size() for the newest of all) containing `query`, or
// nullopt. An empty query matches nothing.
std::optional<size_t> FindInHistory(const std::vector<std::string>& entries, std::string_view query,
                                    size_t before);

}  // namespace wc::tui
