// `wormchat serve`'s HTTP side: the OpenAI API in front of the serving loop, on cpp-httplib (the
// HTTP/1.1 framing, keep-alive and chunked encoding are its; routes, limits and the OpenAI objects
// are here).
//
//   GET  /health                 {"status": "ok"} (no key needed); 503 {"status": "draining"}
//   GET  /v1/models              the one model, as {"object": "list", "data": [...]}
//   GET  /metrics                Prometheus text (server_metrics.h)
//   POST /v1/chat/completions    openai_body.h's fields, framed by the model's chat format
//   POST /v1/completions         a prompt framed as `generate --raw` frames it, or token ids
//
// Every request is checked before it is answered: a bad field is a 400 naming it (the OpenAI
// error object's "param"), a max_tokens the context cannot hold is a 400 (never clamped), a full
// queue a 429 with Retry-After. Then the reply is written as it is generated: server-sent events
// for "stream": true, else one JSON object; while nothing else is due, a keep-alive (an SSE
// comment, or whitespace before the JSON object, which JSON allows) goes out every
// kKeepAliveMs, whether the request runs or still waits in the queue, so a client that has gone
// is noticed within about two of them and its choices are cancelled, freeing their rows or
// leaving the queue. Reading a request has a deadline of its own (ApiServerOptions::
// request_timeout_s).
//
// A streamed reply's last chunks (each choice's finish_reason, the usage) carry the extension
// object "wormchat": the server's KV, rows, queue and emulated-mesh figures (server_figures.h).
//
// Determinism: a request's choices are the serving loop's requests, built as `generate` builds
// them (openai_request.h); choice i's seed is ChoiceSeed(seed, i). The same request and seed give
// the same text over HTTP as `generate` with the same flags.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "app/openai/openai_request.h"
#include "app/serve/server_figures.h"
#include "app/serve/server_metrics.h"
#include "serving/serving_loop.h"

namespace httplib {
class Server;
}

namespace wc {

// The model as the API presents it.
struct ApiModel {
  std::string id;  // /v1/models' id (the model's file or directory name)
  RequestFraming framing;
  int64_t created = 0;  // Unix seconds: when the server started
};

struct ApiServerOptions {
  std::string host = "127.0.0.1";  // --host
  int port = 8080;                 // --port (0: any free port)
  std::string api_key;             // --api-key / --api-key-file: Bearer key for all but /health
  std::string cors_origin;         // --cors ORIGIN (empty: no CORS headers)
  size_t max_body_bytes = size_t{1} << 20;  // --max-body-bytes
  int max_queue = 128;                      // --max-queue: requests waiting for a row
  int max_messages = 1024;                  // --max-messages: messages per chat request
  int max_connections = 256;                // --max-connections: HTTP worker threads
  // --request-timeout-s: a request must be read whole (headers and body) within this many seconds
  // of the moment its first byte could be read, or its connection is closed (408 once its headers
  // were read): a client trickling bytes holds a worker no longer (request_deadline.h). Covers
  // reading a request, never writing its reply.
  int request_timeout_s = 30;
  int read_timeout_s = 30;  // and each read of it waits at most this (the deadline bounds it too)
  int max_choices = 8;      // n
  // What a body leaves out: OpenAI's defaults unless the command line says otherwise
  // (temperature 1, no top-k, no top-p; max_tokens the command's -n, at most what the context
  // leaves; seed 0, as `generate`'s).
  RequestDefaults defaults = [] {
    RequestDefaults d;
    d.sampling.temperature = 1.0f;
    d.sampling.top_k = 0;
    d.sampling.top_p = 1.0f;
    return d;
  }();
  // Applied to every sampled request after it is built (speculation: app/model_options.h's
  // ApplySpeculation), never to beam requests.
  std::function<void(Request*)> decorate;
  // The streamed replies' extension object "wormchat" (server_figures.h): the model, --mesh and
  // the attention meter its figures come from (left empty, it carries the loop's figures only).
  ServerFiguresSource figures;
};

class ApiServer {
 public:
  static constexpr int kKeepAliveMs = 40;

  // `loop` must outlive the server; it is not shut down here.
  ApiServer(ServingLoop& loop, ApiModel model, ApiServerOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds --host:--port and returns the port. Throws wc::Error naming them when it cannot.
  int Bind();
  // Serves until Stop(); returns once every connection's handler has returned. Returns at once
  // when Stop() came first.
  void Listen();
  // New requests get 503 (and new connections are refused); those running go on. Any thread, any
  // time, before Listen() too (DeadlineHttpServer::CloseListener: cpp-httplib's own stop() is lost
  // before its accept loop has begun, and a test that stopped a server at once hung).
  void Stop();
  bool draining() const { return draining_; }
  const ServerMetrics& metrics() const { return metrics_; }

 private:
  class Handlers;
  ServingLoop& loop_;
  ApiModel model_;
  ApiServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  ServerMetrics metrics_;
  std::mutex admit_mu_;  // the queue's check and the Submit it admits, as one step
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{1};
};

// Whether two keys are equal, in time that depends only on their lengths.
bool KeysEqual(const std::string& a, const std::string& b);

}  // namespace wc
