// The chat's client of the OpenAI API (app/openai/chat_client.h): the server address, the
// streamed body's parser on any split, and whole replies against the real `wormchat serve` in
// process (the same text as a non-streamed reply, usage, the "wormchat" figures, Cancel, a wrong
// key, nobody listening) and against a small imitation of another server.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/openai/chat_client.h"
#include "app/serve/api_server.h"
#include "mesh/attention_meter.h"
#include "tests/app/serve_test_server.h"
#include "tests/serving/serving_loop_util.h"
#include "util/error.h"

namespace wc {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using Role = ChatMessage::Role;

// ---- ParseServerAddress ----

TEST(ChatClientAddress, TheBaseIsV1UnderThePathGiven) {
  const ServerAddress a = ParseServerAddress("http://127.0.0.1:8080");
  EXPECT_EQ(a.scheme_host_port, "http://127.0.0.1:8080");
  EXPECT_EQ(a.base_path, "/v1");
  EXPECT_EQ(a.url, "http://127.0.0.1:8080");
  EXPECT_EQ(ParseServerAddress("http://127.0.0.1:8080/").base_path, "/v1");
  // ollama's documented address: the path ends in /v1, so it is the base itself.
  const ServerAddress o = ParseServerAddress("http://localhost:11434/v1");
  EXPECT_EQ(o.scheme_host_port, "http://localhost:11434");
  EXPECT_EQ(o.base_path, "/v1");
  EXPECT_EQ(ParseServerAddress("http://localhost:11434/v1/").base_path, "/v1");
  // A prefix (a reverse proxy's), and the endpoint pasted whole.
  EXPECT_EQ(ParseServerAddress("https://example.com/llm").base_path, "/llm/v1");
  EXPECT_EQ(ParseServerAddress("https://example.com/llm/v1").base_path, "/llm/v1");
  EXPECT_EQ(ParseServerAddress("http://h:1/v1/chat/completions").base_path, "/v1");
  // No port: the scheme's (cpp-httplib's 80 or 443); the scheme in any case.
  const ServerAddress s = ParseServerAddress("HTTPS://api.example.com");
  EXPECT_EQ(s.scheme_host_port, "https://api.example.com");
  EXPECT_EQ(s.base_path, "/v1");
  EXPECT_EQ(ParseServerAddress("http://[::1]:8080").scheme_host_port, "http://[::1]:8080");
  EXPECT_EQ(ParseServerAddress("http://my-host.lan:65535").scheme_host_port,
            "http://my-host.lan:65535");
}

TEST(ChatClientAddress, BadURLsAreOneLineErrorsSayingWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty"},
      {"localhost:8080", "not an http:// or https:// URL"},
      {"ftp://host:21", "the scheme must be http or https, got 'ftp'"},
      {"http://", "no host"},
      {"http://:8080", "no host"},
      {"http:///v1", "no host"},
      {"http://host:0", "the port must be 1-65535, got '0'"},
      {"http://host:65536", "the port must be 1-65535"},
      {"http://host:80a", "the port must be 1-65535"},
      {"http://host:", "the port must be 1-65535"},
      {"http://host:8080?x=1", "no query or fragment"},
      {"http://host/v1#top", "no query or fragment"},
      {"http://user:pw@host", "--api-key"},
      {"http://ho st", "printable ASCII"},
      {"http://h\xc3\xa9te", "printable ASCII"},
      {"http://::1:8080", "IPv6 address goes in brackets"},
      {"http://[::1", "without its ']'"},
      {"http://[fe80::1]:80", "only IPv6 addresses of digits"},
      {"http://h*st", "is not a host name"},
  };
  for (const auto& [url, want] : cases) {
    SCOPED_TRACE(url);
    try {
      ParseServerAddress(url);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("--server: ", 0), 0u) << what;
      EXPECT_NE(what.find(want), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

// ---- SseChatParser ----

// What a parser made of a body, fed in the pieces given.
struct Parsed {
  std::string heard;  // on_text's deltas, joined
  int figures_calls = 0;
  ChatReply reply;
  bool done = false;
  bool feed_returned_false = false;
};

Parsed ParseInPieces(const std::vector<std::string_view>& pieces, bool finish = true) {
  Parsed p;
  SseChatParser parser([&](std::string_view d) { p.heard += d; },
                       [&](const ServerFigures&) { ++p.figures_calls; });
  for (std::string_view piece : pieces)
    if (!parser.Feed(piece)) {
      p.feed_returned_false = true;
      break;
    }
  if (finish) parser.Finish();
  p.reply = parser.reply();
  p.done = parser.done();
  return p;
}

Parsed ParseWhole(std::string_view body, bool finish = true) {
  return ParseInPieces({body}, finish);
}

// A stream as `wormchat serve` writes it: role chunk, text chunks, a keep-alive, the finish chunk
// with the figures, the usage chunk with them, [DONE].
const char kServeStream[] =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}"
    "\n\n"
    ":\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo, w\\u00f6rld\"},"
    "\"finish_reason\":null}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],"
    "\"wormchat\":{\"kv_blocks_used\":3,\"kv_blocks_total\":32,\"kv_bytes_used\":3000,"
    "\"kv_bytes_total\":32000,\"kv_format\":\"bf16 paged/64\",\"ctx_size\":512,\"rows_busy\":1,"
    "\"user_rows\":4,\"queue_length\":0,\"mesh\":\"n150\",\"model_us_per_token\":812.5,"
    "\"model_us_estimated\":false,\"mesh_us_per_token\":3.25}}\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,"
    "\"total_tokens\":15,\"prompt_tokens_details\":{\"cached_tokens\":0}},"
    "\"wormchat\":{\"kv_blocks_used\":2,\"kv_blocks_total\":32,\"mesh\":\"n150\"}}\n\n"
    "data: [DONE]\n\n";

TEST(SseChatParser, ReadsTextFinishUsageAndFigures) {
  const Parsed p = ParseWhole(kServeStream);
  EXPECT_TRUE(p.done);
  EXPECT_TRUE(p.feed_returned_false) << "Feed says the stream is over at [DONE]";
  EXPECT_EQ(p.reply.error, "");
  EXPECT_EQ(p.reply.text, "Hello, w\xc3\xb6rld");
  EXPECT_EQ(p.heard, p.reply.text);
  EXPECT_EQ(p.reply.deltas, 2) << "the role chunk's empty content is not a delta";
  EXPECT_EQ(p.reply.finish_reason, "stop");
  EXPECT_EQ(p.reply.prompt_tokens, 12);
  EXPECT_EQ(p.reply.completion_tokens, 3);
  EXPECT_EQ(p.reply.cached_tokens, 0);
  EXPECT_EQ(p.figures_calls, 2);
  // The last object seen: the usage chunk's, whose absent fields are 0.
  const ServerFigures& f = p.reply.figures;
  EXPECT_TRUE(f.present);
  EXPECT_EQ(f.kv_blocks_used, 2);
  EXPECT_EQ(f.kv_bytes_total, 0);
  EXPECT_EQ(f.mesh, "n150");

  const std::string body = kServeStream;
  const Parsed first = ParseWhole(body.substr(0, body.find("data: {\"choices\":[],\"usage\"")));
  const ServerFigures& g = first.reply.figures;  // only the finish chunk's, whole
  ASSERT_TRUE(g.present);
  EXPECT_EQ(g.kv_blocks_used, 3);
  EXPECT_EQ(g.kv_blocks_total, 32);
  EXPECT_EQ(g.kv_bytes_used, 3000);
  EXPECT_EQ(g.kv_bytes_total, 32000);
  EXPECT_EQ(g.kv_format, "bf16 paged/64");
  EXPECT_EQ(g.ctx_size, 512);
  EXPECT_EQ(g.rows_busy, 1);
  EXPECT_EQ(g.user_rows, 4);
  EXPECT_EQ(g.queue_length, 0);
  EXPECT_DOUBLE_EQ(g.model_us_per_token, 812.5);
  EXPECT_FALSE(g.model_us_estimated);
  EXPECT_DOUBLE_EQ(g.mesh_us_per_token, 3.25);
}

TEST(SseChatParser, AnySplitGivesTheSameReply) {
  const std::string body = kServeStream;
  const Parsed whole = ParseWhole(body);
  auto same = [&](const Parsed& p, const std::string& how) {
    EXPECT_EQ(p.reply.text, whole.reply.text) << how;
    EXPECT_EQ(p.heard, whole.heard) << how;
    EXPECT_EQ(p.reply.deltas, whole.reply.deltas) << how;
    EXPECT_EQ(p.reply.finish_reason, whole.reply.finish_reason) << how;
    EXPECT_EQ(p.reply.completion_tokens, whole.reply.completion_tokens) << how;
    EXPECT_EQ(p.reply.figures.kv_blocks_used, whole.reply.figures.kv_blocks_used) << how;
    EXPECT_EQ(p.figures_calls, whole.figures_calls) << how;
    EXPECT_EQ(p.reply.error, "") << how;
    EXPECT_TRUE(p.done) << how;
  };
  for (size_t cut = 0; cut <= body.size(); ++cut)
    same(ParseInPieces({std::string_view(body).substr(0, cut), std::string_view(body).substr(cut)}),
         "cut at " + std::to_string(cut));
  for (size_t a = 0; a < body.size(); a += 7)
    for (size_t b = a; b <= body.size(); b += 13) {
      const std::string_view v(body);
      same(ParseInPieces({v.substr(0, a), v.substr(a, b - a), v.substr(b)}),
           "cuts at " + std::to_string(a) + ", " + std::to_string(b));
    }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < body.size(); ++i) bytes.push_back(std::string_view(body).substr(i, 1));
  same(ParseInPieces(bytes), "a byte at a time");
}

TEST(SseChatParser, CrlfNoSpaceAfterTheColonCommentsAndSplitData) {
  const std::string body =
      ": keep-alive\r\n\r\n"
      "event: message\r\nid: 1\r\nretry: 1000\r\n"
      "data:{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\n"
      ": another comment\n"
      // One event's JSON over two data lines (joined by a line feed, which JSON allows).
      "data: {\"choices\":[{\"index\":0,\r\ndata: \"delta\":{\"content\":\"b\"},"
      "\"finish_reason\":\"length\"}]}\r\n\r\n"
      "data:[DONE]\r\n\r\n";
  const Parsed p = ParseWhole(body);
  EXPECT_EQ(p.reply.error, "");
  EXPECT_TRUE(p.done);
  EXPECT_EQ(p.reply.text, "ab");
  EXPECT_EQ(p.reply.finish_reason, "length");
  EXPECT_FALSE(p.reply.figures.present);
  EXPECT_EQ(p.reply.prompt_tokens, -1) << "no usage sent";
}

TEST(SseChatParser, OnlyChoiceZeroIsTheReply) {
  const Parsed p = ParseWhole(
      "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other\"}},"
      "{\"index\":0,\"delta\":{\"content\":\"mine\"},\"finish_reason\":\"stop\"}]}\n\n"
      "data: [DONE]\n\n");
  EXPECT_EQ(p.reply.text, "mine");
}

TEST(SseChatParser, WhatFollowsDoneIsIgnored) {
  const Parsed p = ParseWhole(
      "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n"
      "data: [DONE]\n\ndata: {not json\n\ngarbage\n");
  EXPECT_EQ(p.reply.error, "");
  EXPECT_EQ(p.reply.text, "x");
}

TEST(SseChatParser, BrokenStreamsEndWithAnErrorNeverACrash) {
  struct Case {
    std::string body, want;
  };
  const std::vector<Case> cases = {
      {"data: {\"choices\": [\n\n", "an event that is not JSON"},
      {"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: nope\n\n",
       "an event that is not JSON"},
      {"data: [1, 2]\n\n", "not a JSON object"},
      {"data: \"text\"\n\n", "not a JSON object"},
      {"data: " + std::string(100, '[') + std::string(100, ']') + "\n\n", "not JSON"},
      {"data: 1e999\n\n", "not JSON"},
      {"{\"id\": \"chatcmpl-1\", \"choices\": []}\n", "not server-sent events"},
      {"<html>502 Bad Gateway</html>\n", "not server-sent events"},
      {"data: {\"error\": {\"message\": \"the model failed\", \"type\": \"server_error\"}}\n\n"
       "data: [DONE]\n\n",
       "server error: the model failed"},
      {"data: {\"error\": \"out of memory\\nreally\"}\n\n",
       "server error: out of memory\\x0areally"},
      {"event: error\ndata: {\"code\": 500}\n\n", "server error: {\"code\":500}"},
      {"", "the stream ended early"},
      {": only keep-alives\n\n:\n\n", "the stream ended early"},
      {"data: {\"choices\":[{\"delta\":{\"content\":\"cut\"}}]}\n\n", "the stream ended early"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 60));
    const Parsed p = ParseWhole(c.body);
    EXPECT_NE(p.reply.error.find(c.want), std::string::npos) << p.reply.error;
    EXPECT_EQ(p.reply.error.find('\n'), std::string::npos) << p.reply.error;
    EXPECT_FALSE(p.done);
  }
  // Feed says so at once, and takes nothing more.
  SseChatParser parser(nullptr, nullptr);
  EXPECT_FALSE(parser.Feed("data: {oops}\n\n"));
  EXPECT_FALSE(parser.Feed("data: {\"choices\":[{\"delta\":{\"content\":\"late\"}}]}\n\n"));
  EXPECT_EQ(parser.reply().text, "");
  EXPECT_NE(parser.error().find("not JSON"), std::string::npos);
}

