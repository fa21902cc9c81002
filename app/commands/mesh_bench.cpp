// `wormchat mesh-bench`: the seed's FlashDecode experiments on the emulated Wormhole mesh, as a CSV
// (one row per configuration) and optionally a PNG plot.
#include <cstdio>
#include <memory>

#include "app/commands/commands.h"
#include "app/model_options.h"
#include "app/progress.h"
#include "mesh/experiments.h"
#include "mesh/plot_writer.h"
#include "meshmodel/decode_step_experiment.h"
#include "meshmodel/device_experiment.h"
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

constexpr const char* kDecodeStep = "falcon40b-decode";
constexpr const char* kDevice = "falcon-device";

void RegisterMeshBench(CLI::App& app) {
  auto o = std::make_shared<MeshBenchCmdOptions>();
  auto d = std::make_shared<DecodeStepCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "mesh-bench", "Replay the seed's FlashDecode experiments on the emulated Wormhole mesh");
  std::string names;
  for (const auto& n : MeshExperimentNames()) names += (names.empty() ? "" : ", ") + n;
  names += Cat(", ", kDecodeStep, " (the whole decode step of a Falcon model), ", kDevice,
               " (the model against tt-metal's device figures)");
  cmd->add_option("--experiment", o->experiment, "Experiment: " + names)->required();
  cmd->add_option("--csv", o->csv,
                  "Output CSV, one row per configuration (falcon40b-decode: per scenario and op)");
  cmd->add_option("--plot", o->plot, "Also draw the figures into this PNG (needs gnuplot)");
  auto estimates_csv = std::make_shared<std::string>();
  CLI::Option* estimates_flag = cmd->add_option(
      "--estimates-csv", *estimates_csv,
      "falcon-device: also write the estimates for the layouts tt-metal publishes no figure for "
      "(Falcon-RW, Falcon3 on n150, t3k, galaxy) to this CSV");
  AddThreadsOption(cmd, o->threads);
  // falcon40b-decode only.
  std::vector<CLI::Option*> decode_flags = {
      cmd->add_option("--model", d->model_dir,
                      "falcon40b-decode: the model's config.json directory (default: --preset)"),
      cmd->add_option("--preset", d->preset,
                      "falcon40b-decode: falcon-40b (default), falcon-7b or tiny"),
      cmd->add_option("--mesh", d->step.mesh,
                      "falcon40b-decode: n150, n300, n300x2, t3k (default) or galaxy"),
      cmd->add_option("--users", d->step.users, "falcon40b-decode: user rows (default 32)"),
      cmd->add_option("--ctx", d->step.ctx,
                      "falcon40b-decode: cached positions attended (default 128)"),
      cmd->add_option("--weights-dtype", d->weights_dtype,
                      "falcon40b-decode: bf16, bfp8 (default) or bfp4"),
      cmd->add_option("--kv-dtype", d->kv_dtype, "falcon40b-decode: bf16 or bfp8 (default)"),
      cmd->add_option(
          "--attention", d->attention,
          "falcon40b-decode: flash (default) or unfused (TTNN's matmul-softmax-matmul)"),
      cmd->add_option("--phase", d->phase,
                      "falcon40b-decode: decode (default) or prefill (one user's --ctx-token "
                      "prompt)"),
      cmd->add_option("--json", d->json,
                      "falcon40b-decode, falcon-device: write the figures here as JSON")};
  cmd->callback([o, d, decode_flags, cmd, estimates_csv, estimates_flag] {
    if (estimates_flag->count() > 0 && o->experiment != kDevice)
      throw Error(Cat("--estimates-csv applies to --experiment ", kDevice, " only"));
    if (o->experiment == kDecodeStep) {
      ApplyThreads(o->threads);
      d->csv = o->csv;
      d->plot = o->plot;
      // The model and its formats: the flags that move it off tt-metal's configuration.
      for (const char* name : {"--model", "--weights-dtype", "--kv-dtype", "--attention"})
        d->formats_given = d->formats_given || cmd->count(name) > 0;
      d->users_given = cmd->count("--users") > 0;
      RunDecodeStepExperiment(*d);
      return;
    }
    if (o->experiment == kDevice) {
      for (const CLI::Option* f : decode_flags)
        if (f->count() > 0 && f->get_name() != "--json")
          throw Error(Cat(f->get_name(), " applies to --experiment ", kDecodeStep, " only"));
      RunDeviceExperimentCommand({o->csv, d->json, o->plot, *estimates_csv});
      return;
    }
    for (const CLI::Option* f : decode_flags)
      if (f->count() > 0)
        throw Error(Cat(f->get_name(), " applies to --experiment ", kDecodeStep, " only"));
    RunMeshBench(*o);
  });
}

}  // namespace wc
