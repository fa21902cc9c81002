#include "app/tui/markdown_blocks.h"

#include <algorithm>

namespace wc::tui::md {
namespace {

constexpr int kTab = 4;  // tab stops when measuring indentation

std::string_view TrimLeft(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  return b == std::string_view::npos ? std::string_view() : s.substr(b);
}

std::string_view TrimRight(std::string_view s) {
  const size_t e = s.find_last_not_of(" \t\r");
  return e == std::string_view::npos ? std::string_view() : s.substr(0, e + 1);
}

std::optional<Block> Heading(std::string_view line) {
  if (Indentation(line) > 3) return std::nullopt;
  std::string_view rest = TrimLeft(line);
  int level = 0;
  while (level < static_cast<int>(rest.size()) && rest[level] == '#') ++level;
  if (level == 0 || level > 6) return std::nullopt;
  rest.remove_prefix(static_cast<size_t>(level));
  if (!rest.empty() && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '\r') return std::nullopt;
  rest = TrimRight(TrimLeft(rest));
  // A closing sequence of '#'s, after a space.
  const size_t hashes = rest.find_last_not_of('#');
  if (hashes == std::string_view::npos) {
    rest = {};
  } else if (hashes + 1 < rest.size() && (rest[hashes] == ' ' || rest[hashes] == '\t')) {
    rest = TrimRight(rest.substr(0, hashes));
  }
  Block b;
  b.kind = Block::kHeading;
  b.level = level;
  b.text = std::string(rest);
  return b;
}

bool IsRule(std::string_view line) {
  if (Indentation(line) > 3) return false;
  const std::string_view rest = TrimRight(TrimLeft(line));
  if (rest.empty() || (rest[0] != '-' && rest[0] != '*' && rest[0] != '_')) return false;
  int n = 0;
  for (const char c : rest) {
    if (c == rest[0]) {
      ++n;
    } else if (c != ' ' && c != '\t') {
      return false;
    }
  }
  return n >= 3;
}

std::optional<Block> ListItem(std::string_view line) {
  const std::string_view rest = TrimLeft(line);
  size_t m = 0;
  std::string marker;
  if (!rest.empty() && (rest[0] == '-' || rest[0] == '*' || rest[0] == '+')) {
    m = 1;
    marker = "\xE2\x80\xA2";  // •
  } else {
    while (m < rest.size() && m < 9 && rest[m] >= '0' && rest[m] <= '9') ++m;
    if (m == 0 || m >= rest.size() || (rest[m] != '.' && rest[m] != ')')) return std::nullopt;
    ++m;
    marker = std::string(rest.substr(0, m));
  }
  if (m < rest.size() && rest[m] != ' ' && rest[m] != '\t') return std::nullopt;
  Block b;
  b.kind = Block::kItem;
  b.indent = Indentation(line);
  b.marker = std::move(marker);
  b.text = std::string(TrimRight(TrimLeft(rest.substr(m))));
  return b;
}

Block Of(Block::Kind kind) {
  Block b;
  b.kind = kind;
  return b;
}

}  // namespace

std::string_view InfoLanguage(std::string_view info) {
  return info.substr(0, std::min(info.size(), info.find_first_of(" \t{,")));
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

int Indentation(std::string_view line) {
  int cols = 0;
  for (const char c : line) {
    if (c == ' ') {
      ++cols;
    } else if (c == '\t') {
      cols += kTab - cols % kTab;
    } else {
      break;
    }
  }
  return cols;
}

SourceLine LineAt(std::string_view text, size_t pos) {
  const size_t nl = text.find('\n', pos);
  if (nl == std::string_view::npos) return {text.substr(pos), text.size(), false};
  return {text.substr(pos, nl - pos), nl + 1, true};
}

std::optional<Fence> FenceOpen(std::string_view line) {
  Fence f;
  f.indent = line.find_first_not_of(' ');
  if (f.indent == std::string_view::npos) return std::nullopt;
  const std::string_view rest = line.substr(f.indent);
  f.ch = rest[0];
  if (f.ch != '`' && f.ch != '~') return std::nullopt;
  while (f.count < rest.size() && rest[f.count] == f.ch) ++f.count;
  if (f.count < 3) return std::nullopt;
  f.info = std::string(TrimRight(TrimLeft(rest.substr(f.count))));
  if (f.ch == '`' && f.info.find('`') != std::string_view::npos) return std::nullopt;  // `code`
  return f;
}

bool IsFenceClose(std::string_view line, const Fence& f) {
  const std::string_view rest = TrimLeft(line);
  size_t n = 0;
  while (n < rest.size() && rest[n] == f.ch) ++n;
  return n >= f.count && IsBlank(rest.substr(n));
}

std::string_view CodeLine(std::string_view line, const Fence& f) {
  size_t strip = 0;
  while (strip < f.indent && strip < line.size() && line[strip] == ' ') ++strip;
  line.remove_prefix(strip);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

std::vector<Block> ParseGroup(const std::vector<std::string_view>& lines) {
  std::vector<Block> blocks;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const size_t before = blocks.size();
    const std::string_view trimmed = TrimLeft(line);
    const bool shallow = Indentation(line) <= 3;
    if (IsRule(line)) {
      blocks.push_back(Of(Block::kRule));
    } else if (std::optional<Block> h = Heading(line)) {
      blocks.push_back(std::move(*h));
    } else if (shallow && trimmed[0] == '>') {
      std::string_view content = trimmed.substr(1);
      if (!content.empty() && content[0] == ' ') content.remove_prefix(1);
      if (blocks.empty() || blocks.back().kind != Block::kQuote)
        blocks.push_back(Of(Block::kQuote));
      blocks.back().lines.emplace_back(content);
    } else if (shallow && trimmed[0] == '|') {
      if (blocks.empty() || blocks.back().kind != Block::kTable)
        blocks.push_back(Of(Block::kTable));
      blocks.back().lines.emplace_back(TrimRight(line));
    } else if (std::optional<Block> item = ListItem(line)) {
      blocks.push_back(std::move(*item));
    } else if (!blocks.empty() &&
               (blocks.back().kind == Block::kParagraph || blocks.back().kind == Block::kItem)) {
      std::string& text = blocks.back().text;  // a continuation line: a soft break, a space
      if (!text.empty()) text += ' ';
      text.append(TrimRight(trimmed));
    } else if (!blocks.empty() && blocks.back().kind == Block::kQuote) {
      blocks.back().lines.emplace_back(line);  // lazy continuation of the quote
    } else {
      Block b;
      b.indent = Indentation(line);
      b.text = std::string(TrimRight(trimmed));
      blocks.push_back(std::move(b));
    }
    if (blocks.size() > before) blocks.back().first_line = i;
  }
  return blocks;
}

}  // namespace wc::tui::md