TEST(SseChatParser, ALineOver16MiBIsAnError) {
  SseChatParser parser(nullptr, nullptr);
  const std::string mib(size_t{1} << 20, 'a');
  bool ok = parser.Feed("data: ");
  for (int i = 0; i < 17 && ok; ++i) ok = parser.Feed(mib);
  EXPECT_FALSE(ok);
  EXPECT_NE(parser.error().find("16 MiB"), std::string::npos) << parser.error();
}

TEST(SseChatParser, ABodyWithoutDoneIsCompleteOnceAFinishReasonCame) {
  const Parsed p = ParseWhole(
      "data: {\"choices\":[{\"delta\":{\"content\":\"end\"},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1}}");
  EXPECT_EQ(p.reply.error, "");
  EXPECT_TRUE(p.done);
  EXPECT_EQ(p.reply.text, "end");
  EXPECT_EQ(p.reply.prompt_tokens, 4) << "the last event, without its blank line, is read";
  EXPECT_EQ(p.reply.cached_tokens, -1);
}

TEST(SseChatParser, FieldsOfAnotherTypeAreLeftOut) {
  const Parsed p = ParseWhole(
      "data: {\"choices\":[{\"delta\":{\"content\":7},\"finish_reason\":\"stop\"}],"
      "\"usage\":{\"prompt_tokens\":\"many\",\"completion_tokens\":1e300,"
      "\"prompt_tokens_details\":{\"cached_tokens\":18446744073709551615}},"
      "\"wormchat\":{\"kv_blocks_used\":\"3\",\"ctx_size\":4294967296,\"mesh\":5,"
      "\"mesh_us_per_token\":\"fast\",\"model_us_estimated\":1}}\n\n"
      "data: [DONE]\n\n");
  EXPECT_EQ(p.reply.error, "");
  EXPECT_EQ(p.reply.text, "");
  EXPECT_EQ(p.reply.prompt_tokens, -1);
  EXPECT_EQ(p.reply.completion_tokens, -1);
  EXPECT_EQ(p.reply.cached_tokens, -1);
  EXPECT_TRUE(p.reply.figures.present);
  EXPECT_EQ(p.reply.figures.kv_blocks_used, 0);
  EXPECT_EQ(p.reply.figures.ctx_size, 0);
  EXPECT_EQ(p.reply.figures.mesh, "");
  EXPECT_FALSE(p.reply.figures.model_us_estimated);
}

