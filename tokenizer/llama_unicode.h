// The Unicode facts llama.cpp b6673's tokenizers use (src/unicode.cpp), kept apart from
// tokenizer/unicode.h's (Hugging Face's Rust semantics) because they differ: a lenient UTF-8
// decoder (one U+FFFD per bad byte, overlong forms and surrogates taken as code points), and the
// one-category-per-code-point flags its pre-tokenizers test, from utf8proc's tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wc::llama_unicode {

// llama.cpp's unicode_cpt_flags, one category per code point (Cn is kUndefined, as are code
// points past U+10FFFF), plus White_Space.
struct CptFlags {
  enum Category : uint8_t {
    kUndefined,
    kNumber,       // \p{N}
    kLetter,       // \p{L}
    kSeparator,    // \p{Z}
    kMark,         // \p{M}
    kPunctuation,  // \p{P}
    kSymbol,       // \p{S}
    kControl,      // \p{C} other than Cn
  };
  Category category = kUndefined;
  bool whitespace = false;
  // Outside the piece being split: llama.cpp's all-zero flags, which no class test matches.
  bool none = false;
  bool letter() const { return !none && category == kLetter; }
  bool number() const { return !none && category == kNumber; }
};

CptFlags Flags(char32_t c);
// The flags of a position outside the text (llama.cpp's `unicode_cpt_flags{}`).
inline CptFlags NoFlags() {
  CptFlags f;
  f.none = true;
  return f;
}
// Simple lowercase mapping (unicode_tolower).
char32_t ToLower(char32_t c);

// llama.cpp's unicode_cpts_from_utf8: a lead byte and the continuation bytes it announces make a
// code point whatever its value (overlong forms, surrogates, up to 0x1FFFFF); any other byte is
// one U+FFFD.
std::vector<char32_t> Codepoints(std::string_view s);
// Appends c's UTF-8 (4 bytes at most); false for a code point past U+10FFFF, which llama.cpp
// cannot write (it throws).
bool AppendUtf8(char32_t c, std::string* out);
// unicode_len_utf8: the sequence length a byte announces by its high nibble (continuation bytes
// and invalid leads are 1; F8..FF are 4).
size_t LeadLength(unsigned char b);

// One symbol of the SPM and BPE merge sessions: bytes [offset, offset + n) of the text, linked to
// its neighbours (indices, -1 at the ends); n 0 once merged into its left neighbour.
struct MergeSymbol {
  int prev = -1, next = -1;
  size_t offset = 0, n = 0;
};
// The text as llama.cpp's sessions first split it: one symbol a character by LeadLength (cut at the
// text's end), linked in order.
std::vector<MergeSymbol> CharacterSymbols(std::string_view text);

}  // namespace wc::llama_unicode
