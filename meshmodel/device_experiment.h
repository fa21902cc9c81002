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

struct DeviceExperimentOptions {
  std::string csv, json, plot;
};
void RunDeviceExperimentCommand(const DeviceExperimentOptions& o);

}  // namespace wc