TEST(HttpErrorText, TheOpenAIMessageElseTheFirstLine) {
  EXPECT_EQ(HttpErrorText(401, R"({"error": {"message": "the API key is wrong", "type": "auth"}})",
                          "Unauthorized"),
            "HTTP 401: the API key is wrong");
  EXPECT_EQ(HttpErrorText(400, R"({"error": "bad model"})", ""), "HTTP 400: bad model");
  EXPECT_EQ(HttpErrorText(422, R"({"detail": "field required"})", ""), "HTTP 422: field required");
  EXPECT_EQ(HttpErrorText(404, R"({"object": "error", "message": "no such model"})", ""),
            "HTTP 404: no such model");
  EXPECT_EQ(HttpErrorText(502, "<html>\r\n<body>Bad Gateway</body>\r\n</html>", "Bad Gateway"),
            "HTTP 502: <html>");
  EXPECT_EQ(HttpErrorText(503, "", "Service Unavailable"), "HTTP 503: Service Unavailable");
  EXPECT_EQ(HttpErrorText(500, "", ""), "HTTP 500");
  const std::string long_line = HttpErrorText(500, std::string(5000, 'x'), "");
  EXPECT_LT(long_line.size(), 250u);
  EXPECT_EQ(HttpErrorText(500, "a\001b", ""), "HTTP 500: a\\x01b");
}

