#include "app/bench/http_load.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "app/bench/requests.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/rng.h"

namespace wc {
namespace {

using HttpClock = std::chrono::steady_clock;

double HttpSeconds(HttpClock::time_point t0, HttpClock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

// The streamed body of one request: server-sent events, each "data: {json}" or "data: [DONE]";
// comments (": ...", wormchat's keep-alives) are skipped.
class SseReader {
 public:
  SseReader(HttpClock::time_point t0, HttpRequestTiming* t) : t0_(t0), t_(t) {}

  void Feed(const char* data, size_t len) {
    if (head_.size() < 200) head_.append(data, std::min(len, 200 - head_.size()));
    buf_.append(data, len);
    size_t end;
    while ((end = buf_.find("\n\n")) != std::string::npos) {
      Event(buf_.substr(0, end));
      buf_.erase(0, end + 2);
    }
  }

  bool usage_seen() const { return usage_seen_; }
  const std::string& head() const { return head_; }  // the body's first bytes (an error's)

 private:
  void Event(const std::string& ev) {
    size_t pos = 0;
    while (pos < ev.size()) {
      size_t nl = ev.find('\n', pos);
      if (nl == std::string::npos) nl = ev.size();
      const std::string line = ev.substr(pos, nl - pos);
      pos = nl + 1;
      if (line.rfind("data:", 0) != 0) continue;
      std::string payload = line.substr(5);
      if (!payload.empty() && payload[0] == ' ') payload.erase(0, 1);
      if (payload == "[DONE]") continue;
      const nlohmann::json j = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) {
        t_->error = "a chunk that is not JSON: " + payload.substr(0, 80);
        continue;
      }
      if (j.contains("error")) {
        t_->error = j["error"].dump().substr(0, 200);
        continue;
      }
      if (j.contains("choices") && j["choices"].is_array())
        for (const nlohmann::json& c : j["choices"])
          if (c.contains("text") && c["text"].is_string() &&
              !c["text"].get<std::string>().empty()) {
            if (t_->chunks == 0) t_->first_token = HttpSeconds(t0_, HttpClock::now());
            ++t_->chunks;
          }
      if (j.contains("usage") && j["usage"].is_object() &&
          j["usage"].contains("completion_tokens") &&
          j["usage"]["completion_tokens"].is_number_integer()) {
        t_->tokens = j["usage"]["completion_tokens"].get<int64_t>();
        usage_seen_ = true;
      }
    }
  }

  HttpClock::time_point t0_;
  HttpRequestTiming* t_;
  std::string buf_, head_;
  bool usage_seen_ = false;
};

nlohmann::json CompletionBody(const std::vector<int>& prompt, int gen_len) {
  return {{"prompt", prompt}, {"max_tokens", gen_len},
          {"temperature", 0}, {"ignore_eos", true},
          {"stream", true},   {"stream_options", {{"include_usage", true}}}};
}

// Sends one request on `cli` and reads its stream; times are since t0.
HttpRequestTiming SendCompletion(httplib::Client& cli, const nlohmann::json& body,
                                 HttpClock::time_point t0) {
  HttpRequestTiming t;
  SseReader reader(t0, &t);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    reader.Feed(data, len);
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  t.sent = HttpSeconds(t0, HttpClock::now());
  const bool ok = cli.send(req, res, err);
  t.end = HttpSeconds(t0, HttpClock::now());
  if (!ok) {
    t.error = Cat("no reply (", httplib::to_string(err), ")");
  } else if (res.status != 200) {
    t.error =
        Cat("HTTP ", res.status, ": ", res.body.empty() ? reader.head() : res.body.substr(0, 200));
  } else if (!reader.usage_seen()) {
    t.tokens = t.chunks;  // no usage reported: one chunk a token
  }
  if (t.error.empty() && t.chunks == 0) t.error = "no token streamed";
  return t;
}

}  // namespace

double HttpRequestTiming::TokensPerS() const {
  const double s = end - first_token;
  return s > 0 ? tokens / s : 0;
}

std::vector<int> HttpLoadPrompt(const HttpLoadOptions& o, int client) {
  Rng rng(o.seed * 1000003ull + static_cast<uint64_t>(client));
  std::vector<int> ids(o.prompt_len);
  const uint64_t span = static_cast<uint64_t>(o.id_max - o.id_min);
  for (int& id : ids) id = o.id_min + static_cast<int>(rng.Next() % span);
  return ids;
}

HttpLoadResult RunHttpLoad(const HttpLoadOptions& o) {
  if (o.clients < 1) throw Error(Cat("--clients must be >= 1, got ", o.clients));
  if (o.prompt_len < 1) throw Error(Cat("--prompt-len must be >= 1, got ", o.prompt_len));
  if (o.gen_len < 2) throw Error(Cat("--gen-len must be >= 2, got ", o.gen_len));
  if (!(o.id_min >= 0 && o.id_min < o.id_max))
    throw Error(Cat("--id-range must be 0 <= MIN < MAX, got ", o.id_min, ",", o.id_max));
  const auto make_client = [&o] {
    auto cli = std::make_unique<httplib::Client>(o.url);
    if (!cli->is_valid()) throw Error(Cat("--http ", o.url, " is not a http://host:port URL"));
    const auto timeout = std::chrono::duration<double>(o.timeout_s);
    cli->set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
    cli->set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
    cli->set_connection_timeout(std::chrono::seconds(10));
    return cli;
  };

  // Warm-up: page faults, thread pools; its own ids (seed + a large offset), never measured.
  for (int i = 0; i < o.warmup; ++i) {
    HttpLoadOptions w = o;
    w.seed = o.seed + 0x5eed0000ull + i;
    w.prompt_len = std::min(o.prompt_len, 8);
    auto cli = make_client();
    const HttpRequestTiming t =
        SendCompletion(*cli, CompletionBody(HttpLoadPrompt(w, 0), 4), HttpClock::now());
    if (!t.error.empty()) throw Error(Cat("bench serve --http ", o.url, ": warm-up: ", t.error));
  }

  std::vector<std::unique_ptr<httplib::Client>> clients;
  std::vector<nlohmann::json> bodies;
  for (int i = 0; i < o.clients; ++i) {
    clients.push_back(make_client());
    bodies.push_back(CompletionBody(HttpLoadPrompt(o, i), o.gen_len));
  }
  HttpLoadResult r;
  r.requests.resize(o.clients);
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  HttpClock::time_point t0;
  std::vector<std::thread> threads;
  for (int i = 0; i < o.clients; ++i)
    threads.emplace_back([&, i] {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return go; });
      }
      r.requests[i] = SendCompletion(*clients[i], bodies[i], t0);
    });
  {
    std::lock_guard<std::mutex> lock(mu);
    t0 = HttpClock::now();
    go = true;
  }
  cv.notify_all();
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < r.requests.size(); ++i) {
    const HttpRequestTiming& t = r.requests[i];
    if (!t.error.empty())
      throw Error(Cat("bench serve --http ", o.url, ": client ", i, ": ", t.error));
    r.generated += t.tokens;
    r.wall_s = std::max(r.wall_s, t.end);
  }
  return r;
}

