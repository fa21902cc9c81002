// One HTTP request's choices as the serving loop runs them: the loop's thread pushes each choice's
// text deltas and its end (observers), the request's HTTP thread takes them in order and writes
// them out; whichever side stops first (the client gone, the server draining) cancels the rest.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "serving/sampler.h"
#include "serving/serving_loop.h"
#include "tokenizer/tokenizer.h"

namespace wc {

// A sampled token's log-probability under its request's sampling distribution
// (SamplingDistribution: after temperature, top-k and top-p, exactly what Sample draws from), and
// the likeliest tokens' (in Sample's order: higher logit first, lower id on ties).
struct TokenLogprob {
  int token = 0;
  std::string bytes;  // the token's bytes (Tokenizer::TokenBytes)
  double logprob = 0;
  struct Alternative {
    int token;
    std::string bytes;
    double logprob;
  };
  std::vector<Alternative> top;
};

class CompletionRun : public std::enable_shared_from_this<CompletionRun> {
 public:
  struct Event {
    int choice = 0;
    std::string text;                     // a text delta (may be empty on the last event)
    std::optional<RequestResult> finish;  // set on the choice's last event
    std::optional<TokenLogprob> logprob;  // a sampled token's, before the text it completes
  };
  // Log-probabilities for every sampled token (off unless set).
  struct Logprobs {
    bool on = false;
    int top = 0;  // alternatives listed per token
    const Tokenizer* tokenizer = nullptr;
  };

  // Called on the loop's thread when a choice's first token is sampled and when each choice ends:
  // the server's metrics. Quick, never blocking.
  struct Hooks {
    std::function<void()> on_first_token;
    std::function<void(const RequestResult&)> on_finish;
  };

  CompletionRun(ServingLoop& loop, Hooks hooks, Logprobs logprobs);
  ~CompletionRun();

  // Submits `requests` (their observers set here), one per choice, in choice order.
  void Submit(std::vector<Request> requests);
  // Waits up to `timeout` for events and moves them into `out` (in the order they happened);
  // returns false once every choice has ended and every event was taken.
  bool Wait(std::chrono::milliseconds timeout, std::vector<Event>* out);
  // Cancels every choice that has not ended (the client is gone). Idempotent.
  void Cancel();
  int choices() const { return static_cast<int>(ids_.size()); }

 private:
  class Observer;
  void Push(Event e);

  ServingLoop& loop_;
  Hooks hooks_;
  Logprobs logprobs_;
  std::vector<RequestId> ids_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  int open_ = 0;  // choices not yet ended
  bool cancelled_ = false;
};

}  // namespace wc
