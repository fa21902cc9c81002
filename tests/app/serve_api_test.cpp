// `wormchat serve`'s HTTP API in process (app/serve/api_server.h): a real HTTP client
// (cpp-httplib's) against the server over the default model. The texts are compared with the
// serving loop's own result for the request `generate` would build, so what goes over HTTP is
// exactly what the command line gives.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/serve/api_server.h"
#include "model/chat/chat_format.h"
#include "serving/sampler.h"
#include "tests/app/serve_test_server.h"
#include "tests/serving/serving_loop_util.h"

namespace wc {
namespace {

using nlohmann::json;
using test::M;

// The test server (4 rows of 256 tokens unless told), with 16 HTTP workers.
class TestServer : public test::ApiTestServer {
 public:
  explicit TestServer(ApiServerOptions o = {}, int ctx = 256, int rows = 4)
      : ApiTestServer(WithWorkers(std::move(o)), ctx, rows) {}
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(120, 0);
    return c;
  }

 private:
  static ApiServerOptions WithWorkers(ApiServerOptions o) {
    o.max_connections = 16;
    return o;
  }
};

// Submits straight to the loop a request that ignores EOS (seconds of decoding: the test cancels
// it), so a row stays busy; its id.
RequestId OccupyARow(ServingLoop& loop, std::shared_ptr<WaitingObserver> observer) {
  test::RequestSpec busy;
  busy.prompt = test::TextPrompt(10);
  busy.sampling = test::Greedy();
  busy.max_new_tokens = 2000;
  busy.stop_at_eos = false;
  return loop.Submit(test::MakeRequest(busy, std::move(observer)));
}

json ChatBody(const std::string& text, int max_tokens, uint64_t seed) {
  return {{"model", "default-model"},
          {"messages", json::array({{{"role", "user"}, {"content", text}}})},
          {"max_tokens", max_tokens},
          {"seed", seed}};
}

// The text of the serving loop's run of what `generate --prompt TEXT -n N --seed S
// --temperature 1 --top-k 0 --top-p 1` submits (serve's defaults for absent fields).
std::string GenerateText(ServingLoop& loop, const std::string& text, int max_tokens,
                         uint64_t seed) {
  test::RequestSpec s;
  s.prompt =
      EncodePrompt(*M().tokenizer, M().chat_format, text, /*raw=*/false, M().config().bos_token_id);
  s.chat = true;
  s.sampling.temperature = 1.0f;
  s.sampling.top_k = 0;
  s.sampling.top_p = 1.0f;
  s.seed = seed;
  s.max_new_tokens = max_tokens;
  return test::Await(*test::Submit(loop, s)).result.text;
}

// The events of a server-sent-event body: each "data: " payload (comments skipped).
std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
    pos = end + 2;
  }
  return out;
}

TEST(ServeApi, HealthModelsAndMetrics) {
  TestServer s;
  httplib::Client c = s.Client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  const json models = json::parse(m->body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "default-model");
  // The two answers above are counted once their responses are written (just after the client
  // has them).
  ASSERT_TRUE(test::WaitUntil([&] {
    auto r = c.Get("/metrics");
    return r && r->body.find("wormchat_requests_total{status=\"200\"} 2") != std::string::npos;
  }));
  auto r = c.Get("/metrics");
  ASSERT_TRUE(r);
  for (const char* series :
       {"# TYPE wormchat_requests_total counter", "wormchat_rows_busy 0", "wormchat_queue_length 0",
        "wormchat_kv_blocks_used 0", "wormchat_time_to_first_token_seconds_count 0",
        "wormchat_tokens_total{kind=\"cached\"} 0"})
    EXPECT_NE(r->body.find(series), std::string::npos) << series << "\n" << r->body;
}

// The nice value of each thread of this process (/proc/self/task/*/stat's 19th field).
std::vector<int> ThreadNiceValues() {
  std::vector<int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream f(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 19 && rest >> field; ++i)
      if (i == 19) out.push_back(std::stoi(field));
  }
  return out;
}