nlohmann::json HttpLoadResult::Json(const HttpLoadOptions& o) const {
  std::vector<double> ttft, rate;
  nlohmann::json per = nlohmann::json::array();
  for (const HttpRequestTiming& t : requests) {
    ttft.push_back(t.first_token - t.sent);
    rate.push_back(t.TokensPerS());
    per.push_back({{"ttft_ms", 1e3 * (t.first_token - t.sent)},
                   {"tokens", t.tokens},
                   {"end_s", t.end},
                   {"tokens_per_s", t.TokensPerS()}});
  }
  return {{"url", o.url},
          {"clients", o.clients},
          {"prompt_len", o.prompt_len},
          {"gen_len", o.gen_len},
          {"seed", o.seed},
          {"wall_s", wall_s},
          {"generated_tokens", generated},
          {"aggregate_tokens_per_s", AggregateTokensPerS()},
          {"ttft_ms", {{"p50", 1e3 * Percentile(ttft, 0.5)}, {"p90", 1e3 * Percentile(ttft, 0.9)}}},
          {"client_tokens_per_s",
           {{"p50", Percentile(rate, 0.5)},
            {"min", *std::min_element(rate.begin(), rate.end())},
            {"max", *std::max_element(rate.begin(), rate.end())}}},
          {"requests", per},
          {"client0_prompt_ids", HttpLoadPrompt(o, 0)}};
}

void PrintHttpLoad(const HttpLoadOptions& o, const HttpLoadResult& r) {
  const nlohmann::json j = r.Json(o);
  std::printf(
      "bench serve --http %s: %d clients x (%d prompt ids + %d new tokens), greedy, EOS "
      "ignored, seed %llu\n",
      o.url.c_str(), o.clients, o.prompt_len, o.gen_len, static_cast<unsigned long long>(o.seed));
  std::printf("  aggregate            %.1f tokens/s generated (%lld tokens in %.2f s)\n",
              r.AggregateTokensPerS(), static_cast<long long>(r.generated), r.wall_s);
  std::printf("  time to first token  p50 %8.1f ms   p90 %8.1f ms\n",
              j["ttft_ms"]["p50"].get<double>(), j["ttft_ms"]["p90"].get<double>());
  std::printf(
      "  per client           p50 %.1f tokens/s (min %.1f, max %.1f; after its first token)\n",
      j["client_tokens_per_s"]["p50"].get<double>(), j["client_tokens_per_s"]["min"].get<double>(),
      j["client_tokens_per_s"]["max"].get<double>());
  for (size_t i = 0; i < r.requests.size(); ++i) {
    const HttpRequestTiming& t = r.requests[i];
    std::printf("    client %2zu: TTFT %8.1f ms, %lld tokens, %.1f tokens/s, done at %.2f s\n", i,
                1e3 * (t.first_token - t.sent), static_cast<long long>(t.tokens), t.TokensPerS(),
                t.end);
  }
  std::fflush(stdout);
  if (!o.json.empty()) WriteJsonOutput(o.json, j.dump(2));
}

}  // namespace wc
