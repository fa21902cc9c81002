// Several matrices applied to the same activations in one pass: Llama's q, k and v projections of
// a layer's normed input, its gate and up projections of the MLP's. The activations are packed
// once for every part whose kernel reads the same layout (GemmInput::Serves), and the parts'
// panels, numbered as one range (part 0's, then part 1's, ...), are split over the threads in one
// parallel region, so three small matrices cost one dispatch and keep both threads busy to the
// end. Each output element is Gemm's (gemm.h): the group changes no bit, only how many times the
// input is packed and the threads meet.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/packed_matrix.h"

namespace wc {

// One projection of a group: y [n_tokens, w->rows()] = x w^T (+ bias [w->rows()] unless null).
struct GemmPart {
  const PackedMatrix* w = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
};

class GemmGroup {
 public:
  // Packs x [n_tokens, x_stride] (the first cols of each row read) for the parts, which must all
  // have the same cols.
  GemmGroup(const float* x, int64_t n_tokens, int64_t x_stride, std::vector<GemmPart> parts);

  // All parts' panels (PackedMatrix::kPanelRows rows each, a part's last one partial).
  int64_t panels() const { return first_panel_.back(); }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t cols() const { return cols_; }

  // Computes the group's panels [pa, pb): split into one contiguous range a thread, or on the
  // calling thread inside a parallel region.
  void Run(int64_t pa, int64_t pb) const;

 private:
  std::vector<GemmPart> parts_;
  std::vector<GemmInput> inputs_;     // the distinct packings
  std::vector<size_t> input_of_;      // [parts] index into inputs_
  std::vector<int64_t> first_panel_;  // [parts + 1] the group's index of each part's first panel
  int64_t n_tokens_ = 0, cols_ = 0;
};

}  // namespace wc
