// The body of an OpenAI API request (/v1/completions, /v1/chat/completions), parsed once for every
// front end that takes one: `batch` (a JSONL line's "body") and `serve` (the HTTP request's body).
// Nothing here needs the model: framing, token counts and the context come later.
//
// Fields (null counts as absent, as OpenAI's clients send it for "not set"):
//   completions  prompt: a string, or an array of token ids (fed exactly)
//   chat         messages: [{role: system | user | assistant, content: a string or an array of
//                {type: "text", text} parts, joined}], the last one the user's
//   both         max_tokens (max_completion_tokens is the same field, OpenAI's newer name),
//                temperature, top_p, top_k (-1 or 0: no limit; vLLM's and llama-server's
//                extension), seed, stop (a string or an array), num_beams, length_penalty,
//                early_stopping, n, stream, stream_options.include_usage
//   chat         logprobs (true/false) and top_logprobs (0-20, with logprobs)
//   completions  logprobs: 0-20, the alternatives listed per token (the sampled token's own
//                log-probability is always given)
//   both         ignore_eos (true/false; llama-server's and vLLM's extension): the model's
//                end-of-generation ids do not end the reply, so it runs to max_tokens
// Fields this parser does not know are ignored (clients send user, presence_penalty, ...), as
// vLLM and llama-server ignore them.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/chat/chat_format.h"
#include "util/error.h"

namespace wc {

// A field of the body that is wrong: its name as written in the body ("max_tokens",
// "messages[2].content") and, in what(), the message with the front end's prefix before the
// name ("body.max_tokens must be ...").
class OpenAIFieldError : public Error {
 public:
  OpenAIFieldError(std::string param, const std::string& message)
      : Error(message), param_(std::move(param)) {}
  const std::string& param() const { return param_; }

 private:
  std::string param_;
};

struct OpenAIBody {
  bool chat = false;                           // /v1/chat/completions
  std::string prompt;                          // completions: the prompt as text
  std::optional<std::vector<int>> prompt_ids;  // completions: the prompt as token ids
  std::vector<ChatMessage> messages;           // chat: the last one is from the user

  std::optional<int> max_tokens;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;  // -1 (vLLM's "all") is given as 0
  std::optional<uint64_t> seed;
  std::optional<std::vector<std::string>> stop;
  // Beam search (issue 13): num_beams 1-16 (then the sampling fields are ignored), length_penalty,
  // early_stopping; n: the choices returned (at most num_beams with beams, else at most the
  // front end's sampled limit).
  std::optional<int> num_beams;
  std::optional<float> length_penalty;
  std::optional<bool> early_stopping;
  std::optional<int> n;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Log-probabilities of each sampled token (and of the `top_logprobs` likeliest tokens) under
  // the request's own sampling distribution.
  bool logprobs = false;
  int top_logprobs = 0;
  bool ignore_eos = false;  // extension: EOS does not end the reply (benchmarks' fixed lengths)
};

// Most alternatives a token's log-probabilities may list (OpenAI's top_logprobs limit).
constexpr int kMaxTopLogprobs = 20;

struct OpenAIBodyLimits {
  // Error messages name fields as prefix + name: "body." in a batch line, "" over HTTP.
  std::string prefix;
  // Most choices a sampled request may ask for with n (independent rows); beams allow num_beams.
  int max_sampled_n = 1;
  // Most messages a chat body may hold (0: no limit).
  int max_messages = 0;
  // Whether stream and stream_options are accepted (a batch line has nothing to stream into).
  bool allow_stream = false;
  // Whether logprobs may be asked for (a batch line's records do not carry them yet).
  bool allow_logprobs = false;
};

// Parses `body` (a JSON object) as a chat (chat = true) or completions body. Throws
// OpenAIFieldError naming the first wrong field.
OpenAIBody ParseOpenAIBody(const nlohmann::json& body, bool chat, const OpenAIBodyLimits& limits);

// A JSON value for an error message, shortened to about 40 characters.
std::string ShortJson(const nlohmann::json& v);

}  // namespace wc
