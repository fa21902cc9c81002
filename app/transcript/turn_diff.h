// How `wormchat transcript replay` tells a person where a reply went another way.
#pragma once

#include <string>

#include "serving/conversation.h"
#include "tokenizer/tokenizer.h"

namespace wc {

// The first difference between the `expected` turn and the one a replay `got`, "" if there is
// none. Ids first: "token K:" (K 1-based) and two lines of text around it - the few tokens both
// share, then each side's next tokens in brackets (or how it ended there). If the ids agree:
// "reply text differs:", "ended by X, expected Y" or "dropped N turns, expected M".
std::string DescribeDifference(const ConversationTurn& expected, const ConversationTurn& got,
                               const Tokenizer& tokenizer);

// `text` quoted for one terminal line: \n, \t, \" and \\ escaped, other control bytes as \xNN.
std::string QuoteForLine(const std::string& text);

}  // namespace wc
