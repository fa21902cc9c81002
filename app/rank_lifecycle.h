// What each rank of an mpirun job does with a command. Only the commands that split their work
// across the ranks run under several (the others are refused before they start); with
// --tensor-parallel R, rank 0 runs the command and drives the model, and every other rank loads its
// slice, follows rank 0's forward passes until rank 0 stops them, and ends there, by a return
// value, with status 0. The model loading itself is app/model_loader.h.
#pragma once

#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

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

// Under mpirun with several ranks only the commands that split their work across the ranks run:
// batch (its requests shared out across the ranks), bench ranks, and a command given
// --tensor-parallel. For the command CLI11 has parsed in `app` (the top level), the one-line
// refusal (without "wormchat: error: ") when it is another and mpirun started several ranks; ""
// when it may run, or no command was parsed. When parsing stopped early (a usage error, --help,
// --version), the command as far as CLI11 got: main() refuses before reporting those, so the
// refusal comes first as if the flags had not been looked at.
std::string RanksRefusalMessage(const CLI::App& app);

// RanksRefusalMessage's refusal, thrown by the check RefuseCommandsThatRunInOneProcess adds.
// main() prints what() on rank 0 only and exits with kExitUsage (app/cli_errors.h).
class RanksRefusal : public std::runtime_error {
 public:
  explicit RanksRefusal(const std::string& message) : std::runtime_error(message) {}
};

// Has `app` (the top level, its commands registered) throw RanksRefusal once a command line is
// parsed and checked by CLI11, before any command's callback runs, when RanksRefusalMessage
// refuses it. Sets `app`'s parse-complete callback.
void RefuseCommandsThatRunInOneProcess(CLI::App& app);

}  // namespace wc
