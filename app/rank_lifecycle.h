// What each rank of an mpirun job does with a command. With --tensor-parallel R, rank 0 runs the
// command and drives the model, and every other rank loads its slice, follows rank 0's forward
// passes until rank 0 stops them, and ends there, by a return value, with status 0. The model
// loading itself is app/model_loader.h.
#pragma once

#include "app/model_options.h"

namespace wc {

// What this rank does with a command that takes --tensor-parallel.
enum class RankRole {
  kRunsCommand,  // rank 0 of the tensor-parallel group, or no tensor parallelism: run it
  kFollowed,     // another rank of the group: it has followed rank 0 until rank 0 stopped it,
                 // and the command ends here with status 0 (return from its callback)
};

// A tensor-parallel rank other than 0 loads its slice (LoadModel) and follows rank 0's forward
// passes (model/tensor_parallel.h's FollowSteps) until rank 0 is done, then returns kFollowed;
// everywhere else it returns kRunsCommand at once. Commands with --tensor-parallel call it first,
// before anything only rank 0 does (reading input, writing output), and return on kFollowed.
// Throws wc::Error for bad options or files, or when rank 0 is gone.
[[nodiscard]] RankRole FollowUnlessTensorParallelLeader(const ModelRunOptions& o);

}  // namespace wc
