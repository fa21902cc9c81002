#include "app/serve/api_server.h"

#include <httplib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "app/serve/completion_run.h"
#include "app/serve/openai_response.h"
#include "app/serve/request_deadline.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc {

using nlohmann::json;

namespace {

// The connection threads' queue: cpp-httplib's pool, each thread lowered to nice +10 (Linux sets
// a thread's nice on its own) before its first connection. A connection's work is small (parse a
// request, write a token's chunk) but comes once a token; at the compute threads' priority each
// wake preempted one of them inside a parallel region, and the other then waited at the barrier.
// Below them it runs in their gaps instead, a few milliseconds later at most (docs/performance.md,
// "One client over HTTP").
class ConnectionQueue : public httplib::TaskQueue {
 public:
  explicit ConnectionQueue(size_t threads) : pool_(threads) {}
  void enqueue(std::function<void()> fn) override {
    pool_.enqueue([fn = std::move(fn)] {
      thread_local const bool lowered = [] {
        constexpr int kNiceAboveCompute = 10;
        const int tid = static_cast<int>(::syscall(SYS_gettid));
        errno = 0;
        const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
        if (errno == 0)
          ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid),
                        std::min(19, nice + kNiceAboveCompute));
        return true;
      }();
      (void)lowered;
      fn();
    });
  }
  void shutdown() override { pool_.shutdown(); }
  void on_idle() override { pool_.on_idle(); }

 private:
  httplib::ThreadPool pool_;
};

}  // namespace

bool KeysEqual(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

// Named, not anonymous: the Handlers class (external linkage) holds lambdas that capture these.
namespace serve_detail {

using Clock = std::chrono::steady_clock;

// An OpenAI error answered now.
struct ApiError {
  int status;
  std::string message, type, param, code;
};

// Every error answer ends its connection: some are given before the request's body was read
// (a wrong key, a body too large), whose unread rest must not be read as the next request.
void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_header("Connection", "close");
  CloseConnectionAfterResponse();
  res.set_content(ErrorJson(e.message, e.type, e.param, e.code)
                          .dump(-1, ' ', false, json::error_handler_t::replace) +
                      "\n",
                  "application/json");
}

ApiError BadRequest(const std::string& message, const std::string& param = "") {
  return {400, message, "invalid_request_error", param, ""};
}

// One request's reply as it is written: its choices' text and ends, the usage.
struct Reply {
  ResponseHead head;
  bool stream = false, include_usage = false, beams = false;
  std::shared_ptr<CompletionRun> run;
  std::vector<std::string> text;                      // [choices] (non-stream: the whole text)
  std::vector<bool> started;                          // [choices] stream: a chunk was sent
  std::vector<std::optional<RequestResult>> results;  // [choices]
  bool logprobs = false;
  std::vector<std::vector<TokenLogprob>> pending;  // [choices] log-probabilities not yet sent
  std::vector<int64_t> offset;                     // [choices] completions: bytes sent so far
  Clock::time_point last_write;
  // The "wormchat" object for a choice at a context of N tokens (server_figures.h).
  std::function<json(int ctx_tokens)> figures;
  bool opened = false;  // non-stream: keep-alive whitespace was sent
  bool finished = false;
};

const char* Finish(const RequestResult& r) {
  return FinishReasonName(r.reason);
}

// A choice's context at its end: its prompt and the tokens it sampled.
int ContextOf(const RequestResult& r) {
  return r.prompt_tokens + static_cast<int>(r.tokens.size());
}

Usage UsageOf(const Reply& reply) {
  Usage u;
  for (size_t i = 0; i < reply.results.size(); ++i) {
    if (!reply.results[i]) continue;
    const RequestResult& r = *reply.results[i];
    if (i == 0) {
      u.prompt_tokens = r.prompt_tokens;
      u.cached_tokens = r.cached_tokens;
    }
    if (reply.beams) {
      for (const BeamSequence& s : r.sequences) u.completion_tokens += s.tokens.size();
    } else {
      u.completion_tokens += static_cast<int64_t>(r.tokens.size());
    }
  }
  return u;
}

// The loop failed a choice after the reply began (a failed forward pass, the server shutting
// down): the error, as the last thing written.
const RequestResult* Failed(const Reply& reply) {
  for (const auto& r : reply.results)
    if (r && r->reason == StopReason::kError) return &*r;
  return nullptr;
}

}  // namespace serve_detail

