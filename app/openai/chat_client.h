// The chat's side of the OpenAI API: one streamed chat completion against `wormchat serve` or any
// OpenAI-compatible server (llama-server, vLLM, ollama's /v1), over cpp-httplib's client (http://
// and https://). What `wormchat chat --server URL` runs each reply through (app/chat/
// remote_chat_session.h); it knows nothing of the chat's screen or files.
//
// The wire: POST {base}/chat/completions with {"model", "messages", "stream": true,
// "stream_options": {"include_usage": true}, "max_tokens", "temperature", "top_p", "top_k" (only
// when > 0: an extension llama-server and vLLM accept), "seed"}; the reply is server-sent events
// ("data: {chunk}" lines, "data: [DONE]" last), each chunk's choices[0].delta.content a piece of
// the text and its finish_reason on the last; a usage chunk (empty choices) near the end.
// `wormchat serve` adds an extension object "wormchat" to its last chunks (ServerFigures below);
// other servers send none and the chat says what it cannot show.
//
// Thread safety: one ChatClient serves one reply at a time on the calling thread (Stream blocks);
// Cancel may be called from any other thread while Stream runs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/chat/chat_format.h"

namespace wc {

// Where the server is: "http://host:port[/prefix]" or "https://...". The API's routes are under
// {base}: "http://127.0.0.1:8080" means http://127.0.0.1:8080/v1/chat/completions; a URL whose
// path ends in "/v1" (ollama's "http://localhost:11434/v1") is taken as the base itself.
struct ServerAddress {
  std::string scheme_host_port;  // "http://127.0.0.1:8080"
  std::string base_path;         // "/v1" (no trailing '/')
  std::string url;               // as given, for messages
};
// A path that ends in "/v1/chat/completions" (the endpoint, pasted) means its "/v1"; any other
// path P means P + "/v1". Without a port the scheme's (80, 443). Throws wc::Error "--server: URL:
// what is wrong" (not http/https, no host, a bad port, a query or fragment, a user or password, a
// byte that is not printable ASCII, an IPv6 address with letters: cpp-httplib 0.11 reads only
// "[digits and ':']").
ServerAddress ParseServerAddress(const std::string& url);

// A message is model/chat/chat_format.h's ChatMessage (the one type for "an OpenAI chat message"
// that the body parser and the chat templates use too; a second struct of that name here would
// not compile beside it): its role goes over the wire as "system", "user" or "assistant".

// The request's sampling fields (the chat's /set settings, as the run options declare them:
// serving/run_options.h). top_k 0: not sent.
struct ChatRequestOptions {
  std::string model;  // "" : the first of GET /v1/models (ChatClient::Model), as servers expect one
  double temperature = 1.0;
  double top_p = 1.0;
  int top_k = 0;
  std::optional<uint64_t> seed;
  int max_tokens = 0;  // 0: not sent (the server's default)
};

// `wormchat serve`'s figures for the status bar, from its extension object "wormchat" (absent
// from other servers: `present` false). Every field is optional on the wire; missing ones stay 0.
struct ServerFigures {
  bool present = false;
  int kv_blocks_used = 0, kv_blocks_total = 0;
  int64_t kv_bytes_used = 0, kv_bytes_total = 0;
  std::string kv_format;  // "bf16 paged/64"
  int ctx_size = 0;       // the server's context per row
  int rows_busy = 0, user_rows = 0, queue_length = 0;
  double mesh_us_per_token = 0, model_us_per_token = 0;
  bool model_us_estimated = false;
  std::string mesh;  // "n150"
};

// How a reply ended.
struct ChatReply {
  std::string text;           // all deltas, concatenated
  std::string finish_reason;  // "stop", "length", ... as sent; "" if none came (cancelled, error)
  bool cancelled = false;     // Cancel() ended it
  std::string error;          // "" or one line: why it failed (connection, HTTP status + message)
  // usage (-1: not sent)
  int64_t prompt_tokens = -1, completion_tokens = -1, cached_tokens = -1;
  ServerFigures figures;  // the last "wormchat" object seen
  // Seconds from the request's start to the first non-empty delta (0: none came), and to the end.
  double t_first_text = 0, t_end = 0;
  int deltas = 0;  // non-empty deltas received
};

class ChatClient {
 public:
  // `api_key` "": no Authorization header. Connect and read timeouts are generous (a prefill of
  // a long conversation on a CPU may take minutes before the first byte): connect 10 s, read
  // `read_timeout_s`. One keep-alive connection serves the replies in turn. https:// verifies the
  // server's certificate against the system's CAs (OpenSSL's default paths). Throws wc::Error if
  // cpp-httplib cannot use the address.
  ChatClient(ServerAddress address, std::string api_key, int read_timeout_s = 600);
  ~ChatClient();

