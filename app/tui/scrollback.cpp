#include "app/tui/scrollback.h"

#include <algorithm>

namespace wc::tui {

Scrollback::Message::Message(Role r, int width, bool markdown) : role(r), text(width) {
  if (markdown && r == Role::kAssistant) md = std::make_unique<MarkdownText>(width);
}

void Scrollback::Message::Append(std::string_view chunk) {
  text.Append(chunk);
  if (md) md->Append(chunk);
}

Scrollback::Scrollback(int width, bool markdown) : width_(width), markdown_(markdown) {}

int Scrollback::Add(Role role, std::string_view text) {
  ++version_;
  messages_.emplace_back(role, width_, markdown_);
  messages_.back().Append(text);
  return size() - 1;
}

void Scrollback::Append(int index, std::string_view text) {
  ++version_;
  if (index >= 0 && index < size()) messages_[index].Append(text);
}

void Scrollback::EraseFromLastUser(bool keep_user) {
  ++version_;
  for (int i = size() - 1; i >= 0; --i) {
    if (messages_[i].role != Role::kUser) continue;
    messages_.erase(messages_.begin() + i + (keep_user ? 1 : 0), messages_.end());
    return;
  }
}

void Scrollback::RemoveLast() {
  ++version_;
  if (!messages_.empty()) messages_.pop_back();
}

void Scrollback::Clear() {
  ++version_;
  messages_.clear();
}

void Scrollback::SetWidth(int width) {
  ++version_;
  width_ = width;
  for (Message& m : messages_) {
    m.text.SetWidth(width);
    if (m.md) m.md->SetWidth(width);
  }
}

void Scrollback::SetMarkdown(bool markdown) {
  ++version_;
  markdown_ = markdown;
  for (Message& m : messages_) {
    if (m.role != Role::kAssistant || markdown == (m.md != nullptr)) continue;
    if (markdown) {
      m.md = std::make_unique<MarkdownText>(width_);
      m.md->Append(m.text.text());
    } else {
      m.md.reset();
    }
  }
}

std::vector<ScreenLine> Scrollback::Lines() const {
  static const std::string kEmpty;
  std::vector<ScreenLine> all;
  for (const Message& m : messages_) {
    if (m.md) {
      const std::vector<MdLine>& ls = m.md->lines();
      for (size_t i = 0; i < ls.size(); ++i) all.push_back({&ls[i], nullptr, m.role, i == 0});
    } else {
      const std::vector<std::string>& ls = m.text.lines();
      for (size_t i = 0; i < ls.size(); ++i) all.push_back({nullptr, &ls[i], m.role, i == 0});
    }
    if (m.line_count() == 0) all.push_back({nullptr, &kEmpty, m.role, true});
    all.push_back({nullptr, &kEmpty, Role::kNotice, false});  // between messages
  }
  return all;
}

int Scrollback::line_count() const {
  int n = 0;
  for (const Message& m : messages_) n += static_cast<int>(std::max<size_t>(m.line_count(), 1)) + 1;
  return n;
}

}  // namespace wc::tui
