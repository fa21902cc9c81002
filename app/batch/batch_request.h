// `wormchat batch`: a parsed input line turned into what the serving loop runs, framed and seeded
// exactly as `generate` would run it, so every result equals running that request alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/batch/batch_input.h"
#include "app/openai/openai_request.h"
#include "serving/request.h"

namespace wc {

// The command line's values, for the fields a line leaves out, and what framing needs to know of
// the model (app/openai/openai_request.h).
using BatchDefaults = RequestDefaults;  // seed: the base of derived seeds
using BatchFraming = RequestFraming;

// The seed of a request that gives none: splitmix64(fnv1a64(custom_id) ^ seed), where fnv1a64 is
// 64-bit FNV-1a over the custom_id's bytes (offset basis 0xcbf29ce484222325, prime 0x100000001b3)
// and splitmix64(x) is z = x + 0x9e3779b97f4a7c15; z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9;
// z = (z ^ z >> 27) * 0x94d049bb133111eb; z ^ z >> 31.
uint64_t DeriveBatchSeed(uint64_t seed, const std::string& custom_id);

// The request for a good line (no observer yet):
//   completions   EncodePrompt(prompt, raw) ids, chat = false        (generate --raw)
//                 or the prompt's token ids as given                 (generate --ids)
//   chat          EncodeMessages(messages) ids, chat = true          (generate, one user message)
//   text line     EncodePrompt(prompt, framed) ids, chat = true      (generate)
// with the body's sampling fields over `defaults`. Throws wc::Error "line N: <field> ..." for a
// prompt that gives no tokens, is too long for the context, or cannot be framed.
Request BuildBatchRequest(const BatchLine& line, const BatchDefaults& defaults,
                          const BatchFraming& framing);

}  // namespace wc
