// The tensor-parallel steps of one decoder layer, behind the few calls the layer's graph makes
// whether it runs the whole model or a rank's slice (model/<arch>/<arch>_graph.cpp, through
// model/layer_context.h): which interrupt a matmul polls, which bias a matmul adds, a K/V write's
// error, and the sum of the partial outputs.
//
// Whole model: the trivial case. Matmuls add their biases and poll the interrupt between slices,
// the interrupt is also polled between layers, a K/V write error propagates at once, and Sum has
// nothing to add (the layer's outputs are already whole).
//
// Tensor parallel (seed 001): a rank's dense and fc2 give partial sums of the layer's output; they
// meet in one all-reduce per Sum, added in rank order (dist/communicator.h), and the biases of
// those matmuls are added once, after the sum. The same collective carries the vote as integers
// beside the floats: whether rank 0's interrupt fired, and how many ranks hold a K/V write error.
// So every rank stops at the same layer (none is left waiting in a collective the others skip),
// and a write error on any rank makes every rank throw the first such rank's error ("rank r: ..."
// for r > 0). A rank's matmuls are not interrupted mid-layer and nothing is polled between layers:
// the vote at each Sum replaces both.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "util/error.h"

namespace wc {

class Communicator;

// One Forward's: made at its start, used by every layer in turn on the calling thread.
class PartialSums {
 public:
  using Interrupt = std::function<bool()>;
  // Thrown by Poll and Sum, and by matmuls polling matmul_interrupt(), once the interrupt fires
  // (on every rank at the same Sum); DecoderModel::Forward catches it.
  struct Interrupted {};

  // group: the tensor-parallel group of a rank's slice, or null for the whole model.
  // interrupted: may be empty (a follower rank's always is); must outlive this object.
  PartialSums(Communicator* group, const Interrupt& interrupted)
      : group_(group), interrupted_(interrupted) {}

  // Between layers: the whole model polls the interrupt; a rank does nothing (it votes in Sum).
  void Poll() const;
  // What a matmul polls between slices of its rows: the interrupt (whole model) or nothing.
  const Interrupt& matmul_interrupt() const { return group_ ? no_interrupt_ : interrupted_; }
  // The bias a matmul whose output goes to Sum adds itself: `bias` (null if empty) for the whole
  // model; null for a rank, whose Sum adds it once to the total.
  const float* OwnBias(const std::vector<float>& bias) const {
    return group_ || bias.empty() ? nullptr : bias.data();
  }
  // Runs a K/V write. Whole model: its wc::Error propagates. A rank holds the error for the vote
  // at the next Sum and returns false: the layer skips the rest of its writes and its attention and
  // goes on to the Sum, so that no rank waits on this one.
  template <typename Write>
  bool TryWrite(Write&& write) {
    if (!group_) {
      write();
      return true;
    }
    try {
      write();
      return true;
    } catch (const Error& e) {
      error_ = e.what();
      return false;
    }
  }
  // Whether a rank holds a K/V write error (always false for the whole model).
  bool failed() const { return !error_.empty(); }
  // out [n, hidden] = the sum over the ranks of out, then + each non-empty bias [hidden] of
  // `biases` in turn, to every row; with the vote: throws the first failing rank's wc::Error, else
  // Interrupted if rank 0's interrupt fired. Whole model: nothing to do (out is whole already,
  // its biases added by its matmuls). Throws wc::Error if the collective fails.
  void Sum(std::vector<float>& out, std::initializer_list<const std::vector<float>*> biases);

 private:
  Communicator* group_;
  const Interrupt& interrupted_;
  const Interrupt no_interrupt_;
  std::string error_;  // this rank's K/V write error, held for the vote
};

}  // namespace wc