// ---- Against the real server, in process ----

// `wormchat serve` on the default model with its figures' source: the model, the n150 mesh and
// an attention meter installed on the model for the server's life.
class ServeFixture {
 public:
  explicit ServeFixture(ApiServerOptions o = {}, int ctx = 512, int rows = 4) {
    test::M().model->set_flash_decode_observer(&meter_);
    o.max_connections = 16;
    o.figures.model = test::M().model.get();
    o.figures.mesh = "n150";
    o.figures.meter = &meter_;
    server_ = std::make_unique<test::ApiTestServer>(std::move(o), ctx, rows);
  }
  ~ServeFixture() {
    server_.reset();
    test::M().model->set_flash_decode_observer(nullptr);
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  ChatClient Client(const std::string& key = "") const {
    return ChatClient(ParseServerAddress(Url()), key, /*read_timeout_s=*/120);
  }
  httplib::Client Http() const {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(120, 0);
    return c;
  }
  ServingLoop& loop() { return server_->loop(); }

 private:
  AttentionMeter meter_;
  std::unique_ptr<test::ApiTestServer> server_;
};

std::vector<ChatMessage> OneQuestion(const std::string& text) {
  return {ChatMessage{Role::kUser, text}};
}

TEST(ChatClientServe, TheStreamedTextIsTheWholeReplysWithUsageAndFigures) {
  ServeFixture s;
  ChatClient client = s.Client();
  EXPECT_EQ(client.Model(), "default-model");

  // The same request not streamed, with the fields the client sends.
  const json whole_body = {
      {"model", "default-model"},
      {"messages", json::array({{{"role", "user"}, {"content", "What is a mesh of chips?"}}})},
      {"max_tokens", 24},
      {"seed", 7},
      {"temperature", 0.8},
      {"top_p", 0.95},
      {"top_k", 40}};
  httplib::Client http = s.Http();
  auto whole = http.Post("/v1/chat/completions", whole_body.dump(), "application/json");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json w = json::parse(whole->body);
  EXPECT_FALSE(w.contains("wormchat")) << "figures go on streamed replies only";

  ChatRequestOptions options;  // model "": the client asks /v1/models
  options.max_tokens = 24;
  options.seed = 7;
  options.temperature = 0.8;
  options.top_p = 0.95;
  options.top_k = 40;
  std::string heard;
  int figure_calls = 0;
  ServerFigures seen;
  const ChatReply r = client.Stream(
      OneQuestion("What is a mesh of chips?"), options, [&](std::string_view d) { heard += d; },
      [&](const ServerFigures& f) {
        ++figure_calls;
        seen = f;
      });
  EXPECT_EQ(r.error, "");
  EXPECT_FALSE(r.cancelled);
  EXPECT_EQ(r.text, w["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_FALSE(r.text.empty());
  EXPECT_EQ(heard, r.text);
  EXPECT_EQ(r.finish_reason, w["choices"][0]["finish_reason"].get<std::string>());
  EXPECT_EQ(r.prompt_tokens, w["usage"]["prompt_tokens"].get<int64_t>());
  EXPECT_EQ(r.completion_tokens, w["usage"]["completion_tokens"].get<int64_t>());
  EXPECT_GE(r.cached_tokens, 0);
  EXPECT_GT(r.deltas, 0);
  EXPECT_GT(r.t_first_text, 0);
  EXPECT_GE(r.t_end, r.t_first_text);

  EXPECT_EQ(figure_calls, 2) << "the finish chunk's and the usage chunk's";
  const ServerFigures& f = r.figures;
  EXPECT_TRUE(f.present);
  EXPECT_EQ(seen.kv_format, f.kv_format);
  EXPECT_EQ(f.kv_format, "bf16 paged/64");
  EXPECT_EQ(f.ctx_size, 512);
  EXPECT_EQ(f.user_rows, 4);
  EXPECT_GE(f.rows_busy, 0);
  EXPECT_LE(f.rows_busy, 4);
  EXPECT_EQ(f.queue_length, 0);
  EXPECT_GT(f.kv_blocks_total, 0);
  EXPECT_GE(f.kv_blocks_used, 0);
  EXPECT_LE(f.kv_blocks_used, f.kv_blocks_total);
  EXPECT_GT(f.kv_bytes_total, 0);
  EXPECT_LE(f.kv_bytes_used, f.kv_bytes_total);
  EXPECT_EQ(f.mesh, "n150");
  EXPECT_GT(f.model_us_per_token, 0);
  EXPECT_LT(f.model_us_per_token, 1e6);
  EXPECT_GT(f.mesh_us_per_token, 0) << "the emulated FlashDecode ran";
  EXPECT_LT(f.mesh_us_per_token, f.model_us_per_token * 10);
  std::printf(
      "figures: %s, %d of %d blocks, mesh %s: model %.1f us/token (%s), attention %.2f "
      "us/token\n",
      f.kv_format.c_str(), f.kv_blocks_used, f.kv_blocks_total, f.mesh.c_str(),
      f.model_us_per_token, f.model_us_estimated ? "estimate" : "measured graph",
      f.mesh_us_per_token);
}

TEST(ChatClientServe, ASecondTurnResendingTheConversationIsCached) {
  ServeFixture s;
  ChatClient client = s.Client();
  std::string system;
  for (int i = 0; i < 16; ++i) system += "The mesh has many chips and each chip has many cores. ";
  std::vector<ChatMessage> conversation = {{Role::kSystem, system},
                                           {Role::kUser, "How many chips?"}};
  ChatRequestOptions options;
  options.model = "default-model";
  options.max_tokens = 8;
  options.seed = 2;
  const ChatReply first = client.Stream(conversation, options, nullptr);
  ASSERT_EQ(first.error, "");
  EXPECT_EQ(first.cached_tokens, 0);
  conversation.push_back({Role::kAssistant, first.text});
  conversation.push_back({Role::kUser, "And cores?"});
  const ChatReply second = client.Stream(conversation, options, nullptr);
  ASSERT_EQ(second.error, "");
  EXPECT_GT(second.cached_tokens, 0);
  EXPECT_GE(second.cached_tokens, first.prompt_tokens / 64 * 64);
  EXPECT_LT(second.cached_tokens, second.prompt_tokens);
}

TEST(ChatClientServe, CancelEndsTheStreamAtOnceAndFreesTheRow) {
  ApiServerOptions o;
  o.decorate = [](Request* r) { r->stop_at_eos = false; };  // runs to max_tokens unless cancelled
  ServeFixture s(o, /*ctx=*/512, /*rows=*/1);
  ChatClient client = s.Client();
  ChatRequestOptions options;
  options.model = "default-model";
  options.max_tokens = 400;
  options.seed = 5;
  std::mutex mu;
  std::condition_variable cv;
  bool got_text = false;
  ChatReply r;
  Clock::time_point returned;
  std::thread t([&] {
    r = client.Stream(OneQuestion("Tell me a long story."), options, [&](std::string_view) {
      std::lock_guard<std::mutex> lock(mu);
      got_text = true;
      cv.notify_all();
    });
    returned = Clock::now();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return got_text; }));
  }
  const Clock::time_point cancelled = Clock::now();
  client.Cancel();
  t.join();
  const double ms = std::chrono::duration<double, std::milli>(returned - cancelled).count();
  std::printf("Cancel during a stream: Stream returned after %.1f ms\n", ms);
  EXPECT_LT(ms, 500.0);
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.error, "");
  EXPECT_FALSE(r.text.empty());
  EXPECT_EQ(r.finish_reason, "");
  EXPECT_TRUE(test::WaitUntil(
      [&] {
        const ServingStatus st = s.loop().status();
        return st.active_rows == 0 && st.queued == 0;
      },
      std::chrono::milliseconds(5000)));
  EXPECT_TRUE(test::WaitUntil(
      [&] {
        auto m = s.Http().Get("/metrics");
        return m &&
               m->body.find("wormchat_choices_total{end=\"cancelled\"} 1") != std::string::npos;
      },
      std::chrono::milliseconds(5000)));
  // The client goes on: the next reply is whole.
  options.max_tokens = 4;
  const ChatReply next = client.Stream(OneQuestion("Hello"), options, nullptr);
  EXPECT_EQ(next.error, "");
  EXPECT_FALSE(next.cancelled);
  EXPECT_EQ(next.finish_reason, "length");
  // Cancel with nothing running does nothing, and the next Stream is not cancelled by it.
  client.Cancel();
  const ChatReply after = client.Stream(OneQuestion("Hello"), options, nullptr);
  EXPECT_FALSE(after.cancelled);
  EXPECT_EQ(after.error, "");
}

