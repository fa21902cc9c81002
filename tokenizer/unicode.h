// The Unicode facts the Hugging Face tokenizer pipeline needs (tokenizer/hf_tokenizer.h), from
// utf8proc's tables (never hand-written ones) and named after the Rust predicates HF calls: what a
// char is (punctuation, numeric, whitespace), UTF-8 walking, lossy repair of invalid input, and the
// normalization forms.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace wc::unicode {

// The code point starting at s[*pos] of valid UTF-8; advances *pos past it.
char32_t Next(std::string_view s, size_t* pos);
// The start of the char that ends at byte `end` of valid UTF-8 (end > 0).
size_t PrevCharStart(std::string_view s, size_t end);
// The UTF-8 bytes of code point c appended to *out.
void Append(char32_t c, std::string* out);
// Bytes of the UTF-8 sequence led by byte b (1 for a continuation byte).
int SequenceBytes(unsigned char b);

// `s` with every maximal invalid subpart replaced by U+FFFD, as Rust's String::from_utf8_lossy
// and the WHATWG decoder do (the Unicode "substitution of maximal subparts"); valid input is
// returned unchanged.
std::string ToValidUtf8(std::string_view s);
bool IsValidUtf8(std::string_view s);

// Rust char::is_ascii_punctuation() || unicode_categories is_punctuation() (Pc Pd Ps Pe Pi Pf Po):
// HF's Punctuation pre-tokenizer.
bool IsPunctuation(char32_t c);
// Rust char::is_numeric(): general category Nd, Nl or No (HF's Digits pre-tokenizer).
bool IsNumeric(char32_t c);
// Rust char::is_whitespace(): the White_Space property.
bool IsWhitespace(char32_t c);
// General category Mark (Mn, Mc, Me): what HF's StripAccents removes.
bool IsMark(char32_t c);

enum class Form { kNFC, kNFD, kNFKC, kNFKD };
// `s` (valid UTF-8) in normalization form `form`.
std::string Normalize(std::string_view s, Form form);
// Rust char::to_lowercase() of every char (full mappings: U+0130 becomes "i\u0307").
std::string Lowercase(std::string_view s);

}  // namespace wc::unicode
