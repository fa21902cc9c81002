// `wormchat bench serve --http URL`: an HTTP load client for any OpenAI-compatible server
// (wormchat serve, llama-server). --clients threads each send one streamed POST /v1/completions at
// once, its prompt --prompt-len token ids (an array, so every server sees exactly the same tokens)
// drawn from [--id-min, --id-max) by --seed, generating --gen-len tokens greedily with EOS ignored
// ("ignore_eos": true, llama-server's field and wormchat serve's). Measured per request: time to
// first token (the first chunk with text), tokens generated (the usage the server reports at the
// end, else the chunks with text), the time of the last byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wc {

struct HttpLoadOptions {
  std::string url;  // http://host:port
  int clients = 16;
  int prompt_len = 256;
  int gen_len = 128;
  int id_min = 3000, id_max = 30000;  // prompt ids: past special tokens, inside common vocabularies
  uint64_t seed = 0;
  int warmup = 1;  // unmeasured requests (8-token prompt, 4 new tokens) before the load
  double timeout_s = 600;
  std::string json;
};

// One request's figures, in seconds since the load's first send.
struct HttpRequestTiming {
  double sent = 0, first_token = 0, end = 0;
  int64_t tokens = 0;         // generated
  int64_t chunks = 0;         // chunks with text
  std::string error;          // empty when it succeeded
  double TokensPerS() const;  // tokens / (end - first_token): generate --stats' decode rate
};

struct HttpLoadResult {
  double wall_s = 0;  // first send to last end
  int64_t generated = 0;
  std::vector<HttpRequestTiming> requests;
  double AggregateTokensPerS() const { return wall_s > 0 ? generated / wall_s : 0; }
  nlohmann::json Json(const HttpLoadOptions& o) const;
};

// The prompt of client i: o.prompt_len ids from o.seed and i alone.
std::vector<int> HttpLoadPrompt(const HttpLoadOptions& o, int client);

// Runs the warm-up, then the load. Throws wc::Error if a request fails (naming the server's reply).
HttpLoadResult RunHttpLoad(const HttpLoadOptions& o);

// Prints the figures (aggregate tokens/s, TTFT p50/p90, per-client tokens/s) to stdout.
void PrintHttpLoad(const HttpLoadOptions& o, const HttpLoadResult& r);

}  // namespace wc