using namespace serve_detail;  // NOLINT: this file's own helpers

class ApiServer::Handlers {
 public:
  explicit Handlers(ApiServer& s) : s_(s) {}

  void Health(const httplib::Request&, httplib::Response& res) {
    if (s_.draining_) {
      res.status = 503;
      res.set_header("Retry-After", "5");
      res.set_content("{\"status\": \"draining\"}\n", "application/json");
      return;
    }
    res.set_content("{\"status\": \"ok\"}\n", "application/json");
  }

  void Models(const httplib::Request&, httplib::Response& res) {
    const json j = {{"object", "list"},
                    {"data", json::array({{{"id", s_.model_.id},
                                           {"object", "model"},
                                           {"created", s_.model_.created},
                                           {"owned_by", "wormchat"}}})}};
    res.set_content(j.dump() + "\n", "application/json");
  }

  void Metrics(const httplib::Request&, httplib::Response& res) {
    res.set_content(s_.metrics_.Render(s_.loop_.status()), "text/plain; version=0.0.4");
  }

  void Complete(const httplib::Request& req, httplib::Response& res, bool chat) {
    const Clock::time_point received = Clock::now();
    if (s_.draining_) {
      res.set_header("Retry-After", "5");
      return SendError(res,
                       {503, "the server is shutting down", "server_error", "", "shutting_down"});
    }
    std::vector<Request> requests;
    OpenAIBody body;
    try {
      body = Parse(req, chat);
      requests = Build(body);
    } catch (const ApiError& e) {
      return SendError(res, e);
    }
    // Admission: the check and the Submit below are one step for all the HTTP threads, so two
    // requests cannot both take the queue's last place. Requests submitted but not yet admitted
    // count, less the rows free for them now: the queue is what waits for a row.
    std::unique_lock<std::mutex> admit(s_.admit_mu_);
    const ServingStatus status = s_.loop_.status();
    const int free_rows = std::max(0, status.user_rows - status.active_rows - status.session_rows);
    const int queued = std::max(0, status.queued - free_rows);
    if (status.queued + static_cast<int>(requests.size()) > s_.options_.max_queue + free_rows) {
      res.set_header("Retry-After", "1");
      return SendError(res, {429,
                             Cat("the queue is full: ", queued, " requests are waiting for a row (",
                                 "--max-queue ", s_.options_.max_queue, "); retry later"),
                             "rate_limit_error", "", "queue_full"});
    }
    auto reply = std::make_shared<Reply>();
    reply->head.chat = chat;
    reply->head.id = Cat(chat ? "chatcmpl-" : "cmpl-", s_.model_.created, "-", s_.next_id_++);
    reply->head.created = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    reply->head.model = s_.model_.id;
    reply->stream = body.stream;
    reply->include_usage = body.include_usage;
    reply->beams = body.num_beams.has_value();
    const size_t n = reply->beams ? static_cast<size_t>(body.n.value_or(1)) : requests.size();
    reply->text.assign(n, std::string());
    reply->started.assign(n, false);
    reply->results.assign(requests.size(), std::nullopt);
    reply->logprobs = body.logprobs;
    reply->pending.assign(n, {});
    reply->offset.assign(n, 0);
    reply->last_write = Clock::now();
    CompletionRun::Hooks hooks;
    ServerMetrics* metrics = &s_.metrics_;
    hooks.on_first_token = [metrics, received] {
      metrics->FirstToken(std::chrono::duration<double>(Clock::now() - received).count());
    };
    hooks.on_finish = [metrics](const RequestResult& r) { metrics->Finished(r); };
    CompletionRun::Logprobs lp;
    lp.on = body.logprobs;
    lp.top = body.top_logprobs;
    lp.tokenizer = s_.model_.framing.tokenizer;
    reply->run = std::make_shared<CompletionRun>(s_.loop_, std::move(hooks), lp);
    if (body.stream) {
      const FiguresMark mark = MarkFigures(s_.options_.figures, s_.loop_);
      ApiServer* server = &s_;
      // The usage chunk follows the finish chunk of choice 0 at once: its object is reused (the
      // whole-model estimate takes ~1 ms on n150).
      reply->figures = [server, mark, last_ctx = -1, last = json()](int ctx_tokens) mutable {
        if (ctx_tokens != last_ctx) {
          last = FiguresJson(server->options_.figures, server->loop_, mark, ctx_tokens);
          last_ctx = ctx_tokens;
        }
        return last;
      };
    }
    reply->run->Submit(std::move(requests));
    admit.unlock();
    auto provider = [reply](size_t, httplib::DataSink& sink) { return Write(*reply, sink); };
    auto releaser = [reply](bool) { reply->run->Cancel(); };  // no-op for ended choices
    res.set_chunked_content_provider(body.stream ? "text/event-stream" : "application/json",
                                     std::move(provider), std::move(releaser));
    if (body.stream) res.set_header("Cache-Control", "no-cache");
  }

