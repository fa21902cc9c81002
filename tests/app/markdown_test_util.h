// Shared by the markdown tests (markdown_test.cpp, markdown_stream_test.cpp): the box drawing
// characters, renderings as comparable text, and a scripted reply.
#pragma once

#include <string>
#include <vector>

#include "app/tui/markdown.h"
#include "app/tui/text_width.h"

namespace wc::tui::md_test {

using Lines = std::vector<std::string>;

inline const std::string kH = "\xE2\x94\x80", kV = "\xE2\x94\x82";          // ─ │
inline const std::string kTL = "\xE2\x95\xAD", kTR = "\xE2\x95\xAE";        // ╭ ╮
inline const std::string kBL = "\xE2\x95\xB0", kBR = "\xE2\x95\xAF";        // ╰ ╯
inline const std::string kBullet = "\xE2\x80\xA2", kCont = "\xE2\x86\xAA";  // • ↪
inline const std::string kYi = "\xE4\xB8\x80", kFffd = "\xEF\xBF\xBD";

inline std::string Rep(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// A code box's lines at `width`: top (with `lang` unless empty), rows, bottom.
inline std::string Top(int width, const std::string& lang = "") {
  if (lang.empty()) return kTL + Rep(kH, width - 2) + kTR;
  return kTL + kH + " " + lang + " " + Rep(kH, width - 5 - DisplayWidth(lang)) + kTR;
}
inline std::string Row(int width, const std::string& code, bool cont = false) {
  return kV + (cont ? kCont : " ") + code + std::string(width - 3 - DisplayWidth(code), ' ') + kV;
}
inline std::string Bottom(int width) {
  return kBL + Rep(kH, width - 2) + kBR;
}

inline Lines Plain(const std::vector<MdLine>& lines) {
  Lines out;
  for (const MdLine& l : lines) out.push_back(l.Plain());
  return out;
}

inline Lines Render(const std::string& text, int width) {
  return Plain(RenderMarkdown(text, width));
}

// Every span of every line as "text{style,syntax}", for comparing renderings exactly.
inline std::string Dump(const std::vector<MdLine>& lines) {
  std::string out;
  for (const MdLine& l : lines) {
    for (const MdSpan& s : l.spans) {
      out += s.text + "{" + std::to_string(s.style) + "," +
             std::to_string(static_cast<int>(s.syntax)) + "}";
    }
    out += "\n";
  }
  return out;
}

// The first span whose text is `text` on a line containing `context`; nullptr when none.
inline const MdSpan* FindSpan(const std::vector<MdLine>& lines, const std::string& context,
                              const std::string& text) {
  for (const MdLine& l : lines) {
    if (l.Plain().find(context) == std::string::npos) continue;
    for (const MdSpan& s : l.spans) {
      if (s.text == text) return &s;
    }
  }
  return nullptr;
}

// ---- a scripted reply at three widths ----

inline const std::string kReply =
    "# Wormhole attention\n"
    "\n"
    "The **paged KV cache** keeps *each user's* keys in `64-token` blocks, so a long\n"
    "reply never moves memory; see [the docs](https://example.com/kv) and snake_case_names.\n"
    "\n"
    "- Bullet one with a fairly long text that has to wrap onto a second line at narrow widths\n"
    "  - nested bullet, also long enough to wrap when the terminal is thirty columns wide\n"
    "- Bullet two\n"
    "\n"
    "1. First step that explains what happens when the request arrives at the serving loop\n"
    "2. Second step\n"
    "\n"
    "```python\n"
    "def greet(name):  # say hello\n"
    "    \"\"\"Doc.\"\"\"\n"
    "    return f\"hi {name}\" + 'x'\n"
    "```\n"
    "\n"
    "> A quote that is long enough to wrap inside its bar at thirty columns.\n"
    "\n"
    "---\n"
    "\n"
    "| col | other |\n"
    "|-----|-------|\n"
    "| a   | b     |\n";

}  // namespace wc::tui::md_test
