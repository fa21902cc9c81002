// `wormchat mesh-bench --experiment falcon-device`: the mesh model against every device-only
// figure tt-metal published for its Falcon programs (meshmodel/device_figures.h): for each row the
// model's figure, the measured one, their ratio, the ops that take the step's time, and how far
// each of today's what-ifs would move it. CSV (a row per figure), JSON, PNG.
#pragma once

#include <string>
#include <vector>

#include "meshmodel/decode_step.h"
#include "meshmodel/device_figures.h"

namespace wc {

struct DeviceRow {
  DeviceFigure figure;
  DecodeStepEstimate estimate;                           // the measured program
  double model = 0;                                      // tokens/s per user
  double ratio = 0;                                      // model / measured
  std::vector<std::pair<std::string, double>> what_ifs;  // label, tokens/s per user
};

// Every figure of DeviceFigures(), modelled.
std::vector<DeviceRow> RunDeviceExperiment();

// The layouts the model seam added, which tt-metal publishes no program or figure for (Falcon-RW:
// ALiBi, sequential; Falcon3: RMSNorm, SwiGLU, sequential): the whole step on n150, T3000 and
// Galaxy from the same op costs (decode of 32 users at 128 cached positions; a 2048-token prefill).
struct LayoutEstimate {
  std::string preset, mesh;
  TtPhase phase = TtPhase::kDecode;
  int users = 32, ctx = 128;
  std::string layout;  // LayoutDifferences
  DecodeStepEstimate estimate;
  double model = 0;  // decode tokens/s per user, prefill tokens/s
};
std::vector<LayoutEstimate> RunLayoutEstimates();

struct DeviceExperimentOptions {
  std::string csv, json, plot;
  std::string estimates_csv;  // RunLayoutEstimates, a row each
};
void RunDeviceExperimentCommand(const DeviceExperimentOptions& o);

}  // namespace wc