 private:
  // The body, parsed and checked.
  OpenAIBody Parse(const httplib::Request& req, bool chat) const {
    json j;
    try {
      j = ParseJson(req.body, "");
    } catch (const JsonError& e) {
      if (e.byte() > 0)
        throw BadRequest(Cat("the body is not valid JSON (syntax error at byte ", e.byte(), ")"));
      throw BadRequest(Cat("the body is not valid JSON (", e.reason(), ")"));
    }
    if (!j.is_object()) throw BadRequest("the body must be a JSON object, got " + ShortJson(j));
    OpenAIBodyLimits limits;
    limits.max_sampled_n = s_.options_.max_choices;
    limits.max_messages = s_.options_.max_messages;
    limits.allow_stream = true;
    limits.allow_logprobs = true;
    try {
      OpenAIBody body = ParseOpenAIBody(j, chat, limits);
      if (body.stream && body.num_beams)
        throw BadRequest(
            "stream cannot be used with num_beams: beam search returns its choices "
            "when it ends",
            "stream");
      return body;
    } catch (const OpenAIFieldError& e) {
      throw BadRequest(e.what(), e.param());
    }
  }

  // The serving loop's requests for the body: one per sampled choice, or one beam request.
  std::vector<Request> Build(const OpenAIBody& body) const {
    const RequestFraming& f = s_.model_.framing;
    RequestNaming naming;
    naming.seed = s_.options_.defaults.seed;
    Request r;
    try {
      r = BuildOpenAIRequest(body, s_.options_.defaults, f, naming);
    } catch (const OpenAIFieldError& e) {
      throw BadRequest(e.what(), e.param());
    }
    const int prompt = static_cast<int>(r.prompt_ids.size());
    if (body.max_tokens) {
      if (prompt + *body.max_tokens > f.ctx)
        throw BadRequest(
            Cat("max_tokens is ", *body.max_tokens, ", but the prompt's ", prompt, " tokens leave ",
                f.ctx - prompt, " of the context of ", f.ctx, " tokens"),
            "max_tokens");
    } else {
      r.max_new_tokens = std::min(r.max_new_tokens, f.ctx - prompt);
    }
    if (!r.beams && s_.options_.decorate) s_.options_.decorate(&r);
    try {
      s_.loop_.CheckRequest(r);
    } catch (const Error& e) {
      throw BadRequest(e.what());
    }
    std::vector<Request> out;
    const int n = r.beams ? 1 : body.n.value_or(1);
    for (int i = 0; i < n; ++i) {
      out.push_back(r);
      out.back().seed = ChoiceSeed(r.seed, i);
    }
    return out;
  }

