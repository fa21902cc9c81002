#include "app/tui/search_bars.h"

#include "app/tui/text_width.h"
#include "util/error.h"

namespace wc::tui {

void FindBar::Open() {
  walk_.Clear();
  query_.clear();
  typing_ = true;
}

void FindBar::Find(std::string query, const std::vector<std::string>& lines) {
  typing_ = false;
  query_ = query;
  walk_.Start(std::move(query), FindInLines(lines, query_));
}

void FindBar::Refresh(const std::vector<std::string>& lines) {
  if (walk_.active()) walk_.Refresh(FindInLines(lines, walk_.query()));
}

void FindBar::Close() {
  walk_.Clear();
  typing_ = false;
  query_.clear();
}

bool FindBar::Key(const BarKey& key, const LinesFn& lines) {
  if (typing_) {
    switch (key.kind) {
      case BarKey::kEscape:
      case BarKey::kCtrlC:
        Close();
        return true;
      case BarKey::kEnter:
        typing_ = false;
        if (query_.empty()) Close();
        return true;
      case BarKey::kCtrlF:  // walk while typing
        walk_.Older();
        return true;
      case BarKey::kCtrlG:
        walk_.Newer();
        return true;
      case BarKey::kBackspace:
        PopUtf8Char(query_);
        if (query_.empty())
          walk_.Clear();
        else
          walk_.Start(query_, FindInLines(lines(), query_));
        return true;
      case BarKey::kChar:
        AppendUtf8(query_, key.ch);
        walk_.Start(query_, FindInLines(lines(), query_));
        return true;
      case BarKey::kFunction:
        return false;  // PgUp, PgDn, the wheel: they scroll as ever
      default:
        return true;
    }
  }
  if (!walk_.active()) return false;
  switch (key.kind) {
    case BarKey::kFunction:
      return false;
    case BarKey::kCtrlF:
      walk_.Older();
      return true;
    case BarKey::kCtrlG:
      walk_.Newer();
      return true;
    case BarKey::kChar:
      if (key.ch == 'n' || key.ch == 'N') {
        if (key.ch == 'n')
          walk_.Older();
        else
          walk_.Newer();
        return true;
      }
      Close();  // any other key leaves the walk and goes to the input line
      return false;
    case BarKey::kEscape:
    case BarKey::kEnter:
      Close();
      return true;
    default:
      Close();
      return false;
  }
}

std::string FindBar::text() const {
  if (!typing_) return walk_.Describe();
  return Cat("find: ", query_,
             walk_.active() ? Cat("  (", walk_.matches().size(), " found; Enter walks them)") : "");
}

int FindBar::cursor_column() const {
  return typing_ ? 6 + DisplayWidth(query_) : 0;
}

void HistorySearch::Start(std::string line) {
  active_ = true;
  query_.clear();
  at_.reset();
  failed_ = false;
  saved_ = line_ = std::move(line);
}

void HistorySearch::Search(const std::vector<std::string>& entries, size_t before) {
  const std::optional<size_t> at = FindInHistory(entries, query_, before);
  failed_ = !at.has_value() && !query_.empty();
  if (at) at_ = at;
}

void HistorySearch::End(const std::vector<std::string>& entries, bool accept) {
  active_ = false;
  line_ = accept && at_ && *at_ < entries.size() ? entries[*at_] : saved_;
}

HistorySearch::Result HistorySearch::Key(const BarKey& key,
                                         const std::vector<std::string>& entries) {
  Result r;
  const size_t newest = entries.size();
  switch (key.kind) {
    case BarKey::kCtrlR:  // the next older match
      Search(entries, at_ ? *at_ : newest);
      return r;
    case BarKey::kCtrlG:
    case BarKey::kCtrlC:
      End(entries, /*accept=*/false);
      return r;
    case BarKey::kEscape:
      End(entries, /*accept=*/true);
      return r;
    case BarKey::kEnter:
      End(entries, /*accept=*/true);
      r.send = true;
      return r;
    case BarKey::kBackspace:
      PopUtf8Char(query_);
      at_.reset();
      Search(entries, newest);
      return r;
    case BarKey::kChar:
      AppendUtf8(query_, key.ch);
      Search(entries, at_ ? *at_ + 1 : newest);  // the match stays while it still matches
      return r;
    default:
      End(entries, /*accept=*/true);
      r.used = false;
      return r;
  }
}

std::string HistorySearch::text(const std::vector<std::string>& entries) const {
  std::string match;
  if (at_ && *at_ < entries.size()) {
    match = entries[*at_];
    const size_t nl = match.find('\n');
    if (nl != std::string::npos) match = match.substr(0, nl) + " ...";
  }
  return Cat(failed_ ? "(failed reverse-i-search)`" : "(reverse-i-search)`", query_, "': ", match);
}

}  // namespace wc::tui
