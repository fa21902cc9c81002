#include "meshmodel/decode_step_experiment.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mesh/plot_writer.h"
#include "mesh/wormhole_spec.h"
#include "meshmodel/device_figures.h"
#include "meshmodel/speculation.h"
#include "model/config.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc {
namespace {

std::string AttentionName(const DecodeStepOptions& o) {
  return o.flash_decode ? "flash" : "unfused";
}

void WriteCsv(const std::string& path,
              const std::vector<std::pair<Scenario, DecodeStepEstimate>>& runs, int layers) {
  std::ostringstream out;
  out.precision(10);
  out << "scenario,mesh,chips,users,ctx,weights_dtype,kv_dtype,attention,op,per_step,us_per_step,"
         "us_per_layer,fixed_us,dram_us,compute_us,noc_us,eth_us,tokens_per_s_per_user,tokens_per_"
         "s\n";
  for (const auto& [s, e] : runs) {
    const DecodeStepOptions& o = s.options;
    const std::string head =
        Cat(s.label, ",", o.mesh, ",", e.chips, ",", o.users, ",", o.ctx, ",",
            TileFormatName(o.weights), ",", TileFormatName(e.kv), ",", AttentionName(o), ",");
    for (const StepOp& op : e.ops)
      out << head << op.name << "," << op.per_step << "," << op.us << "," << op.us / layers << ","
          << op.fixed_us << "," << op.dram_us << "," << op.compute_us << "," << op.noc_us << ","
          << op.eth_us << ",,\n";
    out << head << "total," << e.programs << "," << e.step_us << "," << e.step_us / layers << ","
        << e.fixed_us << "," << e.dram_us << "," << e.compute_us << "," << e.noc_us << ","
        << e.eth_us << "," << e.tokens_per_s_per_user << "," << e.tokens_per_s << "\n";
  }
  std::ofstream f(path);
  f << out.str();
  f.close();
  if (!f) throw Error(Cat("--csv ", path, ": cannot write"));
}

void Plot(const std::string& png,
          const std::vector<std::pair<Scenario, DecodeStepEstimate>>& runs) {
  std::vector<std::string> names;  // every op name, in first-seen order
  for (const auto& [s, e] : runs)
    for (const StepOp& op : e.ops)
      if (std::find(names.begin(), names.end(), op.name) == names.end()) names.push_back(op.name);
  std::ostringstream g;
  g << "$d << EOD\nscenario";
  for (const auto& n : names) g << " " << n;
  g << "\n";
  for (const auto& [s, e] : runs) {
    g << "\"" << s.label << "\"";
    std::map<std::string, double> us;  // op name -> us per step
    for (const StepOp& op : e.ops) us[op.name] = op.us;
    for (const auto& n : names) g << " " << (us.count(n) ? us.at(n) / 1000.0 : 0.0);
    g << "\n";
  }
  g << "EOD\n";
  g << "set terminal pngcairo size 1400,700 font ',9'\nset termoption noenhanced\n";
  g << "set output " << GnuplotQuote(png) << "\n";
  g << "set title 'Falcon decode step on the emulated Wormhole mesh: time per op (ms per token)'\n";
  g << "set style data histograms\nset style histogram rowstacked\n";
  g << "set style fill solid 0.85 border -1\nset boxwidth 0.7\nset grid ytics\n";
  g << "set key outside right top\nset xtics rotate by -35 font ',8'\n";
  g << "set ylabel 'ms per step (per token per user)'\nset yrange [0:*]\n";
  // One colour per op (gnuplot's default cycle repeats after eight).
  g << "colors = '#1f77b4 #ff7f0e #2ca02c #d62728 #9467bd #8c564b #e377c2 #7f7f7f #bcbd22 "
       "#17becf #393b79 #e7ba52 #843c39 #5254a3 #637939'\n";
  g << "plot for [i=2:" << names.size() + 1
    << "] $d using i:xtic(1) title columnheader(i) lc rgb word(colors, (i - 2) % 15 + 1)\n";
  RunGnuplot(g.str(), png);
}

// The what-ifs of the measured program that today's tt-metal has (or could have), one change each.
}  // namespace

