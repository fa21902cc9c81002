// ChatClient and ParseServerAddress (chat_client.h): one streamed chat completion over
// cpp-httplib's client. The body's events are SseChatParser's (sse_chat_parser.cpp).
#include "app/openai/chat_client.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/json_file.h"

namespace wc {

using nlohmann::json;

namespace {

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

const char* RoleWireName(ChatMessage::Role r) {
  switch (r) {
    case ChatMessage::Role::kSystem:
      return "system";
    case ChatMessage::Role::kAssistant:
      return "assistant";
    case ChatMessage::Role::kUser:
      break;
  }
  return "user";
}

// Most bytes of an error answer or of /models' answer kept (a larger one is cut, or refused).
constexpr size_t kMaxErrorBody = size_t{64} << 10;
constexpr size_t kMaxModelsBody = size_t{16} << 20;

}  // namespace

ServerAddress ParseServerAddress(const std::string& url) {
  const auto bad = [&url](const std::string& why) {
    return Error(Cat("--server: ", Printable(url, 200), ": ", why));
  };
  if (url.empty()) throw Error("--server: the URL is empty (write http://HOST:PORT)");
  for (const char c : url)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      throw bad("a URL is printable ASCII without spaces (percent-encode the rest)");
  const size_t sep = url.find("://");
  if (sep == std::string::npos)
    throw bad("not an http:// or https:// URL (write http://HOST:PORT)");
  std::string scheme = url.substr(0, sep);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (scheme != "http" && scheme != "https")
    throw bad(Cat("the scheme must be http or https, got '", scheme, "'"));
  const std::string rest = url.substr(sep + 3);
  if (rest.find_first_of("?#") != std::string::npos)
    throw bad("a server's address has no query or fragment ('?', '#')");
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string::npos)
    throw bad("no user or password in the URL: the key goes in --api-key");

  std::string host, port;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) throw bad("an IPv6 address without its ']'");
    host = authority.substr(0, close + 1);
    const std::string inner = authority.substr(1, close - 1);
    // cpp-httplib 0.11's client reads "[" digits and ':' "]" only.
    if (inner.empty() || inner.find_first_not_of("0123456789:") != std::string::npos)
      throw bad("only IPv6 addresses of digits and ':' can be used ([::1]); use a host name");
    const std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw bad("after an IPv6 address's ']' comes ':PORT' or '/'");
      port = after.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port = authority.substr(colon + 1);
      has_port = true;
      if (port.find(':') != std::string::npos)
        throw bad("an IPv6 address goes in brackets (http://[::1]:8080)");
    }
  }
  if (host.empty()) throw bad("no host (write http://HOST:PORT)");
  if (host.front() != '[' &&
      host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") !=
          std::string::npos)
    throw bad(Cat("'", host, "' is not a host name or address"));
  if (has_port) {
    int p = 0;
    const bool digits = !port.empty() && port.size() <= 5 &&
                        port.find_first_not_of("0123456789") == std::string::npos;
    if (digits) p = std::stoi(port);
    if (!digits || p < 1 || p > 65535) throw bad(Cat("the port must be 1-65535, got '", port, "'"));
  }

  while (!path.empty() && path.back() == '/') path.pop_back();
  // The endpoint itself, pasted from a server's docs: its base.
  if (EndsWith(path, "/chat/completions")) path.resize(path.size() - 17);
  if (!EndsWith(path, "/v1")) path += "/v1";

  ServerAddress a;
  a.scheme_host_port = Cat(scheme, "://", host, has_port ? ":" + port : "");
  a.base_path = path;
  a.url = url;
  return a;
}

struct ChatClient::Impl {
  explicit Impl(const std::string& scheme_host_port) : http(scheme_host_port) {}

  httplib::Client http;
  std::string model;  // Model()'s answer, asked once

  // A running Stream and Cancel's stopper: the thread that calls http.stop() (which shuts the
  // request's socket down, so a read that waits for a silent server ends at once) until the Stream
  // has ended. stop() waits while a connection is being made, so it never runs on Cancel's caller;
  // it is repeated because a stop() that comes before the request took its socket stops nothing.
  std::mutex mu;
  std::condition_variable cv;
  bool running = false;
  std::thread stopper;
};

ChatClient::ChatClient(ServerAddress address, std::string api_key, int read_timeout_s)
    : address_(std::move(address)),
      api_key_(std::move(api_key)),
      read_timeout_s_(read_timeout_s),
      impl_(std::make_unique<Impl>(address_.scheme_host_port)) {
  if (!impl_->http.is_valid())
    throw Error(Cat("--server: ", address_.url, ": cpp-httplib cannot connect to this address"));
  impl_->http.set_connection_timeout(10, 0);
  impl_->http.set_read_timeout(read_timeout_s_, 0);
  impl_->http.set_write_timeout(read_timeout_s_, 0);
  impl_->http.set_keep_alive(true);  // each reply of a chat on one connection
  impl_->http.set_tcp_nodelay(true);
}

ChatClient::~ChatClient() = default;

