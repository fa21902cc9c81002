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

// Writes `text` and a newline to `path` (a bench's --json). Throws wc::Error naming --json and the
// path if it cannot be written.
void WriteJsonOutput(const std::string& path, const std::string& text);

// The OpenMP threads a run with --threads `threads` uses (0: all).
int BenchThreads(int threads);

}  // namespace wc
