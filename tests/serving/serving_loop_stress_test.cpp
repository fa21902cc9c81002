// The serving loop under concurrent use: many threads submitting, one cancelling, status read
// from another, shutdown in either mode and from several threads. Every request ends exactly once,
// the KV pool and the rows come back empty, and the loop leaves no thread behind. tools/tsan.sh
// runs these under ThreadSanitizer (ServingLoopStress.*:ServingLoopConcurrency.*), with
// WORMCHAT_LOOP_THREADS=1 and, if needed, a smaller WORMCHAT_STRESS_REQUESTS.
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/serving/serving_loop_util.h"
#include "util/rng.h"

namespace wc {
namespace {

using test::RequestSpec;

using test::M;

// Counts every callback of one request; keeps the result.
class CountingObserver : public RequestObserver {
 public:
  void OnToken(int token, const float* logits, int vocab) override {
    (void)logits, (void)vocab;
    std::lock_guard<std::mutex> lock(mu_);
    tokens_.push_back(token);
    if (finishes_ > 0) ++after_finish_;
  }
  void OnText(std::string_view delta) override {
    std::lock_guard<std::mutex> lock(mu_);
    text_ += delta;
    if (finishes_ > 0) ++after_finish_;
  }
  void OnFinish(const RequestResult& result) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++finishes_;
    result_ = result;
  }
  int finishes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return finishes_;
  }
  int after_finish() const {
    std::lock_guard<std::mutex> lock(mu_);
    return after_finish_;
  }
  RequestResult result() const {
    std::lock_guard<std::mutex> lock(mu_);
    return result_;
  }
  std::vector<int> tokens() const {
    std::lock_guard<std::mutex> lock(mu_);
    return tokens_;
  }
  std::string text() const {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  mutable std::mutex mu_;
  int finishes_ = 0, after_finish_ = 0;
  RequestResult result_;
  std::vector<int> tokens_;
  std::string text_;
};

bool IsNormalEnd(StopReason r) {
  return r == StopReason::kEos || r == StopReason::kStopString || r == StopReason::kMaxTokens ||
         r == StopReason::kContextFull;
}

// A random request: 1-64 prompt tokens, random sampling, stop strings and max_new_tokens (0-24);
// about one in eight is invalid in one of several ways.
struct StressRequest {
  RequestSpec spec;
  bool valid = true;
};

StressRequest RandomRequest(Rng& rng, int ctx) {
  StressRequest r;
  RequestSpec& s = r.spec;
  s.prompt =
      test::TextPrompt(1 + static_cast<int>(rng.Next() % 64), static_cast<int>(rng.Next() % 200));
  s.sampling.temperature = static_cast<float>(rng.Next() % 4) * 0.5f;
  s.sampling.top_k = static_cast<int>(rng.Next() % 3) * 20;
  s.sampling.top_p = rng.Next() % 2 == 0 ? 1.0f : 0.8f;
  s.seed = rng.Next();
  s.max_new_tokens = static_cast<int>(rng.Next() % 25);
  if (rng.Next() % 4 == 0) s.stop = {"e", "th"};
  s.stop_at_eos = rng.Next() % 5 != 0;
  switch (rng.Next() % 16) {
    case 0:
      s.prompt.clear();
      r.valid = false;
      break;
    case 1:
      s.prompt = test::TextPrompt(ctx);
      r.valid = false;
      break;
    case 2:
      s.sampling.temperature = -1.0f;
      r.valid = false;
      break;
    case 3:
      s.prompt[0] = M().config().vocab_size + 5;
      r.valid = false;
      break;
    default:
      break;
  }
  return r;
}

// The process's threads once runtime helpers are up: a first thread start makes ThreadSanitizer
// start its background thread, which then stays; loading the shared model packs its weights on an
// OpenMP team of this thread, whose workers libgomp keeps.
int SettledThreadCount() {
  std::thread([] {}).join();
  (void)M();
  return test::CountThreads();
}

int StressRequests() {
  return test::EnvInt("WORMCHAT_STRESS_REQUESTS", 200);
}

TEST(ServingLoopStress, RandomRequestsFromSeveralThreadsWithCancellationsEachEndOnce) {
  const int n = StressRequests();
  ASSERT_GE(n, 4);
  const int threads_before = SettledThreadCount();
  // Requests, built up front (the tokenizer is not what is under test).
  const int ctx = 160;
  std::vector<StressRequest> requests;
  Rng rng(7);
  for (int i = 0; i < n; ++i) requests.push_back(RandomRequest(rng, ctx));
  std::vector<std::shared_ptr<CountingObserver>> observers(n);
  for (auto& o : observers) o = std::make_shared<CountingObserver>();
  std::vector<std::atomic<RequestId>> ids(n);  // 0 until submitted

  std::map<RequestId, bool> cancelled;  // id -> Cancel returned true (ever)
  int cancel_missed = 0;                // Cancel calls that found nothing live
  {
    ServingOptions o;
    o.user_rows = 6;
    o.max_batch_tokens = 48;
    o.threads = test::LoopThreads();
    o.ctx = ctx;
    o.kv.block_size = 16;
    o.kv.n_blocks = 40;           // less than 6 full contexts: admission waits for blocks at times
    o.check_block_counts = true;  // the running block counts against a rescan, every step
    ServingLoop loop(*M().model, M().tokenizer.get(), M().chat_format, o);

    std::atomic<int> submitted{0};
    const int n_submitters = 3;
    std::vector<std::thread> submitters;
    for (int t = 0; t < n_submitters; ++t) {
      submitters.emplace_back([&, t] {
        Rng pause(100 + t);
        for (int i = t; i < n; i += n_submitters) {
          ids[i] = loop.Submit(test::MakeRequest(requests[i].spec, observers[i]));
          ++submitted;
          std::this_thread::sleep_for(std::chrono::microseconds(pause.Next() % 20000));
        }
      });
    }
    // Whenever 4 more requests have ended: one cancel near the head of the queue (likely a running
    // or queued request) and one anywhere up to a few ids past the last submitted one (mostly
    // finished ones, some not yet used).
    std::vector<std::pair<RequestId, bool>> cancel_log;
    std::thread canceller([&] {
      Rng pick(99);
      int64_t seen = 0;
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
      while (std::chrono::steady_clock::now() < give_up) {
        const int64_t finished = loop.status().requests_finished;
        if (finished >= n) break;
        if (finished >= seen + 4) {
          seen = finished;
          const RequestId near = static_cast<RequestId>(finished) + 1 + pick.Next() % 8;
          const RequestId any = 1 + pick.Next() % (static_cast<RequestId>(submitted.load()) + 3);
          for (RequestId id : {near, any}) cancel_log.emplace_back(id, loop.Cancel(id));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    for (auto& t : submitters) t.join();
    canceller.join();
    for (const auto& [id, ok] : cancel_log) {
      cancelled[id] = cancelled[id] || ok;
      cancel_missed += !ok;
    }
    loop.Shutdown(ShutdownMode::kDrain);

    const ServingStatus s = loop.status();
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.kv_blocks_reserved, 0);
    EXPECT_EQ(s.active_rows, 0);
    EXPECT_EQ(s.prefilling_rows, 0);
    EXPECT_EQ(s.queued, 0);
    EXPECT_EQ(s.requests_finished, n);
    EXPECT_LE(s.kv_blocks_peak, 40);
    EXPECT_GT(s.kv_blocks_peak, 0);
    EXPECT_EQ(loop.Cancel(ids[0]), false);  // everything has ended
  }

  int n_cancelled = 0, n_cancelled_queued = 0, n_error = 0, n_normal = 0;
  std::map<RequestId, int> by_id;
  for (int i = 0; i < n; ++i) {
    const CountingObserver& obs = *observers[i];
    ASSERT_EQ(obs.finishes(), 1) << "request " << i << " (id " << ids[i] << ")";
    EXPECT_EQ(obs.after_finish(), 0) << "callbacks after OnFinish, request " << i;
    const RequestResult r = obs.result();
    EXPECT_EQ(r.id, ids[i].load()) << i;
    ++by_id[r.id];
    const bool was_cancelled = cancelled.count(r.id) > 0 && cancelled[r.id];
    const RequestSpec& spec = requests[i].spec;
    if (r.reason == StopReason::kCancelled) {
      ++n_cancelled;
      n_cancelled_queued += r.user_row < 0;
      EXPECT_TRUE(was_cancelled) << "request " << i << " ended cancelled but nobody cancelled it";
    } else if (r.reason == StopReason::kError) {
      ++n_error;
      EXPECT_FALSE(requests[i].valid) << "valid request " << i << " failed: " << r.error;
      EXPECT_FALSE(r.error.empty());
    } else {
      ++n_normal;
      EXPECT_TRUE(requests[i].valid) << "invalid request " << i << " ran";
      EXPECT_TRUE(IsNormalEnd(r.reason));
      if (r.reason == StopReason::kMaxTokens) {
        EXPECT_EQ(static_cast<int>(r.tokens.size()), spec.max_new_tokens) << i;
      }
      if (r.reason == StopReason::kEos) {
        EXPECT_EQ(r.tokens.back(), M().config().eos_token_id) << i;
      }
    }
    EXPECT_LE(static_cast<int>(r.tokens.size()), std::max(spec.max_new_tokens, 0)) << i;
    EXPECT_EQ(r.tokens, obs.tokens()) << i;  // one OnToken per token
    EXPECT_EQ(r.text, obs.text()) << i;      // OnText delivered exactly the text
  }
  EXPECT_EQ(by_id.size(), static_cast<size_t>(n)) << "ids are unique";
  EXPECT_GT(n_normal, 0);
  EXPECT_GT(n_error, 0);
  EXPECT_GT(n_cancelled, 0);
  EXPECT_GT(cancel_missed, 0) << "no Cancel of a finished or unknown id";
  std::printf(
      "[ stress   ] %d requests: %d normal, %d cancelled (%d while queued), %d errors; %d "
      "Cancel calls found nothing live\n",
      n, n_normal, n_cancelled, n_cancelled_queued, n_error, cancel_missed);

  // No thread is left behind (see TheLoopLeavesNoThreadBehind).
  EXPECT_TRUE(test::WaitUntil([&] { return test::CountThreads() <= threads_before; },
                              std::chrono::milliseconds(3000)))
      << test::CountThreads() << " threads, " << threads_before << " before the loop";
}

TEST(ServingLoopConcurrency, TheLoopLeavesNoThreadBehind) {
  // While it runs, the loop has its own thread and, with ServingOptions::threads = T > 1, the T - 1
  // workers of the OpenMP team libgomp keeps for that thread. libgomp frees that pool when the
  // thread that owns it exits (its thread-exit destructor ends the workers), so once the loop is
  // destroyed the process is back to the threads it had before, after a short wait for the workers
  // to finish exiting.
  const int before = SettledThreadCount();
  const int threads = test::LoopThreads();
  {
    ServingOptions o;
    o.user_rows = 2;
    o.threads = threads;
    o.check_block_counts = true;  // the running block counts against a rescan, every step
    ServingLoop loop(*M().model, M().tokenizer.get(), M().chat_format, o);
    RequestSpec s;
    s.prompt = test::TextPrompt(40);
    s.max_new_tokens = 4;
    s.stop_at_eos = false;
    EXPECT_EQ(test::Await(*test::Submit(loop, s)).result.tokens.size(), 4u);
    EXPECT_EQ(test::CountThreads(), before + threads) << "the loop's thread and its OpenMP team";
  }
  EXPECT_TRUE(test::WaitUntil([&] { return test::CountThreads() == before; },
                              std::chrono::milliseconds(3000)))
      << test::CountThreads() << " threads after the loop, " << before << " before";
}

std::unique_ptr<ServingLoop> BusyLoop(int user_rows,
                                      std::vector<std::shared_ptr<WaitingObserver>>* observers,
                                      int n_requests, int max_new_tokens) {
  ServingOptions o;
  o.user_rows = user_rows;
  o.threads = test::LoopThreads();
  o.kv.block_size = 16;
  o.check_block_counts = true;
  auto loop = std::make_unique<ServingLoop>(*M().model, M().tokenizer.get(), M().chat_format, o);
  for (int i = 0; i < n_requests; ++i) {
    RequestSpec s;
    s.prompt = test::TextPrompt(5 + i % 40, i);
    s.seed = i;
    s.max_new_tokens = max_new_tokens;
    s.stop_at_eos = false;
    observers->push_back(test::Submit(*loop, s));
  }
  return loop;
}

TEST(ServingLoopConcurrency, ShutdownCancelEndsEveryRequestInFlightOnce) {
  std::vector<std::shared_ptr<WaitingObserver>> observers;
  auto loop = BusyLoop(4, &observers, 24, 24);
  ASSERT_TRUE(test::WaitUntil([&] { return loop->status().tokens_sampled >= 10; }));
  loop->Shutdown(ShutdownMode::kCancel);
  int cancelled = 0, finished = 0;
  for (auto& obs : observers) {
    const RequestResult* r = obs->WaitFor(std::chrono::milliseconds(0));
    ASSERT_NE(r, nullptr) << "Shutdown returned before a request ended";
    if (r->reason == StopReason::kCancelled) {
      ++cancelled;
      EXPECT_LT(r->tokens.size(), 24u);
    } else {
      ++finished;
      EXPECT_EQ(r->reason, StopReason::kMaxTokens);
      EXPECT_EQ(r->tokens.size(), 24u);
    }
  }
  EXPECT_GT(cancelled, 0);
  const ServingStatus s = loop->status();
  EXPECT_EQ(s.requests_finished, 24);
  EXPECT_EQ(s.active_rows, 0);
  EXPECT_EQ(s.queued, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_reserved, 0);
  loop->Shutdown(ShutdownMode::kDrain);  // idempotent
  loop.reset();                          // and the destructor's Shutdown too
  for (auto& obs : observers) EXPECT_NE(obs->WaitFor(std::chrono::milliseconds(0)), nullptr);
}

TEST(ServingLoopConcurrency, SubmitAfterShutdownFailsAtOnceOnTheCallingThread) {
  std::vector<std::shared_ptr<WaitingObserver>> observers;
  auto loop = BusyLoop(2, &observers, 2, 4);
  loop->Shutdown(ShutdownMode::kDrain);
  for (auto& obs : observers)
    EXPECT_EQ(test::Await(*obs).result.reason, StopReason::kMaxTokens);  // drained
  RequestSpec s;
  s.prompt = test::TextPrompt(4);
  auto late = test::Submit(*loop, s);
  const RequestResult* r = late->WaitFor(std::chrono::milliseconds(0));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reason, StopReason::kError);
  EXPECT_NE(r->error.find("shut down"), std::string::npos) << r->error;
  EXPECT_GT(r->id, 2u);
  EXPECT_FALSE(loop->Cancel(r->id));
}

TEST(ServingLoopConcurrency, ADrainCanBeTurnedIntoACancelFromAnotherThread) {
  // One thread drains (and waits, joining the loop); another cancels meanwhile. Both return, and
  // every request ends once.
  std::vector<std::shared_ptr<WaitingObserver>> observers;
  auto loop = BusyLoop(2, &observers, 8, 400);
  ASSERT_TRUE(test::WaitUntil([&] { return loop->status().tokens_sampled >= 2; }));
  ServingLoop* raw = loop.get();
  auto drained = std::make_shared<std::promise<void>>();
  auto cancelled_ok = std::make_shared<std::promise<bool>>();
  std::thread drainer([raw, drained] {
    raw->Shutdown(ShutdownMode::kDrain);
    drained->set_value();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the drainer is joining
  std::thread canceller([raw, cancelled_ok] {
    try {
      raw->Shutdown(ShutdownMode::kCancel);
      cancelled_ok->set_value(true);
    } catch (const std::exception&) {
      cancelled_ok->set_value(false);
    }
  });
  auto cancel_done = cancelled_ok->get_future();
  auto drain_done = drained->get_future();
  if (cancel_done.wait_for(std::chrono::seconds(20)) != std::future_status::ready ||
      drain_done.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    drainer.detach();  // stuck joining: leave them (and the loop) behind
    canceller.detach();
    (void)loop.release();
    FAIL() << "two threads shutting the loop down at once hang";
  }
  drainer.join();
  canceller.join();
  EXPECT_TRUE(cancel_done.get()) << "the second Shutdown threw";
  int cancelled = 0;
  for (auto& obs : observers) {
    const RequestResult* r = obs->WaitFor(std::chrono::milliseconds(0));
    ASSERT_NE(r, nullptr);
    cancelled += r->reason == StopReason::kCancelled;
  }
  EXPECT_EQ(cancelled, 8) << "400 tokens each cannot have been drained in 50 ms";
}

// Calls back into the loop from its callbacks, as the contract allows: status on every token,
// Submit of a follow-up request from OnFinish, Cancel of itself after a few tokens, and finally
// Shutdown (which then must not join the loop's own thread).
class ReentrantObserver : public WaitingObserver {
 public:
  ReentrantObserver(ServingLoop& loop, int depth) : loop_(loop), depth_(depth) {}
  void OnToken(int token, const float* logits, int vocab) override {
    WaitingObserver::OnToken(token, logits, vocab);
    statuses_ += loop_.status().steps > 0;
    if (++tokens_ == 3 && depth_ % 2 == 1) loop_.Cancel(id_.load());
  }
  void OnFinish(const RequestResult& result) override {
    if (depth_ > 0) {
      next_ = std::make_shared<ReentrantObserver>(loop_, depth_ - 1);
      RequestSpec s;
      s.prompt = test::TextPrompt(6 + depth_);
      s.max_new_tokens = 6;
      s.stop_at_eos = false;
      next_->id_ = loop_.Submit(test::MakeRequest(s, next_));
    } else {
      loop_.Shutdown(ShutdownMode::kDrain);
    }
    WaitingObserver::OnFinish(result);
  }
  std::atomic<RequestId> id_{0};
  std::shared_ptr<ReentrantObserver> next_;
  int statuses_ = 0;

 private:
  ServingLoop& loop_;
  int depth_;
  int tokens_ = 0;
};

TEST(ServingLoopConcurrency, CallbacksMayCallBackIntoTheLoop) {
  ServingOptions o;
  o.user_rows = 2;
  o.threads = test::LoopThreads();
  o.check_block_counts = true;
  ServingLoop loop(*M().model, M().tokenizer.get(), M().chat_format, o);
  auto first = std::make_shared<ReentrantObserver>(loop, 4);
  RequestSpec s;
  s.prompt = test::TextPrompt(5);
  s.max_new_tokens = 6;
  s.stop_at_eos = false;
  first->id_ = loop.Submit(test::MakeRequest(s, first));
  // Depth 4, 3, 2, 1, 0: odd depths cancel themselves after 3 tokens; depth 0 shuts the loop
  // down from its OnFinish, on the loop's thread.
  std::vector<StopReason> want = {StopReason::kMaxTokens, StopReason::kCancelled,
                                  StopReason::kMaxTokens, StopReason::kCancelled,
                                  StopReason::kMaxTokens};
  std::shared_ptr<ReentrantObserver> obs = first;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NE(obs, nullptr) << i;
    const RequestResult r = test::Await(*obs).result;
    EXPECT_EQ(StopReasonName(r.reason), std::string(StopReasonName(want[i]))) << i;
    EXPECT_GT(obs->statuses_, 0);
    obs = obs->next_;
  }
  loop.Shutdown(ShutdownMode::kDrain);  // joins the thread the callback could not
  RequestSpec late;
  late.prompt = test::TextPrompt(3);
  EXPECT_EQ(test::Await(*test::Submit(loop, late)).result.reason, StopReason::kError);
}

TEST(ServingLoopConcurrency, StatusIsReadableFromAnotherThreadWhileTheLoopRuns) {
  std::vector<std::shared_ptr<WaitingObserver>> observers;
  std::atomic<bool> done{false};
  double best_rate = 0;
  int64_t last_steps = 0, last_sampled = 0, last_finished = 0;
  int polls = 0, violations = 0;
  auto loop = BusyLoop(4, &observers, 12, 20);
  std::thread reader([&] {
    while (!done.load()) {
      const ServingStatus s = loop->status();
      ++polls;
      best_rate = std::max(best_rate, s.tokens_per_s);
      if (s.steps < last_steps || s.tokens_sampled < last_sampled ||
          s.requests_finished < last_finished || s.active_rows > 4 ||
          s.prefilling_rows > s.active_rows || s.kv_blocks_used > s.kv_blocks_total ||
          s.user_rows != 4 || s.forward_s > s.step_s + 1e-9)
        ++violations;
      last_steps = s.steps;
      last_sampled = s.tokens_sampled;
      last_finished = s.requests_finished;
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  });
  for (auto& obs : observers) test::Await(*obs);
  done = true;
  reader.join();
  EXPECT_GT(polls, 10);
  EXPECT_EQ(violations, 0);
  EXPECT_GT(best_rate, 0.0) << "tokens_per_s never rose above 0";
  loop->Shutdown(ShutdownMode::kDrain);
  const ServingStatus s = loop->status();
  EXPECT_EQ(s.tokens_sampled, 12 * 20);
  EXPECT_GT(s.steps, 20);
  EXPECT_GT(s.tokens_prefilled, 0);
  EXPECT_GT(s.forward_s, 0.0);
  EXPECT_EQ(s.requests_finished, 12);
}

}  // namespace
}  // namespace wc
