// `wormchat batch`: the requests of a batch run through the serving loops of one or more ranks
// (data parallel under mpirun: each rank a whole model and its own loop), each record written and
// fsynced by rank 0 once, as its request finishes; a cancelled request writes none, so a rerun
// resumes it.
//
// The ranks meet in rounds, a few dozen a second (one rank: the same rounds, every collective a
// copy). In a round every rank reports (all-gather) the records it finished since the last one,
// how many more requests it has room for (its user rows plus a short queue, less what it holds)
// and its loop's status; rank 0 writes the records, hands out the next requests in input order,
// one at a time to each rank with room in turn (so a rank that finishes early takes more), and
// broadcasts the assignments with whether to go on, cancel or stop. Every request's result is
// independent of its rank and batch mix (the serving loop's contract), so the records equal a
// single-process run's, in another order.
#pragma once

#include <csignal>
#include <string>
#include <vector>

#include "app/batch/batch_output.h"
#include "app/batch/batch_progress.h"
#include "dist/communicator.h"
#include "serving/serving_loop.h"

namespace wc {

// A good input line's request, ready to submit (no observer yet).
struct BatchJob {
  int line = 0;  // 1-based input line: the record's id
  std::string custom_id;
  bool chat = false;  // chat.completion record, else text_completion
  Request request;
};

struct BatchCounts {
  int done = 0;    // requests with a record, earlier runs' included
  int failed = 0;  // of those, error records
};

class BatchRunner {
 public:
  // `loop` and the rest must outlive the runner. `writer` is rank 0's (null on the others).
  // `model_name` is the records' "model".
  BatchRunner(Communicator& comm, ServingLoop& loop, BatchWriter* writer, BatchProgress& progress,
              std::string model_name);

  // Runs `jobs` (the same list on every rank) across the ranks, writing each record on rank 0 as it
  // finishes and updating `counts` (equal on every rank when Run returns) and rank 0's progress.
  // When `signal` becomes non-zero on any rank, every rank cancels what has not finished (nothing
  // more is written for it) and Run returns that signal's number, on every rank, once the loops
  // have stopped; else it returns 0 after every job has its record, with the loops drained. Throws
  // wc::Error if a record cannot be written or a collective fails (this rank's loop is cancelled
  // first).
  int Run(std::vector<BatchJob> jobs, BatchCounts& counts,
          const volatile std::sig_atomic_t& signal);

  // After Run, on rank 0: the requests each rank ran (records it produced), [ranks].
  const std::vector<int>& ran_per_rank() const { return ran_per_rank_; }
  // After Run, on rank 0: the whole job's loop status (sums over the ranks).
  const ServingStatus& status() const { return status_; }
  // After Run, on rank 0: speculative decoding's tokens proposed and accepted, summed over the
  // requests that ended with a record, on every rank.
  const BatchSpeculation& speculation() const { return speculation_; }

 private:
  int RunRounds(std::vector<BatchJob>& jobs, BatchCounts& counts,
                const volatile std::sig_atomic_t& signal);
  Communicator& comm_;
  ServingLoop& loop_;
  BatchWriter* writer_;
  BatchProgress& progress_;
  std::string model_name_;
  std::vector<int> ran_per_rank_;
  ServingStatus status_;
  BatchSpeculation speculation_;  // this rank's until the end, then rank 0's the whole job's
};

}  // namespace wc
