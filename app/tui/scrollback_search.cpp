#include "app/tui/scrollback_search.h"

#include <algorithm>

#include "util/error.h"

namespace wc::tui {
namespace {

bool HasUpper(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

char Fold(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// The first match of `query` in `text` at or after `from` (npos if none).
size_t FindFrom(std::string_view text, std::string_view query, size_t from, bool fold) {
  if (!fold) return text.find(query, from);
  if (query.size() > text.size()) return std::string_view::npos;
  for (size_t i = from; i + query.size() <= text.size(); ++i) {
    size_t k = 0;
    while (k < query.size() && Fold(text[i + k]) == query[k]) ++k;
    if (k == query.size()) return i;
  }
  return std::string_view::npos;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> MatchesInLine(std::string_view text,
                                                     std::string_view query) {
  std::vector<std::pair<size_t, size_t>> out;
  if (query.empty()) return out;
  const bool fold = !HasUpper(query);
  std::string folded(query);
  if (fold) std::transform(folded.begin(), folded.end(), folded.begin(), Fold);
  for (size_t at = FindFrom(text, folded, 0, fold); at != std::string_view::npos;
       at = FindFrom(text, folded, at + folded.size(), fold))
    out.emplace_back(at, at + folded.size());
  return out;
}

std::vector<ScrollMatch> FindInLines(const std::vector<std::string>& lines,
                                     std::string_view query) {
  std::vector<ScrollMatch> out;
  for (size_t i = 0; i < lines.size(); ++i)
    for (const auto& [b, e] : MatchesInLine(lines[i], query))
      out.push_back({static_cast<int>(i), b, e});
  return out;
}

void FindWalk::Start(std::string query, std::vector<ScrollMatch> matches) {
  active_ = true;
  query_ = std::move(query);
  matches_ = std::move(matches);
  current_ = static_cast<int>(matches_.size()) - 1;
  wrapped_ = false;
}

void FindWalk::Refresh(std::vector<ScrollMatch> matches) {
  if (!active_) return;
  const int from_end = static_cast<int>(matches_.size()) - 1 - current_;
  if (matches.size() != matches_.size()) {
    matches_ = std::move(matches);
    current_ = static_cast<int>(matches_.size()) - 1;
    return;
  }
  matches_ = std::move(matches);
  current_ = static_cast<int>(matches_.size()) - 1 - from_end;
}

void FindWalk::Older() {
  wrapped_ = false;
  if (matches_.empty()) return;
  if (--current_ < 0) {
    current_ = static_cast<int>(matches_.size()) - 1;
    wrapped_ = true;
  }
}

void FindWalk::Newer() {
  wrapped_ = false;
  if (matches_.empty()) return;
  if (++current_ >= static_cast<int>(matches_.size())) {
    current_ = 0;
    wrapped_ = true;
  }
}

void FindWalk::Clear() {
  *this = FindWalk();
}

const ScrollMatch* FindWalk::current() const {
  return current_ >= 0 && current_ < static_cast<int>(matches_.size()) ? &matches_[current_]
                                                                       : nullptr;
}

std::string FindWalk::Describe() const {
  if (matches_.empty()) return Cat("find '", query_, "': no match (Esc leaves)");
  return Cat("find '", query_, "': ", current_ + 1, " of ", matches_.size(),
             wrapped_ ? " (wrapped)" : "", " - n older, N newer, Esc leaves");
}

std::optional<size_t> FindInHistory(const std::vector<std::string>& entries, std::string_view query,
                                    size_t before) {
  if (query.empty()) return std::nullopt;
  for (size_t i = std::min(before, entries.size()); i-- > 0;)
    if (!MatchesInLine(entries[i], query).empty()) return i;
  return std::nullopt;
}

}  // namespace wc::tui
