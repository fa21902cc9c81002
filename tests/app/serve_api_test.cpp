// `wormchat serve`'s HTTP API in process (app/serve/api_server.h): a real HTTP client
// (cpp-httplib's) against the server over the default model. The texts are compared with the
// serving loop's own result for the request `generate` would build, so what goes over HTTP is
// exactly what the command line gives.
#include <httplib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/serve/api_server.h"
#include "model/chat/chat_format.h"
#include "serving/sampler.h"
#include "tests/serving/serving_loop_util.h"

namespace wc {
namespace {

using nlohmann::json;
using test::M;

// A server on a free port of 127.0.0.1 over its own loop (4 rows), serving until destroyed.
class TestServer {
 public:
  explicit TestServer(ApiServerOptions o = {}, int ctx = 256) {
    ServingOptions so = test::Rows(4);
    so.ctx = ctx;
    loop_ = std::make_unique<ServingLoop>(*M().model, M().tokenizer.get(), M().chat_format, so);
    ApiModel model;
    model.id = "default-model";
    model.framing = RequestFraming{M().tokenizer.get(),
                                   &M().chat_format,
                                   M().config().bos_token_id,
                                   M().config().eos_token_id,
                                   ctx,
                                   M().config().vocab_size,
                                   false};
    o.host = "127.0.0.1";
    o.port = 0;
    o.max_connections = 16;
    server_ = std::make_unique<ApiServer>(*loop_, model, o);
    port_ = server_->Bind();
    thread_ = std::thread([this] { server_->Listen(); });
  }
  // Cancels whatever still runs before waiting for the HTTP threads: a reply being written waits
  // for its choices to end.
  ~TestServer() {
    server_->Stop();
    loop_->Shutdown(ShutdownMode::kCancel);
    thread_.join();
  }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c;
  }
  ServingLoop& loop() { return *loop_; }
  int port() const { return port_; }

 private:
  std::unique_ptr<ServingLoop> loop_;
  std::unique_ptr<ApiServer> server_;
  std::thread thread_;
  int port_ = 0;
};

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
  o.max_queue = 0;  // every request would have to wait: 429
  TestServer s(o);
  httplib::Client c = s.Client();
  json big = ChatBody(std::string(4000, 'a'), 2, 1);
  auto [st1, e1] = Error(c, "/v1/chat/completions", big.dump());
  EXPECT_EQ(st1, 413);
  EXPECT_EQ(e1["code"], "body_too_large");
  auto r = c.Post("/v1/chat/completions", ChatBody("hi", 2, 1).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "queue_full");
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
  // The row is freed once the server notices (a keep-alive write fails): well within a second.
  EXPECT_TRUE(test::WaitUntil([&] { return s.loop().status().active_rows == 0; },
                              std::chrono::milliseconds(5000)));
  EXPECT_EQ(s.loop().status().queued, 0);
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

}  // namespace
}  // namespace wc
