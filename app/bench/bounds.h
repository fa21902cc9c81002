// What the benchmarks measure of the machine and the process: streaming read bandwidth (a plain
// stream, and the decode's own weight stream), peak and current RSS, the thread count in use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wc {

class PageBuffer;
struct ModelWeights;

// One multi-threaded streaming read of `buf` (1 MiB blocks handed out dynamically, so a thread the
// host deschedules does not hold the others up); returns seconds and adds the sum to *sink.
double StreamReadSeconds(const PageBuffer& buf, uint64_t* sink);

// One packed matrix as a decode step streams it: `panels` panels of `panel_bytes` each (a multiple
// of 64), contiguous from `data` (PackedMatrix's panels or a bfp matrix's tiles: PageBuffer
// memory, 2 MiB aligned, huge pages).
struct StreamedMatrix {
  const uint8_t* data = nullptr;
  int64_t panels = 0, panel_bytes = 0;
  int64_t bytes() const { return panels * panel_bytes; }
};

// The packed matrices one decode step reads, in the order it reads them: each layer's QKV, dense,
// fc1, fc2, then the LM head (the embedding row and the vectors are a few KiB, not counted).
std::vector<StreamedMatrix> DecodeWeightStreams(const ModelWeights& w);

// The read bandwidth bound of decode: reads the decode's own weights, in its order and its access
// pattern, on its threads, and keeps the best pass. A pass walks the matrices in order, one
// parallel region each (as each GEMM is one); each thread takes its static share of the panels
// (kernels/gemm/gemm.cpp's split) and reads them 4 panels at a time, a 64-byte line of each in turn
// (the 4-panel register tiles of a 1-row GEMM), with no software prefetch (the GEMMs issue none:
// the hardware prefetcher follows the 4 streams). The caller interleaves passes with the measured
// runs (one before and one after each), so a faster moment of the bus than the runs saw is in the
// bound, and no run can stream faster than the best pass unless the bus changed within a pass.
class DecodeReadProbe {
 public:
  // Every matrix's panel_bytes must be a multiple of 64. `threads`: the OpenMP threads a pass uses.
  DecodeReadProbe(std::vector<StreamedMatrix> matrices, int threads);

  // One timed pass over every byte; returns its bytes per second.
  double Pass();

  // Bytes per second of the best pass (0 before the first).
  double best() const { return best_; }
  int passes() const { return passes_; }
  int threads() const { return threads_; }
  int64_t bytes() const { return bytes_; }  // one pass's
  // Of the last pass: the sum (mod 2^64) of every little-endian 64-bit word of every matrix, each
  // read once (tests check that a pass reads every byte exactly once).
  uint64_t checksum() const { return checksum_; }
  // One line: how the bound was measured (bytes, passes, threads, pattern, page size).
  std::string Describe() const;

 private:
  std::vector<StreamedMatrix> matrices_;
  int threads_ = 1;
  int64_t bytes_ = 0;
  double best_ = 0;
  int passes_ = 0;
  uint64_t checksum_ = 0;
};

// The sum DecodeReadProbe::checksum gives, computed serially (for tests).
uint64_t WordSum(const uint8_t* data, int64_t bytes);

// The transparent huge pages setting (/sys/kernel/mm/transparent_hugepage/enabled: "always",
// "madvise" or "never"; "" where absent) and the bytes of this process's anonymous memory in huge
// pages (AnonHugePages of /proc/self/smaps_rollup; -1 where absent).
std::string TransparentHugePages();
int64_t AnonHugePageBytes();

// Peak resident set of this process, bytes (VmHWM of /proc/self/status).
int64_t PeakRssBytes();
// Resident set now, bytes (VmRSS).
int64_t RssBytes();

// The OpenMP threads a run with --threads `threads` uses (0: all).
int BenchThreads(int threads);

}  // namespace wc
