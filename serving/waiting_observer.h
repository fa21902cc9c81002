// A RequestObserver a front end can block on: streams the text to a TextSink (optional), keeps the
// logits of every sampled token when asked (tests), and wakes Wait() when the request ends.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <vector>

#include "serving/request.h"
#include "serving/text_stream.h"

namespace wc {

class WaitingObserver : public RequestObserver {
 public:
  explicit WaitingObserver(TextSink* sink = nullptr, bool keep_logits = false)
      : sink_(sink), keep_logits_(keep_logits) {}

  void OnToken(int token, const float* logits, int vocab) override {
    (void)token;
    if (keep_logits_) logits_.emplace_back(logits, logits + vocab);
  }
  void OnText(std::string_view delta) override {
    if (sink_ != nullptr) sink_->Write(delta);
  }
  void OnFinish(const RequestResult& result) override {
    if (sink_ != nullptr) sink_->Flush();
    std::lock_guard<std::mutex> lock(mu_);
    result_ = result;
    done_.notify_all();
  }

  // Blocks until the request ends.
  const RequestResult& Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [this] { return result_.has_value(); });
    return *result_;
  }
  // Waits at most `timeout`; the result if the request has ended.
  const RequestResult* WaitFor(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait_for(lock, timeout, [this] { return result_.has_value(); });
    return result_ ? &*result_ : nullptr;
  }
  // Logits of each sampled token, [tokens][vocab] (keep_logits only; read after Wait()).
  const std::vector<std::vector<float>>& logits() const { return logits_; }

 private:
  TextSink* sink_;
  bool keep_logits_;
  std::vector<std::vector<float>> logits_;
  std::mutex mu_;
  std::condition_variable done_;
  std::optional<RequestResult> result_;
};

}  // namespace wc
