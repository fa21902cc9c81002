// Each GEMM call's time and work while a GemmProfile records, kept by the matrix's role and the
// kernel that ran it: how `bench model` reports each matrix's achieved rate against the peak of
// the instructions its kernel runs on this CPU (kernels/peak.h), and what share of a pass is not
// in the GEMMs at all. While nothing records, a call costs one relaxed atomic load.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/gemm/format_table.h"
#include "kernels/gemm/packed_matrix.h"

namespace wc {

struct GemmProfileEntry {
  std::string matrix;  // the role: "self_attention.query_key_value", "q_proj+k_proj+v_proj", ...
  std::string kernel;  // the kernel the calls ran (format_table.h's GemmKernelLabel)
  GemmPeak peak = GemmPeak::kF32Fma;  // the instructions that bound that kernel
  int64_t calls = 0;
  int64_t tokens = 0;  // summed over the calls
  double flops = 0;    // 2 a multiply-add, summed over the calls
  double seconds = 0;  // wall time of the calls, the input's packing included
};

// Records from construction to destruction; one at a time in a process (a second throws
// wc::Error). Entries are kept per (matrix, kernel): one role whose calls change kernel with
// their size (a chunked MLP's last, short chunk) shows as two.
class GemmProfile {
 public:
  GemmProfile();
  ~GemmProfile();
  GemmProfile(const GemmProfile&) = delete;
  GemmProfile& operator=(const GemmProfile&) = delete;

  // Forgets what was recorded so far (recording goes on).
  void Clear();
  // The entries, in the order of each one's first call.
  std::vector<GemmProfileEntry> Entries() const;

  // Whether a profile records now (callers build a matrix's role name only then).
  static bool Recording();
};

// Times one GEMM call (or a group's, named "a+b+c") of n_tokens over w, the group's first matrix,
// doing `flops` in all, when a profile records: from construction to destruction, on the thread
// that runs the call (outside any parallel region).
class GemmCallTimer {
 public:
  GemmCallTimer(std::string matrix, const PackedMatrix& w, int64_t n_tokens, double flops);
  ~GemmCallTimer();
  GemmCallTimer(const GemmCallTimer&) = delete;
  GemmCallTimer& operator=(const GemmCallTimer&) = delete;

 private:
  bool on_;
  std::string matrix_;
  const PackedMatrix* w_;
  int64_t n_tokens_;
  double flops_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace wc