TEST(ChatClientServe, AWrongKeyIsAn401NamingIt) {
  ApiServerOptions o;
  o.api_key = "right-key";
  ServeFixture s(o);
  ChatRequestOptions options;
  options.model = "default-model";
  options.max_tokens = 4;
  ChatClient wrong = s.Client("wrong-key");
  const ChatReply r = wrong.Stream(OneQuestion("Hello"), options, nullptr);
  EXPECT_EQ(r.error, "HTTP 401: the API key is wrong");
  EXPECT_FALSE(r.cancelled);
  EXPECT_EQ(r.text, "");
  // Model() says what to do.
  ChatClient none = s.Client();
  try {
    none.Model();
    ADD_FAILURE() << "no key accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--api-key"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("401"), std::string::npos) << e.what();
  }
  // With the model left to the client, the failing /v1/models is the reply's error.
  options.model = "";
  const ChatReply m = none.Stream(OneQuestion("Hello"), options, nullptr);
  EXPECT_NE(m.error.find("the server wants an API key"), std::string::npos) << m.error;
  ChatClient right = s.Client("right-key");
  EXPECT_EQ(right.Stream(OneQuestion("Hello"), options, nullptr).error, "");
}

TEST(ChatClientServe, NobodyListeningIsCannotReach) {
  // A port bound but not listening: connecting to it is refused.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  ChatClient client(ParseServerAddress(url), "", 5);
  ChatRequestOptions options;
  options.model = "m";
  const ChatReply r = client.Stream(OneQuestion("Hello"), options, nullptr);
  EXPECT_EQ(r.error, "cannot reach " + url + ": Connection");
  EXPECT_FALSE(r.cancelled);
  try {
    client.Model();
    ADD_FAILURE() << "no server, yet a model";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot reach " + url + ": Connection");
  }
  close(fd);
}

