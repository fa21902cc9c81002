// `wormchat serve` under load (issue 53's targets), in process: a real ApiServer over the default
// model and real HTTP clients (cpp-httplib's), one thread per client.
//   - 64 concurrent streaming clients, 3-turn conversations: the texts equal those of the same
//     192 requests run one at a time (determinism whatever the batch mix), later turns take
//     cached blocks.
//   - 256 concurrent clients against 32 rows and a queue of 64: each request completes (its text
//     the loop's own for it) or is refused (429/503 with Retry-After); none hangs; the rows and
//     the queue are empty afterwards.
//   - 16 of 32 running streams killed mid-stream: their rows free at once (target 100 ms).
// The figures are printed; the bounds asserted are wide, so a machine shared with other work
// does not fail them (the targets themselves are the printed figures).
#include <httplib.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/serve/api_server.h"
#include "model/chat/chat_format.h"
#include "tests/app/serve_test_server.h"
#include "tests/serving/serving_loop_util.h"

namespace wc {
namespace {

using nlohmann::json;
using test::M;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The test server with the load tests' client (reads wait up to 150 s) and /metrics' gauges.
class LoadServer : public test::ApiTestServer {
 public:
  LoadServer(ApiServerOptions o, int ctx, int rows) : ApiTestServer(std::move(o), ctx, rows) {}
  std::unique_ptr<httplib::Client> Client() const { return NewClient(150); }
  // A gauge's value in /metrics (-1 when the request or the series is missing).
  long Gauge(const std::string& name) const {
    auto r = Client()->Get("/metrics");
    if (!r || r->status != 200) return -1;
    const std::string key = "\n" + name + " ";
    const size_t at = r->body.find(key);
    if (at == std::string::npos) return -1;
    return std::stol(r->body.substr(at + key.size()));
  }
  std::string Metrics() const {
    auto r = Client()->Get("/metrics");
    return r ? r->body : "";
  }
};

// What one HTTP exchange gave.
struct Exchange {
  httplib::Error error = httplib::Error::Success;
  int status = 0;
  std::string retry_after;
  std::string text;    // choice 0's text (deltas joined when streamed)
  std::string finish;  // choice 0's finish_reason
  json usage;
  bool done = false;  // streamed: "data: [DONE]" arrived; else the JSON object parsed
  std::string body;   // what arrived, for failure messages (a stream's events are consumed)
  double ms = 0;
  bool timed_out = false;  // our own deadline cut it
};

// POSTs `body` to /v1/chat/completions, streaming through a content receiver. `on_chunk` (may be
// null) is called after each content delta; the exchange is cut (a hung request) after
// `deadline_ms`, or when `stop` becomes true.
Exchange Chat(httplib::Client& c, const json& body, double deadline_ms,
              const std::function<void()>& on_chunk = nullptr,
              const std::atomic<bool>* stop = nullptr) {
  Exchange x;
  const bool stream = body.value("stream", false);
  const Clock::time_point start = Clock::now();
  std::string pending;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (MsSince(start) > deadline_ms) {
      x.timed_out = true;
      return false;
    }
    if (stop && *stop) return false;
    if (!stream || x.status != 200) {
      x.body.append(data, n);
      return true;
    }
    pending.append(data, n);
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;  // a keep-alive comment
      const std::string data_text = event.substr(6);
      if (data_text == "[DONE]") {
        x.done = true;
        continue;
      }
      const json e = json::parse(data_text, nullptr, false);
      if (e.is_discarded()) {
        x.body += "bad event: " + data_text + "\n";
        return false;
      }
      if (e.contains("usage") && !e["usage"].is_null()) x.usage = e["usage"];
      if (e["choices"].empty()) continue;
      const json& ch = e["choices"][0];
      if (ch["delta"].contains("content")) {
        x.text += ch["delta"]["content"].get<std::string>();
        if (on_chunk) on_chunk();
      }
      if (!ch["finish_reason"].is_null()) x.finish = ch["finish_reason"];
    }
    return true;
  };
  httplib::Response res;
  // The status and headers arrive before the body: the receiver above sees them.
  req.response_handler = [&](const httplib::Response& r) {
    x.status = r.status;
    x.retry_after = r.get_header_value("Retry-After");
    return true;
  };
  c.send(req, res, x.error);
  x.ms = MsSince(start);
  if (x.status == 0) x.status = res.status;
  if (!stream && x.status == 200 && x.error == httplib::Error::Success) {
    const json j = json::parse(x.body, nullptr, false);  // keep-alive whitespace is allowed
    if (!j.is_discarded() && j.contains("choices")) {
      x.done = true;
      x.text = j["choices"][0]["message"]["content"];
      x.finish = j["choices"][0]["finish_reason"];
      x.usage = j["usage"];
    }
  }
  return x;
}

