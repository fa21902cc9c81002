#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace wc::byte_level {
namespace {

// Every alphabet char is below U+0144 (256 bytes, 68 of them moved past U+00FF).
constexpr char32_t kAlphabetEnd = 0x144;

struct Tables {
  std::array<std::string, 256> utf8_of;       // byte -> its char's UTF-8
  std::array<int16_t, kAlphabetEnd> byte_of;  // char -> byte, or -1
  Tables() {
    byte_of.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t c = self ? static_cast<char32_t>(b) : next++;
      byte_of[c] = static_cast<int16_t>(b);
      unicode::Append(c, &utf8_of[static_cast<size_t>(b)]);
    }
  }
  int ByteOf(char32_t c) const { return c < kAlphabetEnd ? byte_of[c] : -1; }
};

const Tables& T() {
  static const Tables t;
  return t;
}

}  // namespace

std::string Encode(std::string_view s) {
  const Tables& t = T();
  std::string out;
  out.reserve(s.size() * 2);
  for (unsigned char b : s) out += t.utf8_of[b];
  return out;
}

bool Decode(std::string_view token, std::string* bytes) {
  const Tables& t = T();
  std::string out;
  for (size_t p = 0; p < token.size();) {
    const int b = t.ByteOf(unicode::Next(token, &p));
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
  }
  *bytes += out;
  return true;
}

}  // namespace wc::byte_level