// ---- Against an imitation of another OpenAI-compatible server ----

// An httplib server on a free port of 127.0.0.1 with the routes a test gives, serving until
// destroyed.
class FakeServer {
 public:
  explicit FakeServer(const std::function<void(httplib::Server&)>& routes) {
    routes(server_);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() before the accept loop runs would not stop it.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() {
    server_.stop();
    thread_.join();
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

TEST(ChatClientOtherServer, ChunksSplitMidLineNoFiguresNoDone) {
  std::mutex mu;
  json received;
  std::string auth, accept;
  FakeServer fake([&](httplib::Server& svr) {
    svr.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"imitation-7b","object":"model"}]})",
                      "application/json");
    });
    svr.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu);
        received = json::parse(req.body);
        auth = req.get_header_value("Authorization");
        accept = req.get_header_value("Accept");
      }
      const std::string body =
          "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},"
          "\"finish_reason\":null}]}\r\n\r\n"
          "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi \"},"
          "\"finish_reason\":null}]}\r\n\r\n"
          "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"there.\"},"
          "\"finish_reason\":\"stop\"}]}\r\n\r\n"
          "data: {\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,"
          "\"completion_tokens\":2,\"total_tokens\":11}}\r\n\r\n";
      // Written in pieces of 5 bytes, each a chunk of its own, with a pause: lines arrive split.
      auto offset = std::make_shared<size_t>(0);
      res.set_chunked_content_provider(
          "text/event-stream", [body, offset](size_t, httplib::DataSink& sink) {
            if (*offset >= body.size()) {
              sink.done();
              return true;
            }
            const size_t n = std::min<size_t>(5, body.size() - *offset);
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            const bool ok = sink.write(body.data() + *offset, n);
            *offset += n;
            return ok;
          });
    });
  });
  ChatClient client(ParseServerAddress(fake.Url() + "/v1"), "sk-test");
  ChatRequestOptions options;
  options.temperature = 0.7;
  options.top_p = 0.9;
  options.seed = 11;
  options.max_tokens = 32;  // top_k 0: not sent
  std::string heard;
  int figure_calls = 0;
  const ChatReply r = client.Stream(
      {{Role::kSystem, "Be brief."}, {Role::kUser, "Hello"}}, options,
      [&](std::string_view d) { heard += d; }, [&](const ServerFigures&) { ++figure_calls; });
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.text, "Hi there.");
  EXPECT_EQ(heard, r.text);
  EXPECT_EQ(r.deltas, 2);
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.prompt_tokens, 9);
  EXPECT_EQ(r.completion_tokens, 2);
  EXPECT_EQ(r.cached_tokens, -1) << "not sent by this server";
  EXPECT_FALSE(r.figures.present);
  EXPECT_EQ(figure_calls, 0);

  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(auth, "Bearer sk-test");
  EXPECT_EQ(accept, "text/event-stream");
  EXPECT_EQ(received["model"], "imitation-7b") << "the first of /v1/models";
  EXPECT_EQ(received["messages"], json::parse(R"([{"role":"system","content":"Be brief."},)"
                                              R"({"role":"user","content":"Hello"}])"));
  EXPECT_EQ(received["stream"], true);
  EXPECT_EQ(received["stream_options"]["include_usage"], true);
  EXPECT_DOUBLE_EQ(received["temperature"].get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(received["top_p"].get<double>(), 0.9);
  EXPECT_EQ(received["seed"], 11);
  EXPECT_EQ(received["max_tokens"], 32);
  EXPECT_FALSE(received.contains("top_k"));
}

