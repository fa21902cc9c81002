// `wormchat bench ranks`: runs past one process, under mpirun -np R (or alone: R = 1).
#pragma once

#include <CLI/CLI.hpp>

namespace wc {

void RegisterBenchRanks(CLI::App* bench);

}  // namespace wc
