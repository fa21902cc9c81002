// An OpenAI request body (openai_body.h) turned into what the serving loop runs, framed and seeded
// exactly as `generate` would run it, so a batch line's or an HTTP request's result equals running
// that request alone:
//   completions   EncodePrompt(prompt, raw) ids, chat = false        (generate --raw)
//                 or the prompt's token ids as given                 (generate --ids)
//   chat          EncodeMessages(messages) ids, chat = true          (generate, one user message)
//   text          EncodePrompt(prompt, framed) ids, chat = true      (generate; a batch text line)
// with the body's sampling fields over the front end's defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/openai/openai_body.h"
#include "model/chat/chat_format.h"
#include "serving/request.h"
#include "tokenizer/tokenizer.h"

namespace wc {

// The front end's values, for the fields a body leaves out.
struct RequestDefaults {
  int max_tokens = 256;  // -n
  SamplingParams sampling;
  uint64_t seed = 0;
  std::vector<std::string> stop;
};

// What framing needs to know of the model.
struct RequestFraming {
  const Tokenizer* tokenizer = nullptr;
  const std::optional<ChatFormat>* chat_format = nullptr;
  int bos_token_id = 0;
  int eos_token_id = 0;
  int ctx = 0;         // positions per user row; a prompt must leave one for the reply
  int vocab_size = 0;  // a prompt of token ids must stay below it
  bool ids = false;    // --ids: text is token ids, so "stop" strings cannot apply
};

// How a front end names fields in its errors and what it does when the body gives no seed.
struct RequestNaming {
  std::string prefix;      // "body." (batch) or "" (HTTP)
  bool from_text = false;  // a batch text line: the prompt is "the prompt", stop "stop"
  uint64_t seed = 0;       // the seed when the body gives none
};

// The request for a good body (no observer yet). Throws OpenAIFieldError naming the field for a
// prompt that gives no tokens, is too long for the context or cannot be framed, or stop strings
// with --ids.
Request BuildOpenAIRequest(const OpenAIBody& body, const RequestDefaults& defaults,
                           const RequestFraming& framing, const RequestNaming& naming);

// The seed of choice i of a request of n sampled choices from seed s: s itself for choice 0 (so n =
// 1 is exactly `generate --seed s`), splitmix64(s ^ splitmix64(i)) for the others (splitmix64 as
// batch_request.h's DeriveBatchSeed spells it).
uint64_t ChoiceSeed(uint64_t seed, int choice);

// splitmix64's output function.
uint64_t SplitMix64(uint64_t x);

}  // namespace wc