std::string Describe(const Exchange& x) {
  return "status " + std::to_string(x.status) + ", error " + httplib::to_string(x.error) +
         ", Retry-After '" + x.retry_after + "', " + std::to_string(static_cast<int>(x.ms)) +
         " ms" + (x.timed_out ? " (cut at the deadline)" : "") + ", done " +
         std::to_string(x.done) + ", body: " + x.body.substr(0, 300);
}

// Starts `n` threads running fn(i) at once (each waits until all have started); joins them.
void RunAtOnce(int n, const std::function<void(int)>& fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      ++ready;
      while (!go) std::this_thread::yield();
      fn(i);
    });
  while (ready < n) std::this_thread::yield();
  go = true;
  for (std::thread& t : threads) t.join();
}

constexpr double kDeadlineMs = 120000;  // no request may take longer

// --- 1. 64 streaming clients, 3 turns each, equal the same requests one at a time -------------

constexpr int kConversations = 64, kTurns = 3, kTurnTokens = 12;

// Each conversation's system message starts with its own number, so its first 64-token block is
// its own: blocks it finds cached come from its own earlier turns.
std::string SystemMessage(int i) {
  std::string s = "Conversation " + std::to_string(i) + ". ";
  for (int k = 0; k < 5; ++k) s += "The mesh has many chips and each chip has many cores. ";
  return s;
}

const char* const kQuestions[kTurns] = {"What is a chip?", "And a core?", "How many are there?"};

ApiServerOptions ConversationOptions() {
  ApiServerOptions o;
  o.max_connections = kConversations + 16;
  o.max_queue = 128;  // all 64 are admitted: 32 run, 32 wait
  return o;
}

