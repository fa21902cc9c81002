#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace wc::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> char_of{};  // byte -> char
  std::array<std::string, 256> utf8_of;
  Tables() {
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      char_of[static_cast<size_t>(b)] = self ? static_cast<char32_t>(b) : next++;
      unicode::Append(char_of[static_cast<size_t>(b)], &utf8_of[static_cast<size_t>(b)]);
    }
  }
  // char -> byte, or -1: every alphabet char is below U+0144.
  int ByteOf(char32_t c) const {
    if (c >= 0x144) return -1;
    if (c < 0x100) {
      const bool self = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
      return self ? static_cast<int>(c) : -1;
    }
    for (int b = 0; b < 256; ++b)
      if (char_of[static_cast<size_t>(b)] == c) return b;
    return -1;
  }
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
