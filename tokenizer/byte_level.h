// GPT-2's byte-level alphabet (HF's ByteLevel pre-tokenizer and decoder): every byte shown as a
// printable char - bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF as themselves, the other 68 as
// U+0100 onwards, in byte order.
#pragma once

#include <string>
#include <string_view>

namespace wc::byte_level {

// The chars (UTF-8) of the bytes of `s`.
std::string Encode(std::string_view s);
// The bytes of `token` when every char of it is one of the alphabet's 256 chars; otherwise false
// (HF's ByteLevel decoder then keeps the token's own UTF-8).
bool Decode(std::string_view token, std::string* bytes);

}  // namespace wc::byte_level