  // GET {base}/models: the first model's id, asked once and then remembered. Throws wc::Error with
  // one line naming the URL and what went wrong ("cannot reach URL: Connection", 401 "the server
  // wants an API key: --api-key" or "the server refused the API key", another HTTP error as
  // HttpErrorText, not JSON, no models).
  std::string Model();

  // Streams one reply: `on_text` hears each non-empty delta in order (on this thread), `on_figures`
  // each "wormchat" object (either may be null; neither may throw). Never throws for what the
  // server or network does: the reply's `error` says it - "cannot reach URL: Connection" (no
  // answer: httplib's error name), "HTTP 401: MESSAGE" (HttpErrorText), a broken stream
  // (SseChatParser's), "the connection to URL broke off: Read", or Model()'s message when
  // options.model is "" and /models fails; the text received before an error or Cancel is kept.
  ChatReply Stream(const std::vector<ChatMessage>& messages, const ChatRequestOptions& options,
                   const std::function<void(std::string_view)>& on_text,
                   const std::function<void(const ServerFigures&)>& on_figures = nullptr);

  // Ends a running Stream soon (its connection is closed, so `wormchat serve` frees the row); the
  // reply comes back with cancelled = true and no error. Safe from any thread (on_text's
  // included) and never blocks: the socket is shut down by a helper thread (httplib's stop()), so
  // a Stream waiting for a silent server (a long prefill) returns within milliseconds; one still
  // connecting returns once the connection is made or fails. A no-op when nothing runs.
  void Cancel();

  const ServerAddress& address() const { return address_; }

 private:
  struct Impl;
  ServerAddress address_;
  std::string api_key_;
  int read_timeout_s_;
  std::atomic<bool> cancel_{false};
  std::unique_ptr<Impl> impl_;
};

// The one line an HTTP error answer gives: "HTTP 401: MESSAGE", MESSAGE the body's OpenAI error
// object's ({"error": {"message": M}}, or {"error": M}, {"message": M}, {"detail": M} as some
// servers send), else the body's first line cut to about 200 bytes, else `reason` ("Not Found");
// control bytes shown as \xNN. Never throws.
std::string HttpErrorText(int status, std::string_view body, std::string_view reason);

// The streamed body's parser, apart from the network so it can be fuzzed (sse_chat_parser.cpp: no
// HTTP in it): feed it the bytes as they come (any split gives the same calls and reply); it calls
// back per event. Server-sent events as the WHATWG spec frames them: lines end at LF (a CR before
// it is dropped), "field: value" or "field:value", "data" lines joined by LF into one event that a
// blank line ends, comments (": keep-alive") and the fields "event", "id", "retry" skipped. Each
// event's data is "[DONE]" or a chat.completion.chunk: choices[0].delta.content (index 0 only),
// its finish_reason, "usage" (prompt, completion and cached tokens), "wormchat" (ServerFigures),
// or {"error": {"message"}} (a server's mid-stream failure: `error` "server error: MESSAGE").
// Lines or events longer than 16 MiB, data that is not a JSON object (or nests deeper than
// util/json_file.h's limit), and bodies that are not server-sent events (a line with another
// field, such as a JSON object) end with `error` set, one line; never throws, never crashes.
// `on_text` and `on_figures` (either may be null) must not throw.
class SseChatParser {
 public:
  static constexpr size_t kMaxLineBytes = size_t{16} << 20;

  SseChatParser(std::function<void(std::string_view)> on_text,
                std::function<void(const ServerFigures&)> on_figures);
  // Returns false once the stream is over ([DONE] seen: what follows is ignored) or broken
  // (error() says why); true while more is expected.
  bool Feed(std::string_view bytes);
  // The end of the body: a last line and event without their line ends are taken as they are;
  // then a stream that ended without [DONE] is complete when a finish_reason came, else its
  // error is "the stream ended early (no [DONE])". Idempotent.
  void Finish();
  const ChatReply& reply() const { return reply_; }
  const std::string& error() const { return reply_.error; }
  bool done() const { return done_; }

 private:
  void Line(std::string_view line);
  void Dispatch();  // the event whose data is in data_
  void Fail(const std::string& why);
  std::function<void(std::string_view)> on_text_;
  std::function<void(const ServerFigures&)> on_figures_;
  std::string pending_;  // a partial line
  std::string data_;     // the event's data lines so far, each with its LF
  std::string event_;    // its "event" field ("" : a message)
  ChatReply reply_;
  bool done_ = false;
  bool finished_ = false;
};

}  // namespace wc
