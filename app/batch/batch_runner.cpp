#include "app/batch/batch_runner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "util/error.h"

namespace wc {

namespace {

// Results as the loop finishes them (on its thread), for the runner's thread to write.
class FinishedQueue {
 public:
  void Push(size_t job, const RequestResult& result) {
    std::lock_guard<std::mutex> lock(mu_);
    items_.emplace_back(job, result);
    ready_.notify_one();
  }
  // Waits at most `timeout` for results; returns what there is.
  std::deque<std::pair<size_t, RequestResult>> Take(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait_for(lock, timeout, [this] { return !items_.empty(); });
    std::deque<std::pair<size_t, RequestResult>> out;
    out.swap(items_);
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::pair<size_t, RequestResult>> items_;
};

class BatchObserver : public RequestObserver {
 public:
  BatchObserver(std::shared_ptr<FinishedQueue> queue, ServingLoop& loop, size_t job)
      : queue_(std::move(queue)), loop_(loop), job_(job) {}
  void OnFinish(const RequestResult& result) override {
    queue_->Push(job_, result);
    // Workaround (serving_loop.cpp at 457626c): Step() sleeps until queue_, a cancel, a close or
    // a busy row wakes it, not for the requests it already moved into waiting_. When the last
    // running rows finish in one step while requests still wait, it sleeps forever. Closing a
    // fresh session is a no-op that wakes it for one more step, which admits them.
    loop_.CloseSession(loop_.OpenSession());
  }

 private:
  std::shared_ptr<FinishedQueue> queue_;  // shared: the loop may outlive the runner
  ServingLoop& loop_;
  size_t job_;  // index into the jobs
};

// A loop failure (after admission, or the loop itself) rather than a request it rejected.
const char* ErrorCode(const RequestResult& r) {
  return r.user_row >= 0 || r.error.rfind("the serving loop", 0) == 0 ? "internal_error"
                                                                      : "invalid_request";
}

}  // namespace

BatchRunner::BatchRunner(ServingLoop& loop, BatchWriter& writer, BatchProgress& progress,
                         std::string model_name)
    : loop_(loop), writer_(writer), progress_(progress), model_name_(std::move(model_name)) {}

int BatchRunner::BlocksFor(const Request& r) const {
  const int block = loop_.options().kv.block_size;
  if (block == 0) return 0;
  const int64_t most =
      std::min<int64_t>(static_cast<int64_t>(r.prompt_ids.size()) + r.max_new_tokens, loop_.ctx());
  return static_cast<int>((most + block - 1) / block);
}

bool BatchRunner::Run(std::vector<BatchJob> jobs, BatchCounts& counts,
                      const volatile std::sig_atomic_t& signal) {
  try {
    return RunJobs(jobs, counts, signal);
  } catch (...) {
    loop_.Shutdown(ShutdownMode::kCancel);
    throw;
  }
}

bool BatchRunner::RunJobs(std::vector<BatchJob>& jobs, BatchCounts& counts,
                          const volatile std::sig_atomic_t& signal) {
  auto finished = std::make_shared<FinishedQueue>();
  // Workaround (serving_loop.cpp at 457626c): Admit() moves a one-shot request's prompt ids out
  // before it checks for free KV blocks, so a request that has to wait for blocks is later
  // admitted with an empty prompt. With a bounded pool (--kv-blocks) requests are submitted only
  // when the blocks they reserve are free, so the loop never has to make one wait for blocks.
  // (With the default pool every row has room for its full context: rows are the only limit.)
  const int pool = loop_.status().kv_blocks_total;
  const bool bounded = loop_.options().kv.n_blocks > 0 && pool > 0;
  std::vector<int> reserved(jobs.size(), 0);
  int promised = 0;
  size_t next = 0, outstanding = 0;
  auto submit_more = [&] {
    for (; next < jobs.size(); ++next) {
      Request& r = jobs[next].request;
      const int need = bounded ? BlocksFor(r) : 0;
      if (need <= pool && promised + need > pool) break;  // (more than the pool: rejected at once)
      reserved[next] = need <= pool ? need : 0;
      promised += reserved[next];
      r.observer = std::make_shared<BatchObserver>(finished, loop_, next);
      loop_.Submit(std::move(r));
      ++outstanding;
    }
  };

  bool interrupted = false;
  auto last_update = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  submit_more();
  while (outstanding > 0 || (!interrupted && next < jobs.size())) {
    for (const auto& [job, result] : finished->Take(std::chrono::milliseconds(100))) {
      --outstanding;
      promised -= reserved[job];
      if (result.reason == StopReason::kCancelled) continue;  // not written: a rerun runs it
      const BatchJob& j = jobs[job];
      if (result.reason == StopReason::kError) {
        writer_.Append(ErrorRecord(j.line, j.custom_id, ErrorCode(result),
                                   Cat("line ", j.line, ": ", result.error)));
        ++counts.failed;
      } else {
        writer_.Append(SuccessRecord(j.line, j.custom_id, j.chat, model_name_, result));
      }
      ++counts.done;
    }
    if (signal != 0 && !interrupted) {
      interrupted = true;
      progress_.Note(Cat("batch: ", signal == SIGINT ? "SIGINT" : "SIGTERM",
                         ": cancelling the rest; what is written stays, a rerun resumes"));
      loop_.Shutdown(ShutdownMode::kCancel);  // the cancelled come back through `finished`
    }
    if (!interrupted) submit_more();
    const auto now = std::chrono::steady_clock::now();
    if (now - last_update >= std::chrono::milliseconds(250)) {
      last_update = now;
      progress_.Update(counts.done, counts.failed, loop_.status());
    }
  }
  loop_.Shutdown(ShutdownMode::kDrain);
  return interrupted;
}

}  // namespace wc
