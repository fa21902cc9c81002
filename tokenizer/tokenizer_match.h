// Whether two tokenizers give the same ids (issue 34: a draft model proposes token ids that the
// target verifies, so the two must mean the same text by every id).
#pragma once

#include <string>

#include "tokenizer/tokenizer.h"

namespace wc {

// A text that exercises what tokenizers most often disagree on: leading and repeated spaces,
// case, digits, punctuation, code, newlines and tabs, and multi-byte UTF-8 (accents, CJK, an
// emoji, which byte-fallback or byte-level pieces spell).
extern const char kTokenizerProbeText[];

// Empty when `a` and `b` give the same ids: the same piece count, the same bytes for every id,
// the same BOS and EOS ids, and the same encoding of kTokenizerProbeText (or both refusing it:
// wc::Error from Encode, a vocabulary that cannot spell it). Otherwise the first
// difference found, as a phrase naming both sides by `a_name` and `b_name` (e.g. "piece 17 is
// \"ab\" in the model's and \"ac\" in the draft's"), for an error the caller prefixes with what it
// compared.
std::string TokenizerDifference(const Tokenizer& a, const Tokenizer& b,
                                const std::string& a_name = "one",
                                const std::string& b_name = "the other");

}  // namespace wc
