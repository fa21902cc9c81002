// What the benchmarks measure of the machine and the process: streaming read bandwidth, peak RSS,
// the thread count in use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace wc {

class PageBuffer;

// One multi-threaded streaming read of `buf` (1 MiB blocks handed out dynamically, so a thread the
// host deschedules does not hold the others up); returns seconds and adds the sum to *sink.
double StreamReadSeconds(const PageBuffer& buf, uint64_t* sink);

// Bytes per second of the best of `repeats` streaming reads of a `bytes` buffer (filled first, one
// untimed read before), far larger than the caches for the bandwidth of memory.
double MeasureReadBandwidth(size_t bytes, int repeats);

// Peak resident set of this process, bytes (VmHWM of /proc/self/status).
int64_t PeakRssBytes();

// The OpenMP threads a run with --threads `threads` uses (0: all).
int BenchThreads(int threads);

}  // namespace wc
