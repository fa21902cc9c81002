#include "serving/text_stream.h"

#include <algorithm>

namespace wc {
namespace {

// Length of the UTF-8 sequence that lead byte `c` starts (0 if `c` cannot start one).
int SeqLen(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

bool IsCont(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

}  // namespace

size_t Utf8CompletePrefix(std::string_view s) {
  // Only the last (up to 3) bytes can be an unfinished character.
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if (IsCont(c)) continue;
    const int len = SeqLen(c);
    if (len > static_cast<int>(back)) {
      // Unfinished only if the bytes so far are continuations (checked by SanitizeUtf8 later).
      return n - back;
    }
    return n;
  }
  return n;
}

std::string SanitizeUtf8(std::string_view s) {
  static const char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int len = SeqLen(c);
    bool ok = len > 0 && i + len <= s.size();
    for (int j = 1; ok && j < len; ++j) ok = IsCont(static_cast<unsigned char>(s[i + j]));
    if (ok && len == 3) {  // reject overlongs and surrogates
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    } else if (ok && len == 4) {
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (!ok) {
      out += kReplacement;
      ++i;
      continue;
    }
    if (len == 1) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
        ++i;  // control byte from the model: never reaches a terminal
        continue;
      }
    } else if (len == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0) {
      i += 2;  // C1 control characters (U+0080..U+009F)
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

TextStream::TextStream(std::vector<std::string> stop, TextSink& sink, bool trim_leading_space)
    : stop_(std::move(stop)), sink_(sink), trim_leading_(trim_leading_space) {}

void TextStream::Emit(std::string_view raw) {
  std::string text = SanitizeUtf8(raw);
  if (trim_leading_) {
    const size_t first = text.find_first_not_of(" \t\n");
    if (first == std::string::npos) return;  // still only whitespace: keep trimming
    text.erase(0, first);
    trim_leading_ = false;
  }
  if (text.empty()) return;
  emitted_ += text;
  sink_.Write(text);
}

bool TextStream::Add(std::string_view bytes) {
  if (stopped_) return true;
  pending_.append(bytes);
  // A complete stop string: emit what precedes the one completed first and stop. (Not the one
  // starting first: with overlapping stop strings, that one may not have been complete yet had
  // the same bytes come in smaller pieces.) Ties go to the longer one.
  size_t hit = std::string::npos, hit_end = std::string::npos;
  for (const auto& s : stop_) {
    const size_t at = pending_.find(s);
    if (at == std::string::npos) continue;
    const size_t end = at + s.size();
    if (end < hit_end || (end == hit_end && at < hit)) hit = at, hit_end = end;
  }
  if (hit != std::string::npos) {
    Emit(std::string_view(pending_).substr(0, hit));
    pending_.clear();
    stopped_ = true;
    return true;
  }
  // Hold back the longest tail that is a proper prefix of a stop string, and an unfinished char.
  size_t hold = 0;
  for (const auto& s : stop_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  const size_t safe =
      Utf8CompletePrefix(std::string_view(pending_).substr(0, pending_.size() - hold));
  Emit(std::string_view(pending_).substr(0, safe));
  pending_.erase(0, safe);
  return false;
}

void TextStream::Finish() {
  if (!stopped_) Emit(pending_);
  pending_.clear();
  sink_.Flush();
}

}  // namespace wc