std::string ChatClient::Model() {
  if (!impl_->model.empty()) return impl_->model;
  const std::string where = Cat(address_.url, " (GET ", address_.base_path, "/models)");
  httplib::Headers headers = {{"Accept", "application/json"}};
  if (!api_key_.empty()) headers.emplace("Authorization", "Bearer " + api_key_);
  std::string body;
  bool too_large = false;
  const httplib::Result res =
      impl_->http.Get(address_.base_path + "/models", headers, [&](const char* data, size_t len) {
        too_large = body.size() + len > kMaxModelsBody;
        if (!too_large) body.append(data, len);
        return !too_large;
      });
  if (too_large) throw Error(Cat(where, ": the answer is larger than 16 MiB"));
  if (!res) throw Error(Cat("cannot reach ", address_.url, ": ", httplib::to_string(res.error())));
  if (res->status == 401)
    throw Error(Cat(where, ": ",
                    api_key_.empty() ? "the server wants an API key: --api-key"
                                     : "the server refused the API key",
                    " (", HttpErrorText(res->status, body, res->reason), ")"));
  if (res->status < 200 || res->status >= 300)
    throw Error(Cat(where, ": ", HttpErrorText(res->status, body, res->reason)));
  json j;
  try {
    j = ParseJson(body, "");
  } catch (const Error&) {
    throw Error(Cat(where, ": the answer is not JSON: '",
                    Printable(body.substr(0, body.find('\n')), 80), "'"));
  }
  const json* first = nullptr;
  if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty())
    first = &j["data"][0];
  if (first == nullptr || !first->is_object() || !first->contains("id") ||
      !(*first)["id"].is_string() || (*first)["id"].get<std::string>().empty())
    throw Error(Cat(where, ": the server lists no models"));
  impl_->model = (*first)["id"].get<std::string>();
  return impl_->model;
}

ChatReply ChatClient::Stream(const std::vector<ChatMessage>& messages,
                             const ChatRequestOptions& options,
                             const std::function<void(std::string_view)>& on_text,
                             const std::function<void(const ServerFigures&)>& on_figures) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  const auto seconds = [t0] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->running = true;
    cancel_ = false;
  }
  // Whatever way this returns: no longer running, and Cancel's stopper (if any) joined.
  struct Ended {
    Impl& impl;
    ~Ended() {
      std::thread stopper;
      {
        std::lock_guard<std::mutex> lock(impl.mu);
        impl.running = false;
        stopper = std::move(impl.stopper);
      }
      impl.cv.notify_all();
      if (stopper.joinable()) stopper.join();
    }
  } ended{*impl_};
  // A reply Cancel cut short is cancelled, not failed; one whole before it ([DONE] read) is whole.
  bool whole = false;
  const auto end = [&](ChatReply r) {
    if (cancel_ && !whole) {
      r.cancelled = true;
      r.error.clear();
    }
    r.t_end = seconds();
    return r;
  };

  std::string model = options.model;
  if (model.empty()) {
    try {
      model = Model();
    } catch (const Error& e) {
      ChatReply r;
      r.error = e.what();
      return end(std::move(r));
    }
  }
  if (cancel_) return end(ChatReply());

  json msgs = json::array();
  for (const ChatMessage& m : messages)
    msgs.push_back({{"role", RoleWireName(m.role)}, {"content", m.content}});
  json body = {{"model", model},
               {"messages", std::move(msgs)},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"temperature", options.temperature},
               {"top_p", options.top_p}};
  if (options.top_k > 0) body["top_k"] = options.top_k;
  if (options.seed) body["seed"] = *options.seed;
  if (options.max_tokens > 0) body["max_tokens"] = options.max_tokens;

  double t_first_text = 0;
  SseChatParser parser(
      [&](std::string_view delta) {
        if (t_first_text == 0) t_first_text = seconds();
        if (on_text) on_text(delta);
      },
      on_figures);
  int status = 0;
  std::string error_body;
  httplib::Request req;
  req.method = "POST";
  req.path = address_.base_path + "/chat/completions";
  req.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  if (!api_key_.empty()) req.set_header("Authorization", "Bearer " + api_key_);
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return !cancel_;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (cancel_) return false;
    if (status < 200 || status >= 300) {  // an error answer's body, for its message
      error_body.append(data,
                        std::min(len, kMaxErrorBody - std::min(kMaxErrorBody, error_body.size())));
      return true;
    }
    if (parser.done()) return true;  // after [DONE]: the body's end, read so the connection stays
    return parser.Feed(std::string_view(data, len)) || parser.done();
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool ok = impl_->http.send(req, res, err);
  whole = parser.done() && parser.error().empty();

  if (cancel_ && !whole) {
    ChatReply r = parser.reply();
    r.t_first_text = t_first_text;
    return end(std::move(r));
  }
  if (status == 0) {
    ChatReply r;
    r.error = Cat("cannot reach ", address_.url, ": ", httplib::to_string(err));
    return end(std::move(r));
  }
  if (status < 200 || status >= 300) {
    ChatReply r;
    r.error = HttpErrorText(status, error_body, res.reason);
    return end(std::move(r));
  }
  if (ok) parser.Finish();
  ChatReply r = parser.reply();
  r.t_first_text = t_first_text;
  if (!ok && !whole && r.error.empty())
    r.error =
        Cat("the connection to ", address_.url, " broke off: ", httplib::to_string(err),
            err == httplib::Error::Read ? Cat(" (or nothing came for ", read_timeout_s_, " s)")
                                        : std::string());
  return end(std::move(r));
}

void ChatClient::Cancel() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->running) return;
  cancel_ = true;
  if (impl_->stopper.joinable()) return;
  Impl* impl = impl_.get();
  impl_->stopper = std::thread([impl] {
    std::unique_lock<std::mutex> lock(impl->mu);
    while (impl->running) {
      lock.unlock();
      impl->http.stop();
      lock.lock();
      impl->cv.wait_for(lock, std::chrono::milliseconds(20), [impl] { return !impl->running; });
    }
  });
}

}  // namespace wc