  // Writes what is due; false when the client is gone (the releaser then cancels the choices).
  static bool Write(Reply& reply, httplib::DataSink& sink) {
    std::vector<CompletionRun::Event> events;
    const bool more = reply.run->Wait(std::chrono::milliseconds(kKeepAliveMs / 2), &events);
    std::string out;
    for (CompletionRun::Event& e : events) {
      const int c = e.choice;
      if (e.logprob) {
        reply.pending[c].push_back(std::move(*e.logprob));
        continue;
      }
      if (e.finish) reply.results[c] = std::move(*e.finish);
      if (reply.beams) continue;  // beams: the sequences, at the end
      if (!reply.stream) {
        reply.text[c] += e.text;
        continue;
      }
      if (!e.text.empty() || !reply.started[c]) {
        if (!e.text.empty() || reply.head.chat)
          out += ServerSentEvent(ChunkJson(reply.head, c, e.text, !reply.started[c], nullptr,
                                           reply.include_usage, TakeLogprobs(reply, c)));
        reply.started[c] = true;
      }
      if (reply.results[c] && reply.results[c]->reason != StopReason::kError &&
          reply.results[c]->reason != StopReason::kCancelled) {
        json chunk = ChunkJson(reply.head, c, "", false, Finish(*reply.results[c]),
                               reply.include_usage, TakeLogprobs(reply, c));
        chunk["wormchat"] = reply.figures(ContextOf(*reply.results[c]));
        out += ServerSentEvent(chunk);
      }
    }
    if (!more) {
      if (reply.stream) {
        if (const RequestResult* f = Failed(reply)) {
          out += ServerSentEvent(ErrorJson(f->error, "server_error", "", ""));
        } else if (reply.include_usage) {
          json chunk = UsageChunkJson(reply.head, UsageOf(reply));
          if (reply.results[0]) chunk["wormchat"] = reply.figures(ContextOf(*reply.results[0]));
          out += ServerSentEvent(chunk);
        }
        out += kSseDone;
      } else {
        out += WholeReply(reply);
      }
    } else if (out.empty() &&
               Clock::now() - reply.last_write >= std::chrono::milliseconds(kKeepAliveMs)) {
      out = reply.stream ? ":\n\n" : " ";
    }
    if (!out.empty()) {
      if (!sink.write(out.data(), out.size())) return false;
      reply.last_write = Clock::now();
    }
    if (!more) sink.done();
    return true;
  }

  // Choice c's log-probabilities not yet sent, as a chunk carries them (null when not asked for),
  // then forgotten.
  static json TakeLogprobs(Reply& reply, int c) {
    if (!reply.logprobs) return json();
    const json j = LogprobsJson(reply.head.chat, reply.pending[c], reply.offset[c]);
    for (const TokenLogprob& t : reply.pending[c])
      reply.offset[c] += static_cast<int64_t>(t.bytes.size());
    reply.pending[c].clear();
    return j;
  }

  static std::string WholeReply(Reply& reply) {
    if (const RequestResult* f = Failed(reply))
      return ErrorJson(f->error, "server_error", "", "")
                 .dump(-1, ' ', false, json::error_handler_t::replace) +
             "\n";
    json choices = json::array();
    if (reply.beams) {
      const RequestResult& r = *reply.results[0];
      for (size_t i = 0; i < r.sequences.size(); ++i)
        choices.push_back(ChoiceJson(reply.head, static_cast<int>(i), r.sequences[i].text,
                                     FinishReasonName(r.sequences[i].reason)));
    } else {
      for (size_t i = 0; i < reply.results.size(); ++i)
        choices.push_back(ChoiceJson(reply.head, static_cast<int>(i), reply.text[i],
                                     Finish(*reply.results[i]),
                                     TakeLogprobs(reply, static_cast<int>(i))));
    }
    return CompletionJson(reply.head, std::move(choices), UsageOf(reply))
               .dump(-1, ' ', false, json::error_handler_t::replace) +
           "\n";
  }

  ApiServer& s_;
};

