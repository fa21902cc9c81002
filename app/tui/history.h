// The chat's input history: Up/Down walk through earlier inputs as readline does, and the inputs
// persist across sessions in one file.
//
// Navigation: Older()/Newer() are given the editor's current text and return the text to show.
// The line being edited when the walk starts is kept as a draft and comes back when the walk goes
// past the newest entry; an entry edited during the walk keeps its edit until the walk ends (Add
// or EndWalk), and the stored entries never change.
//
// File: $XDG_STATE_HOME/wormchat/history (XDG_STATE_HOME unset, empty or not absolute:
// ~/.local/state/wormchat/history). One entry per line, oldest first, UTF-8, with '\' written as
// "\\" and '\n' as "\n", so a multi-line entry is one line of the file. Saving keeps
// the last kMaxEntries entries, merges what another session saved meanwhile (its entries, then
// this session's unsaved ones), and replaces the file atomically: a temporary file in the same
// directory (mode 0600), written, fsync'ed, renamed over the old one, then the directory fsync'ed.
// Missing directories are created with mode 0700.
//
// Nothing here throws for a file problem, so history can never stop the chat: a corrupt file loads
// every line that can be read, and each problem becomes one warning line for the front end to show.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wc::tui {

class History {
 public:
  static constexpr size_t kMaxEntries = 1000;

  // In memory only: Save() does nothing.
  History() = default;
  // Loads `path` (a missing file is an empty history, not a problem). An unreadable file, or one
  // that is not a regular file, leaves the history empty and disables saving, so it is never
  // overwritten; lines that are not a valid escaped UTF-8 entry are skipped. Either sets
  // warning().
  explicit History(std::string path);

  // The history file from the environment (above); "" when neither XDG_STATE_HOME nor HOME is
  // usable.
  static std::string DefaultPath();

  // A new input, after Enter, cleaned as LineEditor cleans input (invalid UTF-8 to U+FFFD, no
  // control characters but '\n' and '\t'). Empty or whitespace-only entries and a repeat of the
  // newest entry are not added (returns false). Ends the walk either way; keeps the newest
  // kMaxEntries.
  bool Add(std::string_view entry);

  // Writes the file now if entries were added since the last successful save (see above).
  // Returns "" or one warning line; on failure the entries stay unsaved and the next Save tries
  // again. Does nothing for an in-memory history or when loading disabled saving.
  std::string Save();

  // Up: the entry before the one shown, given the text the editor holds now (the draft or an
  // edited entry); nullopt at the oldest entry (the caller keeps what it shows).
  std::optional<std::string> Older(std::string_view current);
  // Down: the entry after the one shown, or the draft after the newest; nullopt when not walking.
  std::optional<std::string> Newer(std::string_view current);
  // Forgets the draft and the edits; the next Older() starts from the newest entry.
  void EndWalk();
  bool walking() const { return pos_ != entries_.size(); }

  const std::vector<std::string>& entries() const { return entries_; }  // oldest first
  size_t size() const { return entries_.size(); }
  const std::string& path() const { return path_; }
  // What went wrong while loading ("" if nothing): one line naming the file.
  const std::string& warning() const { return warning_; }

  // The file format, exposed for tests: one entry as one line (no '\n'), and back (false for a
  // line that is not a valid escaped entry).
  static std::string Escape(std::string_view entry);
  static bool Unescape(std::string_view line, std::string* entry);

 private:
  void Trim();

  std::string path_;
  bool can_save_ = false;
  std::string warning_;
  std::vector<std::string> entries_;
  std::vector<std::string> unsaved_;     // added since the last successful Save, oldest first
  size_t pos_ = 0;                       // entry shown; entries_.size() = the draft
  std::map<size_t, std::string> edits_;  // texts left at positions during this walk
};

}  // namespace wc::tui
