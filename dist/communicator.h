// The one interface through which wormchat runs past one process (issue 19): ranks, broadcast,
// all-reduce and all-gather. model/ and serving/ call it; only dist/ knows MPI. Without MPI (or
// outside mpirun) World() is a single-process communicator: rank 0 of 1, every collective a copy.
//
// Determinism: AllReduceSum adds the ranks' contributions in rank order, element by element, on
// every rank ((r0 + r1) + r2 ...), so a given number of ranks gives the same bits run to run and on
// every rank (MPI's own reduction order is not guaranteed).
//
// Faults: every collective waits at most timeout_seconds() for the other ranks; past that it
// throws wc::Error naming the collective, this rank and the wait, and the caller ends the job
// (Abort) instead of hanging on a rank that died.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace wc {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ranks on this host (sharing its memory and cores), this one included.
  virtual int local_size() const { return 1; }
  // "single process" or "MPI (Open MPI 4.1.4), R ranks".
  virtual std::string Describe() const = 0;

  // root's `bytes` bytes at `data` are copied to `data` on every rank.
  virtual void Broadcast(void* data, size_t bytes, int root) = 0;
  // out [size() x bytes] = every rank's `bytes` bytes at `in`, in rank order.
  virtual void AllGather(const void* in, size_t bytes, void* out) = 0;
  // data[i] = the sum over ranks of data[i], added in rank order (see above). n elements.
  void AllReduceSum(float* data, size_t n) { AllReduceSum(data, n, nullptr, 0); }
  // The same, and in the same collective ints[j] = the sum over ranks of ints[j] (n_ints
  // elements, exact): integers that ride with the floats, e.g. the ranks' votes on whether to go
  // on. One call in reduce_stats; its bytes count both.
  void AllReduceSum(float* data, size_t n, int32_t* ints, size_t n_ints);
  virtual void Barrier() = 0;
  // Ends every rank of the job with exit status `code` (after printing the caller's error). The
  // single-process communicator just exits.
  [[noreturn]] virtual void Abort(int code) = 0;

  double timeout_seconds() const { return timeout_s_; }
  void set_timeout_seconds(double s) { timeout_s_ = s; }
  // Whether a collective timed out or failed: the group is broken, and a caller cleaning up should
  // not start another collective (it would only wait out the timeout again).
  bool broken() const { return broken_; }

  // What AllReduceSum has done since construction (or reset): calls, bytes summed per rank,
  // and wall seconds inside it (waiting for the other ranks included). For benchmarks.
  struct ReduceStats {
    int64_t calls = 0;
    double bytes = 0, seconds = 0;
  };
  const ReduceStats& reduce_stats() const { return reduce_stats_; }
  void reset_reduce_stats() { reduce_stats_ = {}; }

 protected:
  void MarkBroken() { broken_ = true; }

 private:
  double timeout_s_ = 600;
  std::atomic<bool> broken_{false};
  ReduceStats reduce_stats_;
};

// The process's communicator. The first call decides: MPI's world when wormchat was built with MPI
// and runs under mpirun (MPI is initialized then, and finalized at exit), else single-process.
// WORMCHAT_COLLECTIVE_TIMEOUT (seconds) overrides the default wait of 600 s.
Communicator& World();

// World() if it has been called, else null (an error handler's question: are other ranks waiting
// on this one?).
Communicator* WorldIfStarted();

// A single-process communicator (tests, and World() outside mpirun).
std::unique_ptr<Communicator> MakeSingleProcessCommunicator();

}  // namespace wc