TEST(ChatClientOtherServer, ErrorAnswersAndBodiesThatAreNotEvents) {
  FakeServer fake([](httplib::Server& svr) {
    svr.Post("/a/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
      res.status = 500;
      res.set_content("upstream exploded\nstack trace ...", "text/plain");
    });
    svr.Post("/b/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
      res.status = 404;
      res.set_content(R"({"detail": "model 'm' not found"})", "application/json");
    });
    svr.Post("/c/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"id": "chatcmpl-1", "choices": [{"message": {"content": "hi"}}]})",
                      "application/json");
    });
    svr.Get("/d/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object": "list", "data": []})", "application/json");
    });
    svr.Get("/e/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("<html>hello</html>", "text/html");
    });
  });
  ChatRequestOptions options;
  options.model = "m";
  const auto error_of = [&](const std::string& prefix) {
    ChatClient client(ParseServerAddress(fake.Url() + prefix), "");
    return client.Stream(OneQuestion("Hello"), options, nullptr).error;
  };
  EXPECT_EQ(error_of("/a"), "HTTP 500: upstream exploded");
  EXPECT_EQ(error_of("/b"), "HTTP 404: model 'm' not found");
  EXPECT_NE(error_of("/c").find("not server-sent events"), std::string::npos) << error_of("/c");
  options.model = "";
  EXPECT_NE(error_of("/d").find("the server lists no models"), std::string::npos);
  EXPECT_NE(error_of("/e").find("the answer is not JSON: '<html>hello</html>'"), std::string::npos)
      << error_of("/e");
}

