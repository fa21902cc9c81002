// OpenMP work on a thread of its own, so its pool of workers ends with it.
//
// libgomp keeps the workers of each thread that opened a parallel region for as long as that
// thread lives, and once it manages more threads than there are cores it cuts every worker's spin
// at a barrier to 1,000 turns: each parallel region then ends in a futex wait, which on a 2-core
// machine cost decode several percent (docs/performance.md, "OpenMP's pools"). The serving loop's
// thread runs the model; parallel work on any other long-lived thread while the loop exists (the
// model's packing at load, `bench model`'s peak and read-bound passes) goes through here.
#pragma once

#include <omp.h>

#include <exception>
#include <thread>
#include <utility>

namespace wc {

// Runs fn() on a new thread with the calling thread's OpenMP thread count (each thread's own
// setting) and waits for it; rethrows what fn threw.
template <class Fn>
void RunInOwnOpenMPPool(Fn&& fn) {
  const int threads = omp_get_max_threads();
  std::exception_ptr failed;
  std::thread worker([&] {
    try {
      omp_set_num_threads(threads);
      std::forward<Fn>(fn)();
    } catch (...) {
      failed = std::current_exception();
    }
  });
  worker.join();
  if (failed) std::rethrow_exception(failed);
}

}  // namespace wc