std::vector<Scenario> TodaysWhatIfs(const DecodeStepOptions& base) {
  std::vector<Scenario> out;
  auto add = [&](const std::string& label, auto change) {
    Scenario s{label, base};
    change(s.options);
    out.push_back(s);
  };
  // The measured runs were at 1 GHz (op_costs.h); 800 MHz is the clock before 2024-05.
  add("800 MHz clock", [](DecodeStepOptions& d) { d.aiclk_ghz = 0.8; });
  add("DRAM-sharded weights", [](DecodeStepOptions& d) { d.dram_sharded = true; });
  add("2025 op floors", [](DecodeStepOptions& d) { d.op_floors_2025 = true; });
  add("2 eth links", [](DecodeStepOptions& d) { d.eth_links = 2; });  // nothing on one chip
  add("BFP4_B MLP weights", [](DecodeStepOptions& d) { d.mlp_weights = TileFormat::kBFP4; });
  add("FlashDecode", [](DecodeStepOptions& d) { d.flash_decode = true; });  // decode only
  // The di/dt workaround's 1 x 1 subblocks lifted (the prefill matmuls', and decode's few).
  add("large subblocks", [](DecodeStepOptions& d) { d.large_subblocks = true; });
  add("today's (all but 800 MHz)", [](DecodeStepOptions& d) {
    d.dram_sharded = true;
    d.op_floors_2025 = true;
    d.eth_links = 2;
    d.mlp_weights = TileFormat::kBFP4;
    d.flash_decode = true;
  });
  return out;
}

namespace {

ModelConfig ModelOf(const DecodeStepCmdOptions& o, std::string* name) {
  if (!o.model_dir.empty()) {
    if (!o.preset.empty()) throw Error("--model and --preset name two models; give one");
    *name = o.model_dir;
    return LoadConfig(o.model_dir);
  }
  *name = o.preset.empty() ? "falcon-40b" : o.preset;
  return PresetConfig(*name);
}

}  // namespace

