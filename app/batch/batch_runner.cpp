#include "app/batch/batch_runner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "dist/exchange.h"
#include "util/error.h"

namespace wc {

namespace {

// Results as the loop finishes them (on its thread), for the runner's thread to report.
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

// What a rank tells rank 0 in a round.
struct Report {
  int signal = 0;       // SIGINT/SIGTERM this rank caught, else 0
  int room = 0;         // more requests it can take now
  int outstanding = 0;  // requests submitted to its loop and not finished
  ServingStatus status;
  std::vector<std::pair<bool, std::string>> records;  // (error record?, record) in finish order
};

std::string Encode(const Report& r) {
  WireWriter w;
  w.U32(static_cast<uint32_t>(r.signal));
  w.U32(static_cast<uint32_t>(r.room));
  w.U32(static_cast<uint32_t>(r.outstanding));
  w.U32(static_cast<uint32_t>(r.status.queued));
  w.U32(static_cast<uint32_t>(r.status.active_rows));
  w.U32(static_cast<uint32_t>(r.status.user_rows));
  w.F64(r.status.tokens_per_s);
  w.I64(r.status.tokens_sampled);
  w.U32(static_cast<uint32_t>(r.records.size()));
  for (const auto& [error, record] : r.records) {
    w.U32(error ? 1 : 0);
    w.Str(record);
  }
  return w.bytes();
}

Report DecodeReport(const std::string& bytes, int rank) {
  WireReader in(bytes, Cat("rank ", rank, "'s batch report"));
  Report r;
  r.signal = static_cast<int>(in.U32());
  r.room = static_cast<int>(in.U32());
  r.outstanding = static_cast<int>(in.U32());
  r.status.queued = static_cast<int>(in.U32());
  r.status.active_rows = static_cast<int>(in.U32());
  r.status.user_rows = static_cast<int>(in.U32());
  r.status.tokens_per_s = in.F64();
  r.status.tokens_sampled = in.I64();
  const uint32_t n = in.U32();
  for (uint32_t i = 0; i < n; ++i) {
    const bool error = in.U32() != 0;
    r.records.emplace_back(error, in.Str());
  }
  return r;
}

enum class RoundState : uint32_t { kGoOn = 0, kCancel = 1, kStop = 2 };

// What rank 0 decides in a round.
struct Decision {
  RoundState state = RoundState::kGoOn;
  int signal = 0;  // the signal that cancelled the run (kCancel, kStop), else 0
  BatchCounts counts;
  std::vector<std::vector<uint32_t>> assigned;  // [ranks][jobs given this round]: job indices
};

std::string Encode(const Decision& d) {
  WireWriter w;
  w.U32(static_cast<uint32_t>(d.state));
  w.U32(static_cast<uint32_t>(d.signal));
  w.U32(static_cast<uint32_t>(d.counts.done));
  w.U32(static_cast<uint32_t>(d.counts.failed));
  for (const std::vector<uint32_t>& jobs : d.assigned) {
    w.U32(static_cast<uint32_t>(jobs.size()));
    for (uint32_t j : jobs) w.U32(j);
  }
  return w.bytes();
}

Decision DecodeDecision(const std::string& bytes, int ranks) {
  WireReader in(bytes, "rank 0's batch assignments");
  Decision d;
  d.state = static_cast<RoundState>(in.U32());
  d.signal = static_cast<int>(in.U32());
  d.counts.done = static_cast<int>(in.U32());
  d.counts.failed = static_cast<int>(in.U32());
  d.assigned.resize(static_cast<size_t>(ranks));
  for (std::vector<uint32_t>& jobs : d.assigned) {
    jobs.resize(in.U32());
    for (uint32_t& j : jobs) j = in.U32();
  }
  return d;
}

}  // namespace

BatchRunner::BatchRunner(Communicator& comm, ServingLoop& loop, BatchWriter* writer,
                         BatchProgress& progress, std::string model_name)
    : comm_(comm),
      loop_(loop),
      writer_(writer),
      progress_(progress),
      model_name_(std::move(model_name)) {
  WC_CHECK((comm.rank() == 0) == (writer != nullptr), "the batch writer belongs to rank 0");
}

int BatchRunner::Run(std::vector<BatchJob> jobs, BatchCounts& counts,
                     const volatile std::sig_atomic_t& signal) {
  try {
    return RunRounds(jobs, counts, signal);
  } catch (...) {
    loop_.Shutdown(ShutdownMode::kCancel);
    throw;
  }
}

int BatchRunner::RunRounds(std::vector<BatchJob>& jobs, BatchCounts& counts,
                           const volatile std::sig_atomic_t& signal) {
  const int ranks = comm_.size();
  const bool root = comm_.rank() == 0;
  // user rows plus a short queue, so the rows stay busy between rounds
  const int depth = loop_.user_rows() + std::max(1, loop_.user_rows() / 2);
  auto finished = std::make_shared<FinishedQueue>();
  int outstanding = 0;
  bool cancelled = false;
  // Rank 0's bookkeeping.
  size_t next = 0;  // the next job to hand out
  int cancel_signal = 0;
  ran_per_rank_.assign(root ? static_cast<size_t>(ranks) : 0, 0);
  auto last_update = std::chrono::steady_clock::now() - std::chrono::seconds(1);

  for (;;) {
    Report mine;
    const auto wait = std::chrono::milliseconds(outstanding > 0 ? 50 : 0);
    for (const auto& [job, result] : finished->Take(wait)) {
      --outstanding;
      if (result.reason == StopReason::kCancelled) continue;  // not written: a rerun runs it
      speculation_.proposed += result.spec_proposed;
      speculation_.accepted += result.spec_accepted;
      const BatchJob& j = jobs[job];
      if (result.reason == StopReason::kError)
        mine.records.emplace_back(true, ErrorRecord(j.line, j.custom_id, ErrorCode(result),
                                                    Cat("line ", j.line, ": ", result.error)));
      else
        mine.records.emplace_back(false,
                                  SuccessRecord(j.line, j.custom_id, j.chat, model_name_, result));
    }
    mine.signal = signal;
    mine.room = cancelled ? 0 : std::max(0, depth - outstanding);
    mine.outstanding = outstanding;
    mine.status = loop_.status();
    const std::vector<std::string> reports = AllGatherBytes(comm_, Encode(mine));

    std::string decision_bytes;
    if (root) {
      Decision d;
      d.assigned.resize(static_cast<size_t>(ranks));
      std::vector<int> room(static_cast<size_t>(ranks));
      bool idle = true;  // no rank holds a request
      ServingStatus all;
      for (int r = 0; r < ranks; ++r) {
        const Report rep = DecodeReport(reports[static_cast<size_t>(r)], r);
        for (const auto& [error, record] : rep.records) {
          writer_->Append(record);
          ++counts.done;
          counts.failed += error ? 1 : 0;
        }
        ran_per_rank_[static_cast<size_t>(r)] += static_cast<int>(rep.records.size());
        if (rep.signal != 0 && cancel_signal == 0) {
          cancel_signal = rep.signal;
          progress_.Note(Cat("batch: ", rep.signal == SIGINT ? "SIGINT" : "SIGTERM",
                             ranks > 1 ? Cat(" on rank ", r) : std::string(),
                             ": cancelling the rest; what is written stays, a rerun resumes"));
        }
        room[static_cast<size_t>(r)] = rep.room;
        idle = idle && rep.outstanding == 0;
        all.queued += rep.status.queued;
        all.active_rows += rep.status.active_rows;
        all.user_rows += rep.status.user_rows;
        all.tokens_per_s += rep.status.tokens_per_s;
        all.tokens_sampled += rep.status.tokens_sampled;
      }
      // In input order, one job at a time to each rank with room in turn.
      bool handed_out = false;
      for (bool any = cancel_signal == 0; any && next < jobs.size();) {
        any = false;
        for (int r = 0; r < ranks && next < jobs.size(); ++r) {
          if (room[static_cast<size_t>(r)] == 0) continue;
          --room[static_cast<size_t>(r)];
          d.assigned[static_cast<size_t>(r)].push_back(static_cast<uint32_t>(next++));
          any = handed_out = true;
        }
      }
      const bool all_handed_out = next == jobs.size() || cancel_signal != 0;
      if (idle && !handed_out && all_handed_out)
        d.state = RoundState::kStop;
      else
        d.state = cancel_signal != 0 ? RoundState::kCancel : RoundState::kGoOn;
      d.signal = cancel_signal;
      d.counts = counts;
      all.queued += static_cast<int>(jobs.size() - next);
      status_ = all;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_update >= std::chrono::milliseconds(250)) {
        last_update = now;
        progress_.Update(counts.done, counts.failed, all);
      }
      decision_bytes = Encode(d);
    }
    BroadcastBytes(comm_, &decision_bytes, 0);
    const Decision d = DecodeDecision(decision_bytes, ranks);
    counts = d.counts;
    for (uint32_t job : d.assigned[static_cast<size_t>(comm_.rank())]) {
      WC_CHECK(job < jobs.size(), "rank 0 assigned job ", job, " of ", jobs.size());
      jobs[job].request.observer = std::make_shared<BatchObserver>(finished, job);
      loop_.Submit(std::move(jobs[job].request));
      ++outstanding;
    }
    if (d.state == RoundState::kCancel && !cancelled) {
      cancelled = true;
      loop_.Shutdown(ShutdownMode::kCancel);  // the cancelled come back through `finished`
    }
    if (d.state == RoundState::kStop) {
      loop_.Shutdown(ShutdownMode::kDrain);
      // The whole job's token counts, now that every loop has stopped counting.
      const ServingStatus st = loop_.status();
      constexpr int kFigures = 8;
      const int64_t mine_figures[kFigures] = {st.tokens_sampled,     st.tokens_prefilled,
                                              st.prefix_hits,        st.prefix_cached_tokens,
                                              st.prefix_disk_loaded, st.prefix_disk_saved,
                                              speculation_.proposed, speculation_.accepted};
      std::vector<int64_t> all(static_cast<size_t>(ranks) * kFigures);  // [ranks][kFigures]
      comm_.AllGather(mine_figures, sizeof mine_figures, all.data());
      int64_t* sums[kFigures] = {&status_.tokens_sampled,     &status_.tokens_prefilled,
                                 &status_.prefix_hits,        &status_.prefix_cached_tokens,
                                 &status_.prefix_disk_loaded, &status_.prefix_disk_saved,
                                 &speculation_.proposed,      &speculation_.accepted};
      for (int f = 0; f < kFigures; ++f) {
        *sums[f] = 0;
        for (int r = 0; r < ranks; ++r) *sums[f] += all[static_cast<size_t>(r) * kFigures + f];
      }
      return d.signal;
    }
  }
}

}  // namespace wc
