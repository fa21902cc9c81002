#include "app/serve/completion_run.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace wc {

// Forwards one choice's callbacks to its run. Holds the run (shared): the loop may call it after
// the HTTP thread has let go, until the cancelled choice ends.
class CompletionRun::Observer : public RequestObserver {
 public:
  Observer(std::shared_ptr<CompletionRun> run, int choice, const SamplingParams& params)
      : run_(std::move(run)), choice_(choice) {
    if (run_->logprobs_.on) sampler_.emplace(params, /*seed=*/0);
  }
  void OnToken(int token, const float* logits, int vocab) override {
    if (!first_token_) {
      first_token_ = true;
      if (run_->hooks_.on_first_token) run_->hooks_.on_first_token();
    }
    if (!sampler_) return;
    // The distribution the loop's sampler drew `token` from: same parameters, same logits.
    sampler_->Distribution(logits, vocab, &dist_);
    const Tokenizer* tok = run_->logprobs_.tokenizer;
    const auto bytes = [tok](int id) {
      return tok != nullptr ? std::string(tok->TokenBytes(id)) : std::to_string(id);
    };
    TokenLogprob lp;
    lp.token = token;
    lp.bytes = bytes(token);
    lp.logprob = std::log(dist_.Probability(token));
    const size_t n = std::min(dist_.tokens.size(), static_cast<size_t>(run_->logprobs_.top));
    for (size_t i = 0; i < n; ++i)
      lp.top.push_back(
          {dist_.tokens[i], bytes(dist_.tokens[i]), std::log(dist_.weights[i] / dist_.total)});
    run_->Push({choice_, std::string(), std::nullopt, std::move(lp)});
  }
  void OnText(std::string_view delta) override {
    if (!delta.empty()) run_->Push({choice_, std::string(delta), std::nullopt, std::nullopt});
  }
  void OnFinish(const RequestResult& result) override {
    if (run_->hooks_.on_finish) run_->hooks_.on_finish(result);
    run_->Push({choice_, std::string(), result, std::nullopt});
  }

 private:
  std::shared_ptr<CompletionRun> run_;
  int choice_;
  bool first_token_ = false;
  std::optional<Sampler> sampler_;  // with logprobs: its Distribution only, draws nothing
  SamplingDistribution dist_;       // scratch
};

CompletionRun::CompletionRun(ServingLoop& loop, Hooks hooks, Logprobs logprobs)
    : loop_(loop), hooks_(std::move(hooks)), logprobs_(logprobs) {}

CompletionRun::~CompletionRun() = default;

void CompletionRun::Submit(std::vector<Request> requests) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = static_cast<int>(requests.size());
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].observer =
        std::make_shared<Observer>(shared_from_this(), static_cast<int>(i), requests[i].sampling);
    const RequestId id = loop_.Submit(std::move(requests[i]));
    std::lock_guard<std::mutex> lock(mu_);
    ids_.push_back(id);
    if (cancelled_) loop_.Cancel(id);
  }
}

void CompletionRun::Push(Event e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (e.finish) --open_;
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

bool CompletionRun::Wait(std::chrono::milliseconds timeout, std::vector<Event>* out) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !events_.empty() || open_ == 0; });
  while (!events_.empty()) {
    out->push_back(std::move(events_.front()));
    events_.pop_front();
  }
  return open_ > 0 || !out->empty();
}

void CompletionRun::Cancel() {
  std::vector<RequestId> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return;
    cancelled_ = true;
    ids = ids_;
  }
  for (RequestId id : ids) loop_.Cancel(id);
}

}  // namespace wc