TEST(ServeApi, ConnectionThreadsRunBelowTheComputeThreads) {
  // A connection thread lowers itself to nice +10 before its first request (the compute threads
  // keep the process's), so its wakes once a token do not preempt them mid-region.
  const int base = getpriority(PRIO_PROCESS, 0);
  TestServer server;
  httplib::Client c = server.Client();
  const auto res = c.Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const int lowered = std::min(19, base + 10);
  int at_base = 0, below = 0;
  for (int n : ThreadNiceValues()) {
    EXPECT_TRUE(n == base || n == lowered) << n;
    at_base += n == base ? 1 : 0;
    below += n == lowered ? 1 : 0;
  }
  EXPECT_GE(below, 1);                            // the connection's thread
  EXPECT_GE(at_base, 2);                          // this thread, the serving loop's
  EXPECT_EQ(getpriority(PRIO_PROCESS, 0), base);  // this (the main) thread is untouched
}

TEST(ServeApi, ChatTextEqualsTheCommandLinesStreamedOrNot) {
  TestServer s;
  httplib::Client c = s.Client();
  const std::string want = GenerateText(s.loop(), "What is a mesh of chips?", 24, 7);
  auto whole = c.Post("/v1/chat/completions", ChatBody("What is a mesh of chips?", 24, 7).dump(),
                      "application/json");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json j = json::parse(whole->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], want);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  const std::string finish = j["choices"][0]["finish_reason"];
  EXPECT_TRUE(finish == "stop" || finish == "length") << finish;
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(j["usage"]["total_tokens"].get<int>(),
            j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
  EXPECT_TRUE(j["usage"]["prompt_tokens_details"].contains("cached_tokens"));

  json body = ChatBody("What is a mesh of chips?", 24, 7);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto streamed = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200);
  EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<std::string> events = SseData(streamed->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text, id;
  int finishes = 0;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    if (id.empty()) id = e["id"];
    EXPECT_EQ(e["id"], id) << "one id for every chunk";
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    if (i + 2 == events.size()) {  // the usage chunk
      EXPECT_TRUE(e["choices"].empty());
      EXPECT_EQ(e["usage"], j["usage"]);
      continue;
    }
    EXPECT_TRUE(e["usage"].is_null());
    const json& choice = e["choices"][0];
    if (i == 0) {
      EXPECT_EQ(choice["delta"]["role"], "assistant");
    }
    if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) {
      ++finishes;
      EXPECT_EQ(choice["finish_reason"], finish);
    }
  }
  EXPECT_EQ(finishes, 1);
  EXPECT_EQ(text, want);
}

TEST(ServeApi, NChoicesAreSeededPerChoiceAndRepeat) {
  TestServer s;
  httplib::Client c = s.Client();
  json body = ChatBody("Name a colour.", 12, 21);
  body["n"] = 3;
  auto a = c.Post("/v1/chat/completions", body.dump(), "application/json");
  auto b = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->status, 200) << a->body;
  const json ja = json::parse(a->body), jb = json::parse(b->body);
  ASSERT_EQ(ja["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ja["choices"][i]["index"], i);
    EXPECT_EQ(ja["choices"][i]["message"]["content"], jb["choices"][i]["message"]["content"]);
    EXPECT_EQ(ja["choices"][i]["message"]["content"],
              GenerateText(s.loop(), "Name a colour.", 12, ChoiceSeed(21, i)))
        << "choice " << i;
  }
  EXPECT_NE(ChoiceSeed(21, 1), 21u);
}

TEST(ServeApi, CompletionsTakeTextOrTokenIds) {
  TestServer s;
  httplib::Client c = s.Client();
  const std::vector<int> ids = test::TextPrompt(10);
  const json body = {{"prompt", ids}, {"max_tokens", 8}, {"temperature", 0}};
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  test::RequestSpec spec;
  spec.prompt = ids;
  spec.sampling = test::Greedy();
  spec.max_new_tokens = 8;
  EXPECT_EQ(j["choices"][0]["text"], test::Await(*test::Submit(s.loop(), spec)).result.text);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 10);
  auto t = c.Post("/v1/completions", json({{"prompt", "Once upon"}, {"max_tokens", 4}}).dump(),
                  "application/json");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 200) << t->body;
}

