// Ranks as threads of one process: R communicators whose collectives meet in shared memory, so
// tests (and the thread sanitizer) run tensor-parallel code without mpirun. Rank r's communicator
// must be used by one thread at a time; each collective must be entered by every rank, as with MPI.
#pragma once

#include <memory>
#include <vector>

#include "dist/communicator.h"

namespace wc {

// The R communicators of one group, [R]; rank r is element r.
std::vector<std::unique_ptr<Communicator>> MakeThreadGroup(int ranks);

}  // namespace wc
