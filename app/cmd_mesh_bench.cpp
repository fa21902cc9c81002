// `wormchat mesh-bench`: the seed's FlashDecode experiments on the emulated Wormhole mesh, as a CSV
// (one row per configuration) and optionally a PNG plot.
#include <cstdio>
#include <memory>

#include "app/commands.h"
#include "app/mesh_plots.h"
#include "app/model_options.h"
#include "app/progress.h"
#include "attention/mesh_experiments.h"
#include "util/error.h"

namespace wc {
namespace {

struct MeshBenchCmdOptions {
  std::string experiment;  // seed-fig3-4 | seed-fig5 | all
  std::string csv;         // output CSV
  std::string plot;        // optional output PNG
  int threads = 0;         // host threads for the planning runs (0 = all cores)
};

void RunMeshBench(const MeshBenchCmdOptions& o) {
  ApplyThreads(o.threads);
  Progress progress("mesh-bench " + o.experiment, MeshExperimentConfigs(o.experiment).size(),
                    "configurations");
  const std::vector<MeshBenchRow> rows = RunMeshExperiment(
      o.experiment, [&progress](int64_t done, int64_t) { progress.Update(done); });
  progress.Finish();
  WriteMeshBenchCsv(o.csv, rows);
  std::printf("mesh-bench %s: %zu configurations -> %s\n", o.experiment.c_str(), rows.size(),
              o.csv.c_str());
  for (const std::string& line : MeshBenchSummary(rows)) std::printf("  %s\n", line.c_str());
  if (!o.plot.empty()) {
    PlotMeshBench(rows, o.plot);
    std::printf("plot -> %s\n", o.plot.c_str());
  }
}

}  // namespace

void RegisterMeshBench(CLI::App& app) {
  auto o = std::make_shared<MeshBenchCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "mesh-bench", "Replay the seed's FlashDecode experiments on the emulated Wormhole mesh");
  std::string names;
  for (const auto& n : MeshExperimentNames()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("--experiment", o->experiment, "Experiment: " + names)->required();
  cmd->add_option("--csv", o->csv, "Output CSV, one row per configuration")->required();
  cmd->add_option("--plot", o->plot, "Also draw the figures into this PNG (needs gnuplot)");
  AddThreadsOption(cmd, o->threads);
  cmd->callback([o] { RunMeshBench(*o); });
}

}  // namespace wc