// The status, and the OpenAI error object's param, of a request.
std::pair<int, json> Error(httplib::Client& c, const std::string& path, const std::string& body,
                           const httplib::Headers& headers = {}) {
  auto r = c.Post(path.c_str(), headers, body, "application/json");
  EXPECT_TRUE(r);
  if (!r) return {0, json()};
  const json j = json::parse(r->body);
  EXPECT_TRUE(j.contains("error")) << r->body;
  EXPECT_TRUE(j["error"].contains("message") && j["error"].contains("type") &&
              j["error"].contains("param") && j["error"].contains("code"))
      << r->body;
  return {r->status, j["error"]};
}

TEST(ServeApi, BadRequestsGetAnOpenAIErrorNamingTheField) {
  TestServer s(ApiServerOptions{}, /*ctx=*/128);
  httplib::Client c = s.Client();
  auto [st1, e1] = Error(c, "/v1/chat/completions", "{\"messages\": [");
  EXPECT_EQ(st1, 400);
  EXPECT_NE(e1["message"].get<std::string>().find("not valid JSON"), std::string::npos);
  auto [st2, e2] = Error(c, "/v1/chat/completions", "{\"max_tokens\": 3}");
  EXPECT_EQ(st2, 400);
  EXPECT_EQ(e2["param"], "messages");
  auto [st3, e3] = Error(c, "/v1/chat/completions", ChatBody("hi", 1000, 1).dump());
  EXPECT_EQ(st3, 400);
  EXPECT_EQ(e3["param"], "max_tokens");
  EXPECT_NE(e3["message"].get<std::string>().find("context of 128"), std::string::npos)
      << e3["message"];
  json bad_temp = ChatBody("hi", 4, 1);
  bad_temp["temperature"] = "hot";
  auto [st4, e4] = Error(c, "/v1/chat/completions", bad_temp.dump());
  EXPECT_EQ(st4, 400);
  EXPECT_EQ(e4["param"], "temperature");
  json parts = ChatBody("hi", 4, 1);
  parts["messages"][0]["content"] = json::array({{{"type", "image_url"}, {"image_url", "x"}}});
  auto [st5, e5] = Error(c, "/v1/chat/completions", parts.dump());
  EXPECT_EQ(st5, 400);
  EXPECT_EQ(e5["param"], "messages[0].content[0].type");
  auto [st6, e6] = Error(c, "/v1/nothing", "{}");
  EXPECT_EQ(st6, 404);
  EXPECT_EQ(e6["code"], "not_found");
  json many = ChatBody("hi", 4, 1);
  many["n"] = 9;
  auto [st7, e7] = Error(c, "/v1/chat/completions", many.dump());
  EXPECT_EQ(st7, 400);
  EXPECT_EQ(e7["param"], "n");
  // The server goes on.
  auto ok = c.Post("/v1/chat/completions", ChatBody("hi", 2, 1).dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(ServeApi, TextPartsAreJoinedAsOneMessage) {
  TestServer s;
  httplib::Client c = s.Client();
  json parts = ChatBody("", 10, 3);
  parts["messages"][0]["content"] = json::array(
      {{{"type", "text"}, {"text", "What is "}}, {{"type", "text"}, {"text", "a mesh?"}}});
  auto r = c.Post("/v1/chat/completions", parts.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"],
            GenerateText(s.loop(), "What is a mesh?", 10, 3));
}

TEST(ServeApi, TheKeyIsNeededEverywhereButHealth) {
  ApiServerOptions o;
  o.api_key = "s3cret";
  TestServer s(o);
  httplib::Client c = s.Client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto none = c.Get("/v1/models");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(json::parse(none->body)["error"]["type"], "authentication_error");
  auto [st, e] = Error(c, "/v1/chat/completions", ChatBody("hi", 2, 1).dump(),
                       {{"Authorization", "Bearer x"}});
  EXPECT_EQ(st, 401);
  EXPECT_EQ(e["message"], "the API key is wrong");
  auto ok = c.Post("/v1/chat/completions", {{"Authorization", "Bearer s3cret"}},
                   ChatBody("hi", 2, 1).dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_TRUE(KeysEqual("abc", "abc"));
  EXPECT_FALSE(KeysEqual("abc", "abd"));
  EXPECT_FALSE(KeysEqual("abc", "abcd"));
  EXPECT_FALSE(KeysEqual("", "a"));
}

TEST(ServeApi, LimitsAnswerInOneResponse) {
  ApiServerOptions o;
  o.max_body_bytes = 2048;
  o.max_queue = 0;  // nothing may wait for a row: a request is admitted only to a free row
  TestServer s(o, /*ctx=*/2048, /*rows=*/1);
  httplib::Client c = s.Client();
  json big = ChatBody(std::string(4000, 'a'), 2, 1);
  auto [st1, e1] = Error(c, "/v1/chat/completions", big.dump());
  EXPECT_EQ(st1, 413);
  EXPECT_EQ(e1["code"], "body_too_large");
  // A free row takes the request: the queue counts only what waits.
  auto ok = c.Post("/v1/chat/completions", ChatBody("hi", 2, 1).dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  // The row busy (a request ignoring EOS, cancelled at the end): the next would wait, 429.
  auto busy_observer = std::make_shared<WaitingObserver>();
  const RequestId busy_id = OccupyARow(s.loop(), busy_observer);
  ASSERT_TRUE(test::WaitUntil([&] { return s.loop().status().active_rows == 1; }));
  auto r = c.Post("/v1/chat/completions", ChatBody("hi", 2, 1).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "queue_full");
  s.loop().Cancel(busy_id);
  test::Await(*busy_observer);
}

TEST(ServeApi, AClientThatGoesAwayFreesItsRow) {
  TestServer s(ApiServerOptions{}, /*ctx=*/512);
  httplib::Client c = s.Client();
  json body = ChatBody("Tell me a long story.", 400, 5);
  body["stream"] = true;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  int chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    return ++chunks < 3;  // stop reading after a few: the client hangs up
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  c.send(req, res, err);
  EXPECT_GE(chunks, 3);
  // The row (or, if the chunks read were keep-alives before it had one, the queue's place) is
  // freed once the server notices (a keep-alive write fails): well within a second.
  EXPECT_TRUE(test::WaitUntil(
      [&] {
        const ServingStatus st = s.loop().status();
        return st.active_rows == 0 && st.queued == 0;
      },
      std::chrono::milliseconds(5000)));
  // It was cancelled, not finished by itself.
  EXPECT_TRUE(test::WaitUntil(
      [&] {
        auto m = s.Client().Get("/metrics");
        return m &&
               m->body.find("wormchat_choices_total{end=\"cancelled\"} 1") != std::string::npos;
      },
      std::chrono::milliseconds(5000)));
}

TEST(ServeApi, ConcurrentStreamsGiveTheTextsOfOneAtATime) {
  TestServer s;
  constexpr int kClients = 6;
  std::vector<std::string> want(kClients), got(kClients);
  for (int i = 0; i < kClients; ++i)
    want[i] = GenerateText(s.loop(), "Say something.", 16, 100 + i);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      httplib::Client c = s.Client();
      json body = ChatBody("Say something.", 16, 100 + i);
      body["stream"] = true;
      auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
      if (!r || r->status != 200) return;
      for (const std::string& e : SseData(r->body)) {
        if (e == "[DONE]") break;
        const json j = json::parse(e);
        if (j["choices"][0]["delta"].contains("content"))
          got[i] += j["choices"][0]["delta"]["content"].get<std::string>();
      }
    });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(got[i], want[i]) << "client " << i;
}

TEST(ServeApi, LogprobsAreTheSamplersOwnDistribution) {
  TestServer s;
  httplib::Client c = s.Client();
  json body = ChatBody("Pick a number.", 8, 4);
  body["temperature"] = 0.8;
  body["top_k"] = 10;
  body["logprobs"] = true;
  body["top_logprobs"] = 3;
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json content = json::parse(r->body)["choices"][0]["logprobs"]["content"];
  // The same request straight through the loop, its logits kept.
  test::RequestSpec spec;
  spec.prompt = EncodePrompt(*M().tokenizer, M().chat_format, "Pick a number.", false,
                             M().config().bos_token_id);
  spec.chat = true;
  spec.sampling = {0.8f, 10, 1.0f};
  spec.seed = 4;
  spec.max_new_tokens = 8;
  const test::Outcome want = test::Await(*test::Submit(s.loop(), spec));
  ASSERT_EQ(content.size(), want.result.tokens.size());
  Sampler sampler(spec.sampling, 0);
  SamplingDistribution d;
  for (size_t i = 0; i < content.size(); ++i) {
    const int token = want.result.tokens[i];
    sampler.Distribution(want.logits[i].data(), M().config().vocab_size, &d);
    EXPECT_EQ(content[i]["token"], std::string(M().tokenizer->TokenBytes(token)));
    EXPECT_EQ(content[i]["logprob"].get<double>(), std::log(d.Probability(token))) << i;
    ASSERT_EQ(content[i]["top_logprobs"].size(), 3u);
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(content[i]["top_logprobs"][k]["logprob"].get<double>(),
                std::log(d.weights[k] / d.total))
          << i << " " << k;
    EXPECT_LE(content[i]["logprob"].get<double>(), 0.0);
  }
  // Streamed: the chunks' entries, joined, are the same.
  body["stream"] = true;
  auto st = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(st);
  json joined = json::array();
  for (const std::string& e : SseData(st->body)) {
    if (e == "[DONE]") break;
    const json chunk = json::parse(e);
    const json& lp = chunk["choices"][0]["logprobs"];
    if (!lp.is_null())
      for (const json& entry : lp["content"]) joined.push_back(entry);
  }
  EXPECT_EQ(joined, content);
  // Completions name the alternatives' count in logprobs.
  auto comp = c.Post("/v1/completions",
                     json({{"prompt", "Once"}, {"max_tokens", 4}, {"logprobs", 2}}).dump(),
                     "application/json");
  ASSERT_TRUE(comp);
  ASSERT_EQ(comp->status, 200) << comp->body;
  const json legacy = json::parse(comp->body)["choices"][0]["logprobs"];
  EXPECT_EQ(legacy["tokens"].size(), legacy["token_logprobs"].size());
  EXPECT_EQ(legacy["text_offset"][0], 0);
  for (const json& top : legacy["top_logprobs"]) EXPECT_LE(top.size(), 2u);
  auto bad = c.Post(
      "/v1/chat/completions",
      json({{"messages", json::array({{{"role", "user"}, {"content", "x"}}})}, {"top_logprobs", 2}})
          .dump(),
      "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["param"], "top_logprobs");
}

TEST(ServeApi, AResentConversationReusesItsCachedBlocks) {
  TestServer s(ApiServerOptions{}, /*ctx=*/512);
  httplib::Client c = s.Client();
  std::string system;
  for (int i = 0; i < 16; ++i) system += "The mesh has many chips and each chip has many cores. ";
  json body = {{"messages", json::array({{{"role", "system"}, {"content", system}},
                                         {{"role", "user"}, {"content", "How many chips?"}}})},
               {"max_tokens", 8},
               {"seed", 2}};
  auto first = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200) << first->body;
  const json a = json::parse(first->body);
  EXPECT_EQ(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // The client resends the conversation with the reply and a new turn, as chat clients do.
  body["messages"].push_back(
      {{"role", "assistant"}, {"content", a["choices"][0]["message"]["content"]}});
  body["messages"].push_back({{"role", "user"}, {"content", "And cores?"}});
  auto second = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(second);
  ASSERT_EQ(second->status, 200) << second->body;
  const json b = json::parse(second->body);
  const int prompt = b["usage"]["prompt_tokens"],
            cached = b["usage"]["prompt_tokens_details"]["cached_tokens"];
  // Every whole 64-token block of the earlier prompt comes from the prefix cache.
  EXPECT_GE(cached, a["usage"]["prompt_tokens"].get<int>() / 64 * 64) << prompt;
  EXPECT_GT(cached, 0);
  EXPECT_LT(cached, prompt);
}

// A client on a plain socket of its own, for what cpp-httplib's client does not do: send a request
// a byte at a time, stall in the middle of a body, keep one connection across pauses, hang up
// while its request waits.
class RawClient {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RawClient(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    connected_at_ = Clock::now();
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  Clock::time_point connected_at() const { return connected_at_; }
  // False once the server has closed the connection.
  bool Send(const std::string& bytes) {
    return fd_ >= 0 && send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
                           static_cast<ssize_t>(bytes.size());
  }
  // Reads what arrives until `done(received())` holds, the server closes the connection, or
  // `timeout` passes; whether `done` held.
  bool ReadUntil(const std::function<bool(const std::string&)>& done,
                 std::chrono::milliseconds timeout) {
    const Clock::time_point end = Clock::now() + timeout;
    while (!done(received_) && !closed_) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
      if (left <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        closed_at_ = Clock::now();
      } else {
        received_.append(buf, static_cast<size_t>(n));
      }
    }
    return done(received_);
  }
  // Reads until the server closes the connection (at most `timeout`); whether it did.
  bool ReadUntilClosed(std::chrono::milliseconds timeout) {
    ReadUntil([](const std::string&) { return false; }, timeout);
    return closed_;
  }
  // Reads one whole response with a Content-Length body; it, taken from what was received.
  std::string TakeResponse(std::chrono::milliseconds timeout) {
    size_t end = std::string::npos;
    ReadUntil(
        [&](const std::string& r) {
          const size_t head = r.find("\r\n\r\n");
          const size_t cl = r.find("Content-Length: ");
          if (head == std::string::npos || cl == std::string::npos || cl > head) return false;
          end = head + 4 + std::stoul(r.substr(cl + 16));
          return r.size() >= end;
        },
        timeout);
    if (end == std::string::npos || received_.size() < end) return "";
    std::string response = received_.substr(0, end);
    received_.erase(0, end);
    return response;
  }
  const std::string& received() const { return received_; }
  bool closed() const { return closed_; }
  Clock::time_point closed_at() const { return closed_at_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
  bool connected_ = false, closed_ = false;
  Clock::time_point connected_at_, closed_at_;
  std::string received_;
};

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// The head of a POST of `body` to `path` (HTTP/1.1, so the connection stays open).
std::string PostHead(const std::string& path, size_t content_length) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(content_length) + "\r\n\r\n";
}

// The deadline's tests give 2 s; the bounds below are the point, so they are wide: never dropped
// before the deadline (the lower bound is exact, as the server's clock starts after the client's
// connect), and dropped within a few seconds after it even on a loaded machine.
constexpr int kDeadlineS = 2;
constexpr double kNotBeforeMs = kDeadlineS * 1000.0 - 50;  // poll's millisecond rounding
constexpr double kDroppedWithinMs = kDeadlineS * 1000.0 + 4000;

TEST(ServeApi, AClientSendingAByteASecondIsDroppedAtTheDeadlineDelayingNoOne) {
  ApiServerOptions o;
  o.request_timeout_s = kDeadlineS;  // each read may still wait 30 s: the deadline does this
  TestServer s(o);
  RawClient slow(s.port());
  ASSERT_TRUE(slow.connected());
  std::atomic<bool> slow_done{false};
  std::thread trickle([&] {
    const std::string body = ChatBody("hi", 2, 1).dump();
    const std::string request = PostHead("/v1/chat/completions", body.size()) + body;
    // Without a deadline it would trickle for minutes: it stops once the bound below is past.
    for (size_t i = 0; i < request.size() && !slow.closed() &&
                       MsSince(slow.connected_at()) < kDroppedWithinMs + 1000;
         ++i) {
      if (!slow.Send(request.substr(i, 1))) break;
      slow.ReadUntilClosed(std::chrono::milliseconds(1000));
    }
    slow_done = true;
  });
  // Another client meanwhile is answered at once, while the slow one still holds its worker.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto asked = std::chrono::steady_clock::now();
  httplib::Client c = s.Client();
  auto h = c.Get("/health");
  auto r = c.Post("/v1/chat/completions", ChatBody("hi", 2, 1).dump(), "application/json");
  const double answered_ms = MsSince(asked);
  const bool slow_still_connected = !slow_done;
  ASSERT_TRUE(h && r);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(slow_still_connected) << "the other client waited " << answered_ms << " ms";
  trickle.join();
  ASSERT_TRUE(slow.closed()) << "the slow client was never dropped";
  const double dropped_ms = Ms(slow.closed_at() - slow.connected_at());
  std::printf(
      "a byte a second: dropped after %.0f ms (deadline %d s); the other client answered "
      "in %.0f ms\n",
      dropped_ms, kDeadlineS, answered_ms);
  EXPECT_GE(dropped_ms, kNotBeforeMs);
  EXPECT_LT(dropped_ms, kDroppedWithinMs);
  EXPECT_EQ(slow.received(), "") << "its request line never arrived: no answer";
}

TEST(ServeApi, ABodyThatStallsIsAnswered408AtTheDeadline) {
  ApiServerOptions o;
  o.request_timeout_s = kDeadlineS;
  TestServer s(o);
  RawClient stalled(s.port());
  ASSERT_TRUE(stalled.connected());
  const std::string body = ChatBody("hi", 2, 1).dump();
  ASSERT_TRUE(stalled.Send(PostHead("/v1/chat/completions", body.size()) + body.substr(0, 10)));
  ASSERT_TRUE(stalled.ReadUntilClosed(std::chrono::milliseconds(30000)))
      << "still open: " << stalled.received();
  const double dropped_ms = Ms(stalled.closed_at() - stalled.connected_at());
  std::printf("a stalled body: dropped after %.0f ms (deadline %d s)\n", dropped_ms, kDeadlineS);
  EXPECT_GE(dropped_ms, kNotBeforeMs);
  EXPECT_LT(dropped_ms, kDroppedWithinMs);
  const std::string& answer = stalled.received();
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  const size_t head = answer.find("\r\n\r\n");
  ASSERT_NE(head, std::string::npos) << answer;
  const json e = json::parse(answer.substr(head + 4))["error"];
  EXPECT_EQ(e["code"], "request_timeout");
  EXPECT_NE(e["message"].get<std::string>().find("--request-timeout-s"), std::string::npos) << e;
  // The server goes on.
  auto h = s.Client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST(ServeApi, EachRequestOnAKeepAliveConnectionHasItsOwnDeadline) {
  ApiServerOptions o;
  o.request_timeout_s = kDeadlineS;
  TestServer s(o);
  RawClient c(s.port());
  ASSERT_TRUE(c.connected());
  // Three requests 1.2 s apart on one connection: 2.4 s in all, past one deadline, each well
  // inside its own (the deadline re-arms when a response has been written).
  const std::string get = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  for (int i = 0; i < 3; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    ASSERT_TRUE(c.Send(get)) << "request " << i;
    const std::string response = c.TakeResponse(std::chrono::milliseconds(10000));
    EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << "request " << i << ": " << response;
    ASSERT_FALSE(c.closed()) << "request " << i;
  }
  EXPECT_GT(MsSince(c.connected_at()), kDeadlineS * 1000.0);
}

// A request of `body` on a connection of its own, its response's head read (the server writes it
// before the request is given a row).
std::unique_ptr<RawClient> Started(int port, const std::string& path, const json& body) {
  auto c = std::make_unique<RawClient>(port);
  const std::string b = body.dump();
  EXPECT_TRUE(c->Send(PostHead(path, b.size()) + b));
  EXPECT_TRUE(
      c->ReadUntil([](const std::string& r) { return r.find("\r\n\r\n") != std::string::npos; },
                   std::chrono::milliseconds(30000)))
      << c->received();
  return c;
}

// An error answered before the body was read (a wrong key) ends the connection: the unread body
// is never read as a request, and the client is told not to reuse the connection (the openai
// npm client's shared keep-alive agent did, and got a reset).
TEST(ServeApi, AnErrorEndsItsConnectionSoAnUnreadBodyIsNeverARequest) {
  ApiServerOptions o;
  o.api_key = "right";
  TestServer s(o);
  const std::string body = ChatBody("GET /health HTTP/1.1", 2, 1).dump();
  RawClient c(s.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
      "wrong\r\nContent-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(c.ReadUntilClosed(std::chrono::milliseconds(10000))) << c.received();
  const std::string& got = c.received();
  EXPECT_EQ(got.rfind("HTTP/1.1 401", 0), 0u) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  size_t responses = 0;
  for (size_t at = 0; (at = got.find("HTTP/1.1 ", at)) != std::string::npos; ++at) ++responses;
  EXPECT_EQ(responses, 1u) << got;
}

TEST(ServeApi, AQueuedClientThatHangsUpLeavesTheQueueWithinASecond) {
  TestServer s(ApiServerOptions{}, /*ctx=*/2048, /*rows=*/1);
  // The one row is busy with a request that ignores EOS (seconds of decoding, cancelled at the
  // end): nothing queued is admitted meanwhile.
  auto busy_observer = std::make_shared<WaitingObserver>();
  const RequestId busy_id = OccupyARow(s.loop(), busy_observer);
  ASSERT_TRUE(test::WaitUntil([&] { return s.loop().status().active_rows == 1; }));
  for (const bool stream : {true, false}) {
    SCOPED_TRACE(stream ? "streamed" : "not streamed");
    json body = ChatBody("Wait for me.", 8, 1);
    body["stream"] = stream;
    auto queued = Started(s.port(), "/v1/chat/completions", body);
    ASSERT_TRUE(test::WaitUntil([&] { return s.loop().status().queued == 1; }));
    // Keep-alives arrive while it waits (nothing else can: it has no row).
    EXPECT_TRUE(
        queued->ReadUntil([](const std::string& r) { return r.size() > r.find("\r\n\r\n") + 4; },
                          std::chrono::milliseconds(10000)))
        << queued->received();
    queued->Close();
    const auto closed = std::chrono::steady_clock::now();
    ASSERT_TRUE(test::WaitUntil([&] { return s.loop().status().queued == 0; },
                                std::chrono::milliseconds(10000)));
    const double left_ms = MsSince(closed);
    std::printf("a queued client (%s) hung up: left the queue after %.0f ms\n",
                stream ? "streamed" : "not streamed", left_ms);
    EXPECT_LT(left_ms, 1000.0);
    EXPECT_EQ(busy_observer->WaitFor(std::chrono::milliseconds(0)), nullptr)
        << "the busy request ended: the queue emptied for another reason";
    auto m = s.Client().Get("/metrics");
    ASSERT_TRUE(m);
    EXPECT_NE(m->body.find("wormchat_queue_length 0"), std::string::npos) << m->body;
  }
  s.loop().Cancel(busy_id);
}

TEST(ServeApi, ARunningClientThatHangsUpFreesItsRowAtOnce) {
  ApiServerOptions o;
  // The default model ends most replies within a few dozen tokens: these run to max_tokens, so
  // that they are still running when their clients hang up.
  o.decorate = [](Request* r) { r->stop_at_eos = false; };
  TestServer s(o, /*ctx=*/512, /*rows=*/1);
  int cancelled = 0;
  for (const bool stream : {true, false}) {
    SCOPED_TRACE(stream ? "streamed" : "not streamed");
    json body = ChatBody("Tell me a long story.", 400, 5);
    body["stream"] = stream;
    auto running = Started(s.port(), "/v1/chat/completions", body);
    // Running: streamed, a token's chunk arrived; else a keep-alive after it took its row.
    ASSERT_TRUE(test::WaitUntil([&] { return s.loop().status().active_rows == 1; }));
    EXPECT_TRUE(running->ReadUntil(
        [&](const std::string& r) {
          return stream ? r.find("\"content\"") != std::string::npos
                        : r.size() > r.find("\r\n\r\n") + 4;
        },
        std::chrono::milliseconds(30000)));
    running->Close();
    const auto closed = std::chrono::steady_clock::now();
    ASSERT_TRUE(test::WaitUntil([&] { return s.loop().status().active_rows == 0; },
                                std::chrono::milliseconds(10000)));
    const double freed_ms = MsSince(closed);
    // The target is 100 ms (a keep-alive every 40 ms, then the loop's next step); the
    // bound asserted is wide for a loaded machine, the figure printed.
    std::printf("a running client (%s) hung up: its row was free after %.0f ms\n",
                stream ? "streamed" : "not streamed", freed_ms);
    EXPECT_LT(freed_ms, 1000.0);
    // It was cancelled, not finished by itself.
    ++cancelled;
    EXPECT_TRUE(test::WaitUntil(
        [&] {
          auto m = s.Client().Get("/metrics");
          const std::string series =
              "wormchat_choices_total{end=\"cancelled\"} " + std::to_string(cancelled);
          return m && m->body.find(series) != std::string::npos;
        },
        std::chrono::milliseconds(5000)));
  }
}

}  // namespace
}  // namespace wc
