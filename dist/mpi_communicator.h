// Open MPI behind dist/communicator.h (the only file that includes mpi.h is its .cpp, built when
// CMake finds MPI; without it the function below returns null).
#pragma once

#include <memory>

#include "dist/communicator.h"

namespace wc {

// MPI's world communicator when the process was started by mpirun (Open MPI's OMPI_COMM_WORLD_SIZE
// or PMI's PMI_SIZE is set) and wormchat was built with MPI: initializes MPI (threads: funneled)
// and finalizes it at exit. Null otherwise.
std::unique_ptr<Communicator> MakeMpiWorldIfLaunched();

}  // namespace wc
