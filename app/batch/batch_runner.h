// `wormchat batch`: the requests of a batch run through a serving loop, each record written (and
// fsynced) by the calling thread as its request finishes; records are never written twice, and a
// cancelled request writes none, so a rerun resumes it.
#pragma once

#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "app/batch/batch_output.h"
#include "app/batch/batch_progress.h"
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
  // `loop` and the rest must outlive the runner. `model_name` is the records' "model".
  BatchRunner(ServingLoop& loop, BatchWriter& writer, BatchProgress& progress,
              std::string model_name);

  // Submits `jobs` in order and writes each record as it finishes, updating `counts` and the
  // progress a few times a second. When `signal` becomes non-zero, cancels what has not finished
  // (nothing more is written for it) and returns true once the loop has stopped; else returns false
  // after every job has its record, with the loop drained. Throws wc::Error if a record cannot be
  // written (the loop is cancelled first).
  bool Run(std::vector<BatchJob> jobs, BatchCounts& counts,
           const volatile std::sig_atomic_t& signal);

 private:
  bool RunJobs(std::vector<BatchJob>& jobs, BatchCounts& counts,
               const volatile std::sig_atomic_t& signal);
  ServingLoop& loop_;
  BatchWriter& writer_;
  BatchProgress& progress_;
  std::string model_name_;
};

}  // namespace wc
