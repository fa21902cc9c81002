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
  BatchObserver(std::shared_ptr<FinishedQueue> queue, size_t job)
      : queue_(std::move(queue)), job_(job) {}
  void OnFinish(const RequestResult& result) override { queue_->Push(job_, result); }

 private:
  std::shared_ptr<FinishedQueue> queue_;  // shared: the loop may outlive the runner
  size_t job_;                            // index into the jobs
};

// A request the loop refused for its content, or a failure of the loop itself.
const char* ErrorCode(const RequestResult& r) {
  return r.rejected ? "invalid_request" : "internal_error";
}

}  // namespace

BatchRunner::BatchRunner(ServingLoop& loop, BatchWriter& writer, BatchProgress& progress,
                         std::string model_name)
    : loop_(loop), writer_(writer), progress_(progress), model_name_(std::move(model_name)) {}

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
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].request.observer = std::make_shared<BatchObserver>(finished, i);
    loop_.Submit(std::move(jobs[i].request));
  }
  size_t outstanding = jobs.size();
  bool interrupted = false;
  auto last_update = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  while (outstanding > 0) {
    for (const auto& [job, result] : finished->Take(std::chrono::milliseconds(100))) {
      --outstanding;
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
