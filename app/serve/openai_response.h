// The OpenAI API's response objects as `wormchat serve` sends them: whole completions, the chunks
// of a streamed one (server-sent events), and error objects. Framing only: what the text is comes
// from the serving loop.
//
//   chat, whole       {"id": "chatcmpl-N", "object": "chat.completion", "created", "model",
//                      "choices": [{"index", "message": {"role": "assistant", "content"},
//                                   "logprobs", "finish_reason"}], "usage"}
//   chat, a chunk     {"id", "object": "chat.completion.chunk", "created", "model",
//                      "choices": [{"index", "delta": {"role"?, "content"?}, "logprobs": null,
//                                   "finish_reason"}]}
//   completions       "cmpl-N", "text_completion", choices [{"index", "text", "logprobs": null,
//                      "finish_reason"}], for whole replies and chunks alike
//   usage             {"prompt_tokens", "completion_tokens", "total_tokens",
//                      "prompt_tokens_details": {"cached_tokens"}}
//   error             {"error": {"message", "type", "param", "code"}}
// A streamed reply is "data: <chunk>\n\n" events, one id for all of them, then "data: [DONE]\n\n";
// with stream_options.include_usage every chunk carries "usage": null and a last chunk holds the
// usage with empty choices. The chunk with a choice's finish_reason and the usage chunk also carry
// the extension object "wormchat" (the server's figures: server_figures.h), added by the server
// (api_server.cpp) after these functions build them; OpenAI's clients ignore it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wc {

// What every chunk and whole reply of one request shares.
struct ResponseHead {
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  bool chat = true;
  int64_t created = 0;  // Unix seconds
  std::string model;
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

nlohmann::json UsageJson(const Usage& u);

// A whole reply's choice ("finish_reason": "stop" or "length"); logprobs: LogprobsJson's or null.
nlohmann::json ChoiceJson(const ResponseHead& h, int index, const std::string& text,
                          const char* finish_reason,
                          const nlohmann::json& logprobs = nlohmann::json());
// The whole reply around its choices.
nlohmann::json CompletionJson(const ResponseHead& h, nlohmann::json choices, const Usage& u);

// One streamed chunk of choice `index`: its text delta, the assistant role on a chat's first
// chunk, and its finish_reason on its last (nullptr: none yet). include_usage adds "usage": null.
nlohmann::json ChunkJson(const ResponseHead& h, int index, const std::string& delta, bool first,
                         const char* finish_reason, bool include_usage,
                         const nlohmann::json& logprobs = nlohmann::json());

// Tokens' log-probabilities as a choice (or a chunk's choice) carries them:
//   chat         {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
//                 "logprob", "bytes"}]}]}
//   completions  {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}],
//                 "text_offset"}: offsets from `offset`, each token's bytes after the last's
// A token's text is its bytes (invalid UTF-8 replaced when sent); "bytes" the byte values.
struct TokenLogprob;  // app/serve/completion_run.h
nlohmann::json LogprobsJson(bool chat, const std::vector<TokenLogprob>& tokens, int64_t offset);
// The last chunk of a stream that asked for usage: empty choices, the usage.
nlohmann::json UsageChunkJson(const ResponseHead& h, const Usage& u);

// "data: <json>\n\n" (invalid UTF-8 in text replaced by U+FFFD, never a dump exception).
std::string ServerSentEvent(const nlohmann::json& j);
constexpr const char kSseDone[] = "data: [DONE]\n\n";

// {"error": {...}}; param and code are JSON null when empty.
nlohmann::json ErrorJson(const std::string& message, const std::string& type,
                         const std::string& param, const std::string& code);

}  // namespace wc