void RunDecodeStepExperiment(DecodeStepCmdOptions o) {
  std::string model_name;
  const ModelConfig c = ModelOf(o, &model_name);
  o.step.weights = ParseTileFormat(o.weights_dtype, "--weights-dtype");
  if (!o.kv_dtype.empty()) o.step.kv = ParseTileFormat(o.kv_dtype, "--kv-dtype");
  if (o.attention != "flash" && o.attention != "unfused")
    throw Error(
        Cat("--attention '", o.attention, "' is not supported here; choose unfused or flash"));
  o.step.flash_decode = o.attention == "flash";
  if (o.phase != "decode" && o.phase != "prefill")
    throw Error(Cat("--phase '", o.phase, "' is not a phase; choose decode or prefill"));
  const bool prefill = o.phase == "prefill";
  if (prefill) {
    o.step.phase = TtPhase::kPrefill;
    if (!o.users_given) o.step.users = 1;
    if (o.step.flash_decode)
      throw Error("--attention flash is a decode what-if; prefill runs SDPA");
  }

  std::vector<Scenario> scenarios = {{"headline", o.step}};
  auto what_if = [&](const std::string& label, auto change) {
    Scenario s{label, o.step};
    change(s.options);
    scenarios.push_back(s);
  };
  for (const Scenario& s : TodaysWhatIfs(o.step)) scenarios.push_back(s);
  for (int u : {1, 8, 16, 32})
    if (u != o.step.users && !prefill)
      what_if(Cat("users ", u), [u](DecodeStepOptions& d) { d.users = u; });
  for (int ctx : {128, 512, 1024, 2047})
    if (ctx != o.step.ctx && ctx < c.max_position_embeddings)
      what_if(Cat("ctx ", ctx), [ctx](DecodeStepOptions& d) { d.ctx = ctx; });
  for (TileFormat w : {TileFormat::kBF16, TileFormat::kBFP8, TileFormat::kBFP4})
    if (w != o.step.weights)
      what_if(Cat("weights ", TileFormatName(w)), [w](DecodeStepOptions& d) { d.weights = w; });
  for (TileFormat k : {TileFormat::kBF16, TileFormat::kBFP8})
    what_if(Cat("kv ", TileFormatName(k)), [k](DecodeStepOptions& d) { d.kv = k; });
  for (const char* mesh : {"t3k", "galaxy"})
    if (o.step.mesh != mesh && c.n_head % MeshPreset(mesh).chips == 0 &&
        c.hidden_size % (32 * MeshPreset(mesh).chips) == 0)
      what_if(mesh, [mesh](DecodeStepOptions& d) { d.mesh = mesh; });

  std::vector<std::pair<Scenario, DecodeStepEstimate>> runs;
  for (const Scenario& s : scenarios) runs.emplace_back(s, EstimateDecodeStep(c, s.options));
  const DecodeStepEstimate& e = runs.front().second;
  const int layers = c.n_layers;

  const char* what = prefill ? "prefill" : "decode step";
  std::printf("%s %s on %s (%d chips): %d users, ctx %d, weights %s, KV %s, %s attention\n",
              model_name.c_str(), what, o.step.mesh.c_str(), e.chips, o.step.users, o.step.ctx,
              TileFormatName(o.step.weights), TileFormatName(e.kv),
              prefill ? "sdpa or sliced" : AttentionName(o.step).c_str());
  const std::string differences = LayoutDifferences(c);
  if (differences.empty())
    std::printf("  graph: tt-metal's %s program, %s (%.2f GHz), %d device programs\n",
                e.program.c_str(), e.graph.c_str(), e.aiclk_ghz, e.programs);
  else
    std::printf(
        "  graph: an estimate - tt-metal's %s program with the ops this layout needs (%s), %s "
        "(%.2f GHz), %d device programs; tt-metal publishes no figure to check it against\n",
        e.program.c_str(), differences.c_str(),
        e.graph == "measured" ? "its formats" : e.graph.c_str(), e.aiclk_ghz, e.programs);
  std::printf("  %-24s %6s %11s %11s %7s\n", "op", "runs", "us/step", "us/layer", "share");
  for (const StepOp& op : e.ops)
    std::printf("  %-24s %6d %11.1f %11.2f %6.1f%%\n", op.name.c_str(), op.per_step, op.us,
                op.us / layers, 100.0 * op.us / e.step_us);
  if (prefill)
    std::printf("  prefill of %d tokens: %.2f ms, %.1f tokens/s\n", o.step.ctx, e.step_us / 1000.0,
                e.tokens_per_s);
  else
    std::printf(
        "  step %.1f us = %.2f ms per token: %.2f tokens/s per user, %.1f tokens/s in all\n",
        e.step_us, e.step_us / 1000.0, e.tokens_per_s_per_user, e.tokens_per_s);
  std::printf(
      "  shares: DRAM %.1f%%, compute %.1f%%, on-chip copies %.1f%%, Ethernet %.1f%%, fixed op "
      "cost %.1f%%\n",
      100.0 * e.dram_us / e.step_us, 100.0 * e.compute_us / e.step_us, 100.0 * e.noc_us / e.step_us,
      100.0 * e.eth_us / e.step_us, 100.0 * e.fixed_us / e.step_us);
  std::printf("  per chip: %.1f MB of weights, %.2f MB of KV cache %s\n",
              e.weight_bytes_per_chip / 1e6, e.kv_bytes_per_chip / 1e6,
              prefill ? "written" : "read");
  for (const DeviceFigure& f : DeviceFigures())
    if (o.model_dir.empty() && f.preset == model_name && f.mesh == o.step.mesh &&
        f.phase == o.step.phase && f.users == o.step.users && f.ctx == o.step.ctx &&
        !o.formats_given && e.graph == "measured") {
      const double model = prefill ? e.tokens_per_s : e.tokens_per_s_per_user;
      std::printf("  tt-metal measured %.2f %s on the device (%s): model / measured = %.2f\n",
                  f.measured, prefill ? "tokens/s" : "tokens/s/user", f.source.c_str(),
                  model / f.measured);
    }
  std::printf("what-ifs (one change each from the headline):\n");
  std::printf("  %-26s %10s %10s %10s %7s %7s %7s\n", "scenario", "ms/step", "tok/s/u", "tok/s",
              "DRAM", "eth", "fixed");
  for (const auto& [s, r] : runs)
    std::printf("  %-26s %10.2f %10.2f %10.1f %6.1f%% %6.1f%% %6.1f%%\n", s.label.c_str(),
                r.step_us / 1000.0, r.tokens_per_s_per_user, r.tokens_per_s,
                100.0 * r.dram_us / r.step_us, 100.0 * r.eth_us / r.step_us,
                100.0 * r.fixed_us / r.step_us);
  // Speculative decode: the headline's step as a verify step of k proposals (FlashDecode).
  std::vector<SpeculationPoint> spec;
  if (!prefill) {
    spec = DefaultSpeculationWhatIf(c, o.step);
    std::printf(
        "speculative decode what-if (estimates; FlashDecode; a verify step of k proposals runs "
        "%d users x (k + 1) rows through the same program, each user's KV read once; E = (1 - "
        "a^(k+1)) / (1 - a) tokens a step at acceptance a):\n",
        o.step.users);
    std::printf("  %-4s %6s %10s %8s %10s %8s\n", "k", "accept", "ms/step", "E", "tok/s/u",
                "speedup");
    for (const SpeculationPoint& p : spec) {
      if (p.k == 0)
        std::printf("  %-4d %6s %10.2f %8.2f %10.2f %8.2f  (plain decode)\n", p.k, "-",
                    p.step_us / 1000.0, p.expected_tokens, p.tokens_per_s_per_user, p.speedup);
      else
        std::printf("  %-4d %6.1f %10.2f %8.2f %10.2f %7.2fx\n", p.k, p.acceptance,
                    p.step_us / 1000.0, p.expected_tokens, p.tokens_per_s_per_user, p.speedup);
    }
  }
  if (!o.csv.empty()) {
    WriteCsv(o.csv, runs, layers);
    std::printf("csv -> %s\n", o.csv.c_str());
  }
  if (!o.plot.empty()) {
    if (o.plot.size() < 4 || o.plot.compare(o.plot.size() - 4, 4, ".png") != 0)
      throw Error(Cat("--plot ", o.plot, ": the file name must end in .png"));
    Plot(o.plot, runs);
    std::printf("plot -> %s\n", o.plot.c_str());
  }
  if (!o.json.empty()) {
    nlohmann::json ops = nlohmann::json::object();
    for (const StepOp& op : e.ops) ops[op.name] = op.us;
    nlohmann::json j = {{"model", model_name},
                        {"phase", TtPhaseName(o.step.phase)},
                        {"mesh", o.step.mesh},
                        {"chips", e.chips},
                        {"program", e.program},
                        {"graph", e.graph},
                        {"layout_estimate", differences},
                        {"aiclk_ghz", e.aiclk_ghz},
                        {"users", o.step.users},
                        {"ctx", o.step.ctx},
                        {"weights_dtype", TileFormatName(o.step.weights)},
                        {"kv_dtype", TileFormatName(e.kv)},
                        {"attention", AttentionName(o.step)},
                        {"step_us", e.step_us},
                        {"tokens_per_s_per_user", e.tokens_per_s_per_user},
                        {"tokens_per_s", e.tokens_per_s},
                        {"dram_share", e.dram_us / e.step_us},
                        {"compute_share", e.compute_us / e.step_us},
                        {"noc_share", e.noc_us / e.step_us},
                        {"eth_share", e.eth_us / e.step_us},
                        {"fixed_share", e.fixed_us / e.step_us},
                        {"ops", ops}};
    if (prefill) j.erase("tokens_per_s_per_user");  // prefill: tokens_per_s, the prompt's rate
    nlohmann::json speculation = nlohmann::json::array();
    for (const SpeculationPoint& p : spec)
      speculation.push_back({{"k", p.k},
                             {"acceptance", p.acceptance},
                             {"step_us", p.step_us},
                             {"expected_tokens", p.expected_tokens},
                             {"tokens_per_s_per_user", p.tokens_per_s_per_user},
                             {"speedup", p.speedup}});
    if (!prefill) j["speculation"] = speculation;
    WriteJsonOutput(o.json, j.dump(2));
  }
}

}  // namespace wc