TEST(ServeLoad, SixtyFourStreamingConversationsEqualTheSameRequestsOneAtATime) {
  const Clock::time_point t0 = Clock::now();
  // bodies[i][k]: conversation i's request of turn k, as sent (turn k resends the replies got).
  std::vector<std::vector<json>> bodies(kConversations, std::vector<json>(kTurns));
  std::vector<std::vector<Exchange>> got(kConversations, std::vector<Exchange>(kTurns));
  {
    LoadServer s(ConversationOptions(), /*ctx=*/512, /*rows=*/32);
    RunAtOnce(kConversations, [&](int i) {
      auto c = s.Client();  // one connection for the conversation, kept alive across turns
      json messages = json::array({{{"role", "system"}, {"content", SystemMessage(i)}}});
      for (int k = 0; k < kTurns; ++k) {
        messages.push_back({{"role", "user"}, {"content", kQuestions[k]}});
        json body = {{"model", "default-model"},
                     {"messages", messages},
                     {"max_tokens", kTurnTokens},
                     {"temperature", 0.9},
                     {"seed", 1000 + 10 * i + k},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
        bodies[i][k] = body;
        got[i][k] = Chat(*c, body, kDeadlineMs);
        if (got[i][k].status != 200 || !got[i][k].done) return;  // reported below
        messages.push_back({{"role", "assistant"}, {"content", got[i][k].text}});
      }
    });
    EXPECT_TRUE(test::WaitUntil([&] {
      return s.Gauge("wormchat_rows_busy") == 0 && s.Gauge("wormchat_queue_length") == 0;
    }));
  }
  const double concurrent_ms = MsSince(t0);
  int cached_later = 0, later = 0;
  std::set<std::string> distinct;
  for (int i = 0; i < kConversations; ++i)
    for (int k = 0; k < kTurns; ++k) {
      const Exchange& x = got[i][k];
      EXPECT_TRUE(x.status == 200 && x.done && !x.finish.empty())
          << "conversation " << i << " turn " << k << ": " << Describe(x);
      if (!x.usage.is_object()) {
        ADD_FAILURE() << "conversation " << i << " turn " << k << ": no usage";
        continue;
      }
      const int cached = x.usage["prompt_tokens_details"]["cached_tokens"];
      if (k == 0) {
        EXPECT_EQ(cached, 0) << "conversation " << i << ": its first block is its own";
      } else {
        ++later;
        if (cached > 0) ++cached_later;
        EXPECT_LT(cached, x.usage["prompt_tokens"].get<int>());
      }
      distinct.insert(x.text);
    }
  // Sampled (temperature 0.9, a seed each): the texts depend on the seed.
  EXPECT_GT(distinct.size(), static_cast<size_t>(kConversations)) << "the seeds made no difference";
  EXPECT_GT(cached_later, 0) << "no later turn took a cached block";
  if (HasFailure()) return;

  // The same 192 requests one at a time, on a fresh server: equal texts.
  const Clock::time_point t1 = Clock::now();
  int equal = 0;
  {
    LoadServer s(ConversationOptions(), /*ctx=*/512, /*rows=*/32);
    auto c = s.Client();
    for (int i = 0; i < kConversations; ++i)
      for (int k = 0; k < kTurns; ++k) {
        const Exchange x = Chat(*c, bodies[i][k], kDeadlineMs);
        ASSERT_TRUE(x.status == 200 && x.done)
            << "alone: conversation " << i << " turn " << k << ": " << Describe(x);
        EXPECT_EQ(x.text, got[i][k].text) << "conversation " << i << " turn " << k;
        EXPECT_EQ(x.finish, got[i][k].finish) << "conversation " << i << " turn " << k;
        EXPECT_EQ(x.usage["completion_tokens"], got[i][k].usage["completion_tokens"]);
        equal += x.text == got[i][k].text;
      }
  }
  std::printf(
      "64 conversations x 3 turns: concurrent %.0f ms, one at a time %.0f ms; %d/%d texts equal "
      "(%zu distinct); later turns with cached blocks: %d/%d\n",
      concurrent_ms, MsSince(t1), equal, kConversations * kTurns, distinct.size(), cached_later,
      later);
}

// --- 2. 256 clients against 32 rows and a queue of 64 ------------------------------------------

TEST(ServeLoad, TwoHundredFiftySixClientsCompleteOrAreToldToRetry) {
  constexpr int kClients = 256, kRows = 32, kQueue = 64, kTokens = 24;
  ApiServerOptions o;
  o.max_queue = kQueue;
  o.max_connections = kClients + 32;  // a worker for every client: refusals are the queue's
  LoadServer s(o, /*ctx=*/256, kRows);
  const Clock::time_point t0 = Clock::now();
  // The most requests seen waiting, and rows seen busy, while the clients run.
  std::atomic<bool> watching{true};
  int max_queued = 0, max_rows = 0;
  std::thread watcher([&] {
    while (watching) {
      const ServingStatus st = s.loop().status();
      // Waiting for a row: submitted, less the rows free for them (the server's measure).
      const int free_rows = std::max(0, st.user_rows - st.active_rows - st.session_rows);
      max_queued = std::max(max_queued, st.queued - free_rows);
      max_rows = std::max(max_rows, st.active_rows);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a sampling period
    }
  });
  std::vector<Exchange> got(kClients);
  auto question = [](int i) { return "Question " + std::to_string(i) + ": what is a mesh?"; };
  RunAtOnce(kClients, [&](int i) {
    auto c = s.Client();
    const json body = {{"model", "default-model"},
                       {"messages", json::array({{{"role", "user"}, {"content", question(i)}}})},
                       {"max_tokens", kTokens},
                       {"seed", 5000 + i},
                       {"stream", i % 2 == 0}};
    got[i] = Chat(*c, body, kDeadlineMs);
  });
  const double all_ms = MsSince(t0);
  // Afterwards /metrics shows no busy row and an empty queue within a second.
  const Clock::time_point after = Clock::now();
  const bool idle = test::WaitUntil(
      [&] { return s.Gauge("wormchat_rows_busy") == 0 && s.Gauge("wormchat_queue_length") == 0; },
      std::chrono::milliseconds(1000));
  const double idle_ms = MsSince(after);
  watching = false;
  watcher.join();
  EXPECT_TRUE(idle) << s.Metrics();

  int completed = 0, refused429 = 0, refused503 = 0, slowest = 0;
  std::vector<int> done;
  for (int i = 0; i < kClients; ++i) {
    const Exchange& x = got[i];
    if (x.ms > got[slowest].ms) slowest = i;
    EXPECT_FALSE(x.timed_out) << "client " << i << " hung: " << Describe(x);
    EXPECT_LT(x.ms, kDeadlineMs) << "client " << i;
    if (x.status == 200 && x.error == httplib::Error::Success && x.done && !x.finish.empty()) {
      ++completed;
      done.push_back(i);
    } else if ((x.status == 429 || x.status == 503) && !x.retry_after.empty()) {
      ++(x.status == 429 ? refused429 : refused503);
      const json e = json::parse(x.body, nullptr, false);
      EXPECT_TRUE(!e.is_discarded() && e.contains("error")) << "client " << i << ": " << x.body;
    } else {
      ADD_FAILURE() << "client " << i << " neither completed nor was refused: " << Describe(x);
    }
  }
  // Both happened: the queue filled and the rows drained it.
  EXPECT_GT(completed, 0);
  EXPECT_GT(refused429 + refused503, 0) << "the queue never filled: the test did not load it";
  EXPECT_LE(max_rows, kRows);
  // The queue held: never more waiting for a row than --max-queue (the server admits against
  // the loop's count under one lock, and the loop counts a request queued until it has a row).
  EXPECT_LE(max_queued, kQueue);
  // Each completed text is the loop's own for its request (the requests straight through the
  // loop, all at once: determinism whatever the batch).
  std::vector<std::pair<int, std::shared_ptr<WaitingObserver>>> refs;
  for (int i : done) {
    test::RequestSpec r;
    r.prompt = EncodePrompt(*M().tokenizer, M().chat_format, question(i), /*raw=*/false,
                            M().config().bos_token_id);
    r.chat = true;
    r.sampling.temperature = 1.0f;  // serve's defaults for absent fields
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.seed = 5000 + i;
    r.max_new_tokens = kTokens;
    refs.emplace_back(i, test::Submit(s.loop(), r));
  }
  int equal = 0;
  for (auto& [i, obs] : refs) {
    const std::string want = test::Await(*obs).result.text;
    EXPECT_EQ(got[i].text, want) << "client " << i << (i % 2 == 0 ? " (streamed)" : "");
    equal += got[i].text == want;
  }
  std::printf(
      "256 clients, 32 rows, queue 64: %d completed (%d texts equal the loop's), %d refused 429, "
      "%d refused 503, in %.0f ms; slowest client %.0f ms (status %d); idle %.0f ms after; most "
      "seen waiting %d (--max-queue %d), busy rows %d\n",
      completed, equal, refused429, refused503, all_ms, got[slowest].ms, got[slowest].status,
      idle_ms, max_queued, kQueue, max_rows);
}

// --- 3. 16 of 32 running streams killed
// -----------------------------------------------------------

TEST(ServeLoad, SixteenStreamsKilledMidStreamFreeTheirRowsAtOnce) {
  constexpr int kClients = 32, kKilled = 16;
  ApiServerOptions o;
  o.max_connections = kClients + 16;
  // The default model ends most replies within a few dozen tokens: these run to max_tokens, so
  // they are all still running when their clients go.
  o.decorate = [](Request* r) { r->stop_at_eos = false; };
  LoadServer s(o, /*ctx=*/512, /*rows=*/kClients);
  std::vector<std::unique_ptr<httplib::Client>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(s.Client());
  std::vector<std::atomic<int>> chunks(kClients);
  std::vector<Exchange> got(kClients);
  std::atomic<bool> stop_all{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      const json body = {
          {"model", "default-model"},
          {"messages",
           json::array({{{"role", "user"},
                         {"content", "Tell me a long story, " + std::to_string(i) + "."}}})},
          {"max_tokens", 440},
          {"seed", 300 + i},
          {"stream", true}};
      got[i] = Chat(
          *clients[i], body, kDeadlineMs, [&] { ++chunks[i]; }, &stop_all);
    });
  // All 32 stream: each has a row and has had a token.
  const bool streaming = test::WaitUntil([&] {
    if (s.loop().status().active_rows != kClients) return false;
    for (auto& n : chunks)
      if (n == 0) return false;
    return true;
  });
  if (!streaming) {
    ADD_FAILURE() << "not all streaming: active rows " << s.loop().status().active_rows;
    stop_all = true;
    for (auto& c : clients) c->stop();
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < kClients; ++i) std::printf("client %d: %s\n", i, Describe(got[i]).c_str());
    return;
  }
  // Kill 16 abruptly: their sockets shut down under the reading threads.
  const Clock::time_point killed = Clock::now();
  for (int i = 0; i < kKilled; ++i) clients[i]->stop();
  const bool freed =
      test::WaitUntil([&] { return s.loop().status().active_rows <= kClients - kKilled; },
                      std::chrono::milliseconds(10000));
  const double freed_ms = MsSince(killed);
  const ServingStatus after = s.loop().status();
  EXPECT_TRUE(freed) << "active rows " << after.active_rows;
  // Only the killed ones ended: the other 16 still run.
  EXPECT_EQ(after.active_rows, kClients - kKilled);
  EXPECT_EQ(s.Gauge("wormchat_rows_busy"), kClients - kKilled);
  for (int i = kKilled; i < kClients; ++i) {
    const int before = chunks[i];
    EXPECT_TRUE(
        test::WaitUntil([&] { return chunks[i] > before; }, std::chrono::milliseconds(10000)))
        << "client " << i << " stopped streaming";
  }
  // They were cancelled, not finished by themselves.
  const bool cancelled = test::WaitUntil(
      [&] {
        return s.Metrics().find("wormchat_choices_total{end=\"cancelled\"} " +
                                std::to_string(kKilled)) != std::string::npos;
      },
      std::chrono::milliseconds(5000));
  EXPECT_TRUE(cancelled) << s.Metrics();
  // The rest go the same way.
  stop_all = true;
  for (int i = kKilled; i < kClients; ++i) clients[i]->stop();
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(test::WaitUntil([&] { return s.Gauge("wormchat_rows_busy") == 0; },
                              std::chrono::milliseconds(5000)));
  for (int i = 0; i < kClients; ++i) {
    EXPECT_FALSE(got[i].done) << "client " << i << " finished before it was killed";
    EXPECT_FALSE(got[i].timed_out) << "client " << i;
  }
  std::printf("16 of 32 streams killed: their rows were free after %.1f ms (target 100 ms: %s)\n",
              freed_ms, freed_ms <= 100 ? "met" : "missed");
  EXPECT_LT(freed_ms, 1000.0);
}

}  // namespace
}  // namespace wc
