// Parsing numbers users write (flags, header values, ids): the whole text or nothing, so "12x"
// or "" are refused instead of read as 12 or 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace wc {

// `text` as a decimal integer the way strtoll reads one (leading spaces and a sign allowed), or
// nullopt when it is empty, has anything after the number, or does not fit a long long.
std::optional<long long> ParseWholeInteger(const std::string& text);

// `text` as decimal digits only (no sign, no spaces) that fit 64 bits unsigned - a seed, which may
// be any of the 2^64 values - or nullopt.
std::optional<uint64_t> ParseWholeUnsigned(const std::string& text);

}  // namespace wc
