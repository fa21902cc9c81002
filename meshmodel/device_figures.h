// tt-metal's published device-only figures for Falcon on Wormhole: what the mesh model is tested
// against (meshmodel/README.md, "Against the device"). Each is kernel time summed over the ops of
// one step as tt-metal's profiler reports it (no host dispatch, no sampling), for the program
// meshmodel/tt_graph.h records. None of these numbers is used by the model; they are the test.
#pragma once

#include <string>
#include <vector>

#include "meshmodel/tt_graph.h"

namespace wc {

struct DeviceFigure {
  std::string preset;  // model/config.h preset
  std::string mesh;    // mesh/wormhole_spec.h preset
  TtPhase phase = TtPhase::kDecode;
  int users = 32;       // decode: user rows; prefill: 1
  int ctx = 128;        // decode: cached positions; prefill: the prompt's tokens
  double measured = 0;  // decode: tokens/s per user; prefill: prompt tokens/s
  std::string source;   // file and commit (or README version) the figure is read from
};

// Every figure of the table.
const std::vector<DeviceFigure>& DeviceFigures();

}  // namespace wc