ApiServer::ApiServer(ServingLoop& loop, ApiModel model, ApiServerOptions options)
    : loop_(loop),
      model_(std::move(model)),
      options_(std::move(options)),
      http_(
          std::make_unique<DeadlineHttpServer>(std::chrono::seconds(options_.request_timeout_s))) {
  auto h = std::make_shared<Handlers>(*this);
  httplib::Server& svr = *http_;
  const int workers = std::max(4, options_.max_connections);
  svr.new_task_queue = [workers] { return new ConnectionQueue(static_cast<size_t>(workers)); };
  svr.set_payload_max_length(options_.max_body_bytes);
  svr.set_read_timeout(options_.read_timeout_s, 0);
  svr.set_tcp_nodelay(true);
  if (!options_.cors_origin.empty()) {
    svr.set_default_headers(
        {{"Access-Control-Allow-Origin", options_.cors_origin}, {"Vary", "Origin"}});
    svr.Options(R"(/.*)", [](const httplib::Request&, httplib::Response& res) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
    });
  }
  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path == "/health" || req.method == "OPTIONS")
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ";
    if (auth.compare(0, bearer.size(), bearer) == 0 &&
        KeysEqual(auth.substr(bearer.size()), options_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    SendError(res, {401,
                    auth.empty() ? "no API key: send the header Authorization: Bearer KEY"
                                 : "the API key is wrong",
                    "authentication_error", "", "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });
  svr.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty() || res.content_length_ > 0)
          return httplib::Server::HandlerResponse::Unhandled;
        if (RequestDeadlinePassed()) {  // the connection is closed after this answer
          SendError(res, {408,
                          Cat("the request was not read whole within ", options_.request_timeout_s,
                              " seconds (--request-timeout-s)"),
                          "invalid_request_error", "", "request_timeout"});
          return httplib::Server::HandlerResponse::Handled;
        }
        ApiError e{res.status, "", "invalid_request_error", "", ""};
        switch (res.status) {
          case 404:
            e.message = Cat("no route ", req.method, " ", req.path);
            e.code = "not_found";
            break;
          case 413:
            e.message = Cat("the request body is larger than ", options_.max_body_bytes,
                            " bytes (--max-body-bytes)");
            e.code = "body_too_large";
            break;
          case 414:
            e.message = "the request line is too long";
            break;
          default:
            e.message = Cat("the request could not be read (HTTP ", res.status, ")");
            break;
        }
        SendError(res, e);
        return httplib::Server::HandlerResponse::Handled;
      }));
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SendError(res, {500, "internal error: " + what, "server_error", "", ""});
      });
  // Counted as the answer's status line is about to be written (cpp-httplib calls this for every
  // response, routed or not), not in the logger, which runs after the body is sent: a client that
  // reads /metrics right after an answer must find that answer counted.
  svr.set_post_routing_handler(
      [this](const httplib::Request&, httplib::Response& res) { metrics_.Answered(res.status); });
  svr.Get("/health", [h](const httplib::Request& q, httplib::Response& r) { h->Health(q, r); });
  svr.Get("/v1/models", [h](const httplib::Request& q, httplib::Response& r) { h->Models(q, r); });
  svr.Get("/metrics", [h](const httplib::Request& q, httplib::Response& r) { h->Metrics(q, r); });
  svr.Post("/v1/chat/completions", [h](const httplib::Request& q, httplib::Response& r) {
    h->Complete(q, r, /*chat=*/true);
  });
  svr.Post("/v1/completions", [h](const httplib::Request& q, httplib::Response& r) {
    h->Complete(q, r, /*chat=*/false);
  });
}

ApiServer::~ApiServer() {
  Stop();
}

int ApiServer::Bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) throw Error(Cat("--host ", options_.host, ": cannot listen there"));
  } else if (!http_->bind_to_port(options_.host, port)) {
    throw Error(Cat("--host ", options_.host, " --port ", port,
                    ": cannot listen there (in use, or not an address of this machine)"));
  }
  // A burst of clients connecting at once waits for the accept loop, not reset
  // (tests/app/serve_load_test.cpp: 256 at once).
  static_cast<DeadlineHttpServer&>(*http_).SetListenBacklog(SOMAXCONN);
  return port;
}

void ApiServer::Listen() {
  http_->listen_after_bind();
}

void ApiServer::Stop() {
  draining_ = true;
  static_cast<DeadlineHttpServer&>(*http_).CloseListener();
}

}  // namespace wc
