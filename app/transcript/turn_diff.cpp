#include "app/transcript/turn_diff.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "util/error.h"

namespace wc {
namespace {

constexpr size_t kBefore = 6;  // shared tokens shown before the difference
constexpr size_t kAfter = 6;   // tokens of each side shown from it

std::string Spell(const Tokenizer& tok, const std::vector<int>& ids, size_t begin, size_t end) {
  std::string text;
  for (size_t i = begin; i < std::min(end, ids.size()); ++i)
    if (ids[i] >= 0 && ids[i] < tok.piece_count()) text += tok.TokenBytes(ids[i]);
  return text;
}

std::string Side(const Tokenizer& tok, const ConversationTurn& t, size_t k) {
  const size_t from = k > kBefore ? k - kBefore : 0;
  std::string before = Spell(tok, t.reply_ids, from, k);
  std::string after = Spell(tok, t.reply_ids, k, k + kAfter);
  if (from == 0) {  // the reply's text starts without the first token's leading space
    std::string& first = k > 0 ? before : after;
    if (!first.empty() && first[0] == ' ') first.erase(0, 1);
  }
  std::string line =
      (from > 0 ? "\"..." : "\"") + QuoteForLine(before) + "[" + QuoteForLine(after) + "]";
  line += k + kAfter < t.reply_ids.size() ? "...\"" : "\"";
  if (k >= t.reply_ids.size()) line += Cat(" (ended there: ", StopReasonName(t.reason), ")");
  return line;
}

}  // namespace

std::string QuoteForLine(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '"' || c == '\\') {
      out += Cat("\\", c);
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string DescribeDifference(const ConversationTurn& expected, const ConversationTurn& got,
                               const Tokenizer& tokenizer) {
  const std::vector<int>& a = expected.reply_ids;
  const std::vector<int>& b = got.reply_ids;
  if (a != b) {
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    return Cat("token ", k + 1, ":\n  expected: ", Side(tokenizer, expected, k),
               "\n  got:      ", Side(tokenizer, got, k));
  }
  if (expected.reply_text != got.reply_text)
    return Cat("reply text differs (same ids):\n  expected: \"", QuoteForLine(expected.reply_text),
               "\"\n  got:      \"", QuoteForLine(got.reply_text), "\"");
  if (expected.reason != got.reason)
    return Cat("ended by ", StopReasonName(got.reason), ", expected ",
               StopReasonName(expected.reason));
  if (expected.dropped_before != got.dropped_before)
    return Cat("dropped ", got.dropped_before, " earlier turns to fit the context, expected ",
               expected.dropped_before);
  return "";
}

}  // namespace wc
