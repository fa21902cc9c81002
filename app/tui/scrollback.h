// The full-screen chat's conversation as shown: its messages in order and their lines for the
// text width - the user's messages and the chat's notices word-wrapped as written, replies
// rendered as markdown (app/tui/markdown.h) or, with rendering off, word-wrapped too. No terminal:
// the front end draws the lines, /find searches them (ScreenLine::Plain).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "app/tui/markdown.h"
#include "app/tui/wrap.h"

namespace wc::tui {

enum class Role { kUser, kAssistant, kNotice };

// One line of the scrollback: a rendered line, or a wrapped line of raw text. Points into the
// Scrollback, valid until it next changes.
struct ScreenLine {
  const MdLine* md = nullptr;         // a rendered reply's line, or
  const std::string* text = nullptr;  // a wrapped line
  Role role = Role::kNotice;
  bool first = false;  // the message's first line (the user's get the "> " mark)
  // The line's text without styles (what /find matches in; its bytes are the drawn ones).
  std::string Plain() const { return md ? md->Plain() : *text; }
};

class Scrollback {
 public:
  Scrollback(int width, bool markdown);

  // Adds a message at the end; returns its index (for Append).
  int Add(Role role, std::string_view text);
  // More text of message `index` (a reply streaming in).
  void Append(int index, std::string_view text);
  // Removes the last user message (kept if `keep_user`) and everything after it. Nothing without
  // a user message.
  void EraseFromLastUser(bool keep_user);
  void RemoveLast();
  void Clear();

  // Re-wraps or re-renders every message for a new width (a resize, the side panel).
  void SetWidth(int width);
  // Replies rendered as markdown or as written; their text stays, their lines change.
  void SetMarkdown(bool markdown);
  int width() const { return width_; }
  bool markdown() const { return markdown_; }
  int size() const { return static_cast<int>(messages_.size()); }
  // Changes whenever the lines may have (a message added, appended to or removed, a new width or
  // rendering): what was computed from Lines() is stale when it differs.
  uint64_t version() const { return version_; }

  // Every line top to bottom: each message's lines (at least one), then a blank line.
  std::vector<ScreenLine> Lines() const;
  // Lines().size(), without building them.
  int line_count() const;

 private:
  struct Message {
    Message(Role r, int width, bool markdown);
    void Append(std::string_view chunk);
    size_t line_count() const { return md ? md->lines().size() : text.lines().size(); }

    Role role;
    WrappedText text;                  // the raw text, wrapped (what plain rendering shows)
    std::unique_ptr<MarkdownText> md;  // a reply's rendered lines, when rendering markdown
  };

  int width_;
  bool markdown_;
  uint64_t version_ = 0;
  std::vector<Message> messages_;
};

}  // namespace wc::tui