TEST(ChatClientOtherServer, CancelEndsAStreamWhileTheServerSendsNothing) {
  // A server in a long prefill: the headers and no byte more for seconds.
  std::atomic<bool> release{false};
  FakeServer fake([&](httplib::Server& svr) {
    svr.Post("/v1/chat/completions", [&](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/event-stream", [&](size_t, httplib::DataSink& sink) {
        for (int i = 0; i < 1000 && !release; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        sink.done();
        return true;
      });
    });
    svr.Post("/silent/v1/chat/completions", [&](const httplib::Request&, httplib::Response&) {
      // Not even the headers.
      for (int i = 0; i < 1000 && !release; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    });
  });
  for (const std::string prefix : {"", "/silent"}) {
    SCOPED_TRACE(prefix.empty() ? "headers sent" : "nothing sent");
    ChatClient client(ParseServerAddress(fake.Url() + prefix), "");
    ChatRequestOptions options;
    options.model = "m";
    ChatReply r;
    std::atomic<bool> running{true};
    Clock::time_point returned;
    std::thread t([&] {
      r = client.Stream(OneQuestion("Hello"), options, nullptr);
      returned = Clock::now();
      running = false;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(running) << r.error;
    const Clock::time_point cancelled = Clock::now();
    client.Cancel();
    t.join();
    const double ms = std::chrono::duration<double, std::milli>(returned - cancelled).count();
    std::printf("Cancel while the server sends nothing (%s): Stream returned after %.1f ms\n",
                prefix.empty() ? "headers sent" : "no headers", ms);
    EXPECT_LT(ms, 500.0);
    EXPECT_TRUE(r.cancelled);
    EXPECT_EQ(r.error, "");
  }
  release = true;
}

TEST(ChatClientOtherServer, CancelFromTheTextCallbackAndBeforeAnyStream) {
  FakeServer fake([](httplib::Server& svr) {
    svr.Post("/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
      auto n = std::make_shared<int>(0);
      res.set_chunked_content_provider("text/event-stream", [n](size_t, httplib::DataSink& sink) {
        if (++*n > 2000) {
          sink.done();
          return true;
        }
        const std::string e = "data: {\"choices\":[{\"delta\":{\"content\":\"w \"}}]}\n\n";
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return sink.write(e.data(), e.size());
      });
    });
  });
  ChatClient client(ParseServerAddress(fake.Url()), "");
  client.Cancel();  // nothing runs: a no-op
  ChatRequestOptions options;
  options.model = "m";
  int heard = 0;
  const ChatReply r = client.Stream(OneQuestion("Hello"), options, [&](std::string_view) {
    if (++heard == 3) client.Cancel();
  });
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.error, "");
  EXPECT_GE(r.deltas, 3);
  EXPECT_LT(r.deltas, 2000);
  EXPECT_EQ(r.text.substr(0, 6), "w w w ");
}

}  // namespace
}  // namespace wc
