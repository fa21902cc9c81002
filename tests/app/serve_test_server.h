// An ApiServer for the tests of `wormchat serve` in process (serve_test, serve_load_test): on a
// free port of 127.0.0.1, over its own serving loop on the default model, serving until
// destroyed.
#pragma once

#include <httplib.h>

#include <memory>
#include <thread>

#include "app/serve/api_server.h"
#include "tests/serving/serving_loop_util.h"

namespace wc::test {

class ApiTestServer {
 public:
  // `o`'s host and port are replaced (127.0.0.1, a free port); the loop has `rows` user rows of
  // `ctx` tokens.
  ApiTestServer(ApiServerOptions o, int ctx, int rows) {
    ServingOptions so = Rows(rows);
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
    server_ = std::make_unique<ApiServer>(*loop_, model, o);
    port_ = server_->Bind();
    thread_ = std::thread([this] { server_->Listen(); });
  }
  // Cancels whatever still runs before waiting for the HTTP threads: a reply being written waits
  // for its choices to end.
  ~ApiTestServer() {
    server_->Stop();
    loop_->Shutdown(ShutdownMode::kCancel);
    thread_.join();
  }
  ApiTestServer(const ApiTestServer&) = delete;
  ApiTestServer& operator=(const ApiTestServer&) = delete;

  // A client of this server whose reads wait at most `read_timeout_s`.
  std::unique_ptr<httplib::Client> NewClient(int read_timeout_s) const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(read_timeout_s, 0);
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

}  // namespace wc::test
