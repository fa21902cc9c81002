// `wormchat serve` as a user starts it: the real binary on a free port, asked over a plain HTTP/1.1
// socket, against `wormchat generate` with the same settings; SIGTERM ends it with status 0.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/app/http_test_util.h"
#include "tests/app/served_process.h"
#include "tests/test_util.h"

namespace wc {
namespace {

using nlohmann::json;
using test::Body;
using test::Exchange;
using test::Http;

using test::Served;

TEST(ServeCli, RepliesAreGeneratesTextAndSigtermExitsCleanly) {
  Served s({"--api-key", "k1"});
  ASSERT_GT(s.port, 0) << test::ReadFile(s.dir.File("err"));
  const auto gen =
      test::RunWormchat({"generate", "--prompt", "What is a chip?", "-n", "20", "--seed", "9",
                         "--temperature", "1", "--top-k", "0", "--top-p", "1", "--threads", "1"});
  ASSERT_EQ(gen.exit_code, 0) << test::Describe(gen);
  const json body = {
      {"messages", json::array({{{"role", "user"}, {"content", "What is a chip?"}}})},
      {"max_tokens", 20},
      {"seed", 9}};
  const std::string denied = Http(s.port, "POST", "/v1/chat/completions", body.dump());
  EXPECT_EQ(denied.rfind("HTTP/1.1 401", 0), 0u) << denied;
  const std::string r =
      Http(s.port, "POST", "/v1/chat/completions", body.dump(), "Authorization: Bearer k1\r\n");
  ASSERT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  const json j = json::parse(Body(r));
  EXPECT_EQ(j["choices"][0]["message"]["content"].get<std::string>() + "\n", gen.out);
  EXPECT_EQ(s.Stop(), 0) << test::ReadFile(s.dir.File("err"));
  EXPECT_NE(test::ReadFile(s.dir.File("err")).find("wormchat serve: stopped"), std::string::npos);
}

TEST(ServeCli, ARequestNotSentWithinTheTimeoutIsAnswered408) {
  Served s({"--request-timeout-s", "1"});
  ASSERT_GT(s.port, 0) << test::ReadFile(s.dir.File("err"));
  // The head promises a body that never comes (each read alone may wait 30 s).
  const auto sent = std::chrono::steady_clock::now();
  const std::string r = Exchange(s.port,
                                 "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                                 "{\"prompt\": ");
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_EQ(r.rfind("HTTP/1.1 408", 0), 0u) << r;
  EXPECT_NE(r.find("\"request_timeout\""), std::string::npos) << r;
  // Not before the second (the server's clock starts after the connect); the upper bound only
  // tells a deadline from the 30 s read timeout, wide for a loaded machine.
  EXPECT_GE(ms, 950.0);
  EXPECT_LT(ms, 10000.0);
  EXPECT_EQ(s.Stop(), 0) << test::ReadFile(s.dir.File("err"));
}

// `bench serve --http URL` loads a running server: every client streams its gen-len tokens
// (ignore_eos), and the figures it prints and writes are those of the requests it made.
TEST(ServeCli, BenchServeHttpLoadsARunningServer) {
  Served s({"--user-rows", "4"});
  ASSERT_GT(s.port, 0) << test::ReadFile(s.dir.File("err"));
  const std::string out = s.dir.File("load.json");
  const auto r = test::RunWormchat(
      {"bench", "serve", "--http", "http://127.0.0.1:" + std::to_string(s.port), "--clients", "3",
       "--prompt-len", "12", "--gen-len", "6", "--id-range", "10", "400", "--json", out});
  ASSERT_EQ(r.exit_code, 0) << test::Describe(r);
  EXPECT_NE(r.out.find("aggregate"), std::string::npos) << r.out;
  const json j = json::parse(test::ReadFile(out));
  EXPECT_EQ(j["clients"], 3);
  EXPECT_EQ(j["generated_tokens"], 18);
  ASSERT_EQ(j["requests"].size(), 3u);
  for (const json& q : j["requests"]) {
    EXPECT_EQ(q["tokens"], 6) << q.dump();
    EXPECT_GT(q["ttft_ms"].get<double>(), 0) << q.dump();
  }
  EXPECT_GT(j["aggregate_tokens_per_s"].get<double>(), 0);
  EXPECT_EQ(j["client0_prompt_ids"].size(), 12u);
  // Nothing listening: one line naming the URL.
  const int dead = s.port;
  EXPECT_EQ(s.Stop(), 0);
  const auto none =
      test::RunWormchat({"bench", "serve", "--http", "http://127.0.0.1:" + std::to_string(dead),
                         "--clients", "1", "--prompt-len", "4", "--gen-len", "2"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_EQ(test::CountLines(none.err), 1) << none.err;
}

TEST(ServeCli, BadFlagsAreOneLine) {
  const auto busy = test::RunWormchat({"serve", "--port", "70000"});
  EXPECT_NE(busy.exit_code, 0);
  EXPECT_NE(busy.err.find("--port"), std::string::npos) << busy.err;
  test::TempDir dir;
  test::WriteFile(dir.File("key"), "\n");
  const auto empty = test::RunWormchat({"serve", "--api-key-file", dir.File("key")});
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_EQ(empty.err, "wormchat: error: --api-key-file " + dir.File("key") + ": is empty\n");
}

}  // namespace
}  // namespace wc
