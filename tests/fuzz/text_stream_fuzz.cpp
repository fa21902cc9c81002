// The text stream's UTF-8 assembly, sanitizing and stop strings (serving/text_stream.h). The input
// is pieces separated by 0xFF 0xFE: the first byte's low 2 bits give how many leading pieces are
// stop strings, the rest are the tokens' bytes in order. Whatever the bytes, the sink gets valid
// UTF-8 without control characters other than '\n' and '\t', and exactly emitted().
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "serving/text_stream.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// True if `s` is valid UTF-8 (no overlongs, surrogates or code points above U+10FFFF) without C0
// or C1 control characters other than '\n' and '\t', and without DEL.
bool CleanUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    size_t len;
    if (c < 0x80) {
      cp = c, len = 1;
    } else if ((c & 0xE0) == 0xC0) {
      cp = c & 0x1F, len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      cp = c & 0x0F, len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      cp = c & 0x07, len = 4;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t j = 1; j < len; ++j) {
      const unsigned char d = static_cast<unsigned char>(s[i + j]);
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3F);
    }
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    if ((cp < 0x20 && cp != '\n' && cp != '\t') || (cp >= 0x7F && cp < 0xA0)) return false;
    i += len;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> pieces;
  for (size_t start = 0;;) {
    const size_t sep = in.find("\xFF\xFE", start);
    pieces.emplace_back(in.substr(start, sep == std::string_view::npos ? sep : sep - start));
    if (sep == std::string_view::npos) break;
    start = sep + 2;
  }
  std::vector<std::string> stop;
  size_t first_token = 0;
  for (int n = data[0] & 3; n > 0 && first_token < pieces.size(); --n, ++first_token)
    if (!pieces[first_token].empty()) stop.push_back(pieces[first_token]);
  const bool trim = data[0] & 4;

  wc::StringSink sink;
  wc::TextStream stream(stop, sink, trim);
  bool stopped = false;
  for (size_t i = first_token; i < pieces.size() && !stopped; ++i) {
    stopped = stream.Add(pieces[i]);
    wc::fuzz::Require(wc::Utf8CompletePrefix(pieces[i]) <= pieces[i].size(), "prefix in range");
  }
  stream.Finish();
  wc::fuzz::Require(sink.text() == stream.emitted(), "the sink gets exactly emitted()");
  // How the bytes are split into tokens does not change the text.
  std::string whole;
  for (size_t i = first_token; i < pieces.size(); ++i) whole += pieces[i];
  wc::StringSink whole_sink;
  wc::TextStream whole_stream(stop, whole_sink, trim);
  whole_stream.Add(whole);
  whole_stream.Finish();
  if (whole_sink.text() != sink.text()) {
    std::fprintf(stderr, "token split changes the text: '%s' vs '%s'\n", sink.text().c_str(),
                 whole_sink.text().c_str());
    std::abort();
  }
  wc::fuzz::Require(CleanUtf8(sink.text()), "valid UTF-8 without control characters");
  const std::string once = wc::SanitizeUtf8(in);
  wc::fuzz::Require(CleanUtf8(once), "SanitizeUtf8 gives clean UTF-8");
  wc::fuzz::Require(wc::SanitizeUtf8(once) == once, "SanitizeUtf8 is idempotent");
  return 0;
}
