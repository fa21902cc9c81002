#include "meshmodel/device_experiment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mesh/plot_writer.h"
#include "mesh/wormhole_spec.h"
#include "meshmodel/decode_step_experiment.h"
#include "model/config.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc {
namespace {

// The ops that take the most of the step, largest first.
std::vector<const StepOp*> TopOps(const DecodeStepEstimate& e, size_t n) {
  std::vector<const StepOp*> ops;
  for (const StepOp& op : e.ops) ops.push_back(&op);
  std::stable_sort(ops.begin(), ops.end(),
                   [](const StepOp* a, const StepOp* b) { return a->us > b->us; });
  if (ops.size() > n) ops.resize(n);
  return ops;
}

// A phase's headline figure and its unit: prompt tokens a second, or tokens a second a user.
const char* Unit(TtPhase phase) {
  return phase == TtPhase::kPrefill ? "tokens/s" : "tokens/s/user";
}
const char* Unit(const DeviceFigure& f) {
  return Unit(f.phase);
}
double Headline(const DecodeStepEstimate& e, TtPhase phase) {
  return phase == TtPhase::kPrefill ? e.tokens_per_s : e.tokens_per_s_per_user;
}

std::string Slug(const std::string& label) {
  std::string s;
  for (char c : label) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!s.empty() && s.back() != '_')
      s += '_';
  }
  while (!s.empty() && s.back() == '_') s.pop_back();
  return s;
}

void WriteCsv(const std::string& path, const std::vector<DeviceRow>& rows) {
  std::ostringstream out;
  out.precision(8);
  out << "preset,mesh,phase,users,ctx,unit,measured,model,ratio,"
         "within_30pct,program,aiclk_ghz,step_us,programs,dram_share,fixed_share,eth_share,"
         "top_op,top_op_share";
  for (const auto& [label, v] : rows.front().what_ifs) out << ",whatif_" << Slug(label);
  out << ",source\n";
  for (const DeviceRow& r : rows) {
    const DecodeStepEstimate& e = r.estimate;
    const StepOp* top = TopOps(e, 1).front();
    out << r.figure.preset << "," << r.figure.mesh << "," << TtPhaseName(r.figure.phase) << ","
        << r.figure.users << "," << r.figure.ctx << "," << Unit(r.figure) << ","
        << r.figure.measured << "," << r.model << "," << r.ratio << ","
        << (std::abs(r.ratio - 1.0) <= 0.3 ? "yes" : "no") << "," << e.program << "," << e.aiclk_ghz
        << "," << e.step_us << "," << e.programs << "," << e.dram_us / e.step_us << ","
        << e.fixed_us / e.step_us << "," << e.eth_us / e.step_us << "," << top->name << ","
        << top->us / e.step_us;
    for (const auto& [label, v] : r.what_ifs) out << "," << v;
    out << ",\"" << r.figure.source << "\"\n";
  }
  std::ofstream f(path);
  f << out.str();
  f.close();
  if (!f) throw Error(Cat("--csv ", path, ": cannot write"));
}

// Model / measured per row, with the +-30% band.
void Plot(const std::string& png, const std::vector<DeviceRow>& rows) {
  std::ostringstream g;
  g << "$d << EOD\n";
  for (const DeviceRow& r : rows)
    g << "\"" << r.figure.preset << " " << r.figure.mesh << " " << TtPhaseName(r.figure.phase)
      << " " << r.figure.ctx << "\" " << r.ratio << "\n";
  g << "EOD\n";
  g << "set terminal pngcairo size 1100,560 font ',10'\nset termoption noenhanced\n";
  g << "set output " << GnuplotQuote(png) << "\n";
  g << "set title 'Falcon on Wormhole: the mesh model / tt-metal measured (device only)'\n";
  g << "set style data histograms\nset style fill solid 0.85 border -1\nset boxwidth 0.7\n";
  g << "set grid ytics\nset xtics rotate by -30 font ',9'\nset key top left\n";
  g << "set ylabel 'model / measured'\nset yrange [0:*]\n";
  g << "plot $d using 2:xtic(1) title 'model / measured' lc rgb '#1f77b4', "
       "1.3 title '+-30%' lc rgb '#d62728' dt 2, 0.7 notitle lc rgb '#d62728' dt 2, "
       "1 notitle lc rgb '#7f7f7f'\n";
  RunGnuplot(g.str(), png);
}

void WriteEstimatesCsv(const std::string& path, const std::vector<LayoutEstimate>& rows) {
  std::ostringstream out;
  out.precision(8);
  out << "preset,mesh,chips,phase,users,ctx,unit,model,step_us,programs,program,layout,"
         "compute_share,dram_share,fixed_share,eth_share,top_op,top_op_share\n";
  for (const LayoutEstimate& r : rows) {
    const DecodeStepEstimate& e = r.estimate;
    const StepOp* top = TopOps(e, 1).front();
    out << r.preset << "," << r.mesh << "," << e.chips << "," << TtPhaseName(r.phase) << ","
        << r.users << "," << r.ctx << "," << Unit(r.phase) << "," << r.model << "," << e.step_us
        << "," << e.programs << "," << e.program << ",\"" << r.layout << "\","
        << e.compute_us / e.step_us << "," << e.dram_us / e.step_us << "," << e.fixed_us / e.step_us
        << "," << e.eth_us / e.step_us << "," << top->name << "," << top->us / e.step_us << "\n";
  }
  std::ofstream f(path);
  f << out.str();
  f.close();
  if (!f) throw Error(Cat("--estimates-csv ", path, ": cannot write"));
}

}  // namespace

std::vector<LayoutEstimate> RunLayoutEstimates() {
  std::vector<LayoutEstimate> rows;
  for (const char* preset : {"falcon-rw-1b", "falcon-rw-7b", "falcon3-1b", "falcon3-7b"}) {
    const ModelConfig c = PresetConfig(preset);
    for (const char* mesh : {"n150", "t3k", "galaxy"})
      for (TtPhase phase : {TtPhase::kDecode, TtPhase::kPrefill}) {
        DecodeStepOptions o;
        o.mesh = mesh;
        o.phase = phase;
        o.users = phase == TtPhase::kPrefill ? 1 : 32;
        o.ctx = phase == TtPhase::kPrefill ? std::min(2048, c.max_position_embeddings) : 128;
        LayoutEstimate r;
        r.preset = preset;
        r.mesh = mesh;
        r.phase = phase;
        r.users = o.users;
        r.ctx = o.ctx;
        r.layout = LayoutDifferences(c);
        r.estimate = EstimateDecodeStep(c, o);
        r.model = Headline(r.estimate, phase);
        rows.push_back(std::move(r));
      }
  }
  return rows;
}

std::vector<DeviceRow> RunDeviceExperiment() {
  std::vector<DeviceRow> rows;
  for (const DeviceFigure& f : DeviceFigures()) {
    const ModelConfig c = PresetConfig(f.preset);
    DecodeStepOptions o;
    o.mesh = f.mesh;
    o.phase = f.phase;
    o.users = f.users;
    o.ctx = f.ctx;
    DeviceRow r;
    r.figure = f;
    r.estimate = EstimateDecodeStep(c, o);
    r.model = Headline(r.estimate, f.phase);
    r.ratio = r.model / f.measured;
    for (const Scenario& s : TodaysWhatIfs(o)) {
      const DecodeStepEstimate w = EstimateDecodeStep(c, s.options);
      r.what_ifs.emplace_back(s.label, Headline(w, f.phase));
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

void RunDeviceExperimentCommand(const DeviceExperimentOptions& o) {
  const std::vector<DeviceRow> rows = RunDeviceExperiment();
  std::printf("Falcon decode on Wormhole, device-only: tt-metal measured vs the mesh model\n");
  std::printf(
      "(the program, formats and clock of each measured run; decode: 32 users, tokens/s "
      "per user; prefill: one prompt of ctx tokens, tokens/s)\n");
  std::printf("  %-11s %-5s %-8s %5s %9s %9s %7s  %s\n", "model", "mesh", "phase", "ctx",
              "measured", "model", "ratio", "within +-30%");
  for (const DeviceRow& r : rows)
    std::printf("  %-11s %-5s %-8s %5d %9.2f %9.2f %7.2f  %s\n", r.figure.preset.c_str(),
                r.figure.mesh.c_str(), TtPhaseName(r.figure.phase), r.figure.ctx, r.figure.measured,
                r.model, r.ratio, std::abs(r.ratio - 1.0) <= 0.3 ? "yes" : "no");
  for (const DeviceRow& r : rows) {
    const DecodeStepEstimate& e = r.estimate;
    std::printf("%s %s on %s, ctx %d: %s program, %.2f GHz, %d programs, %.2f ms a step\n",
                r.figure.preset.c_str(), TtPhaseName(r.figure.phase), r.figure.mesh.c_str(),
                r.figure.ctx, e.program.c_str(), e.aiclk_ghz, e.programs, e.step_us / 1000.0);
    std::printf(
        "  shares: DRAM %.1f%%, compute %.1f%%, on-chip copies %.1f%%, Ethernet %.1f%%, "
        "fixed op cost %.1f%%; top ops:",
        100 * e.dram_us / e.step_us, 100 * e.compute_us / e.step_us, 100 * e.noc_us / e.step_us,
        100 * e.eth_us / e.step_us, 100 * e.fixed_us / e.step_us);
    for (const StepOp* op : TopOps(e, 5))
      std::printf(" %s %.1f%%", op->name.c_str(), 100 * op->us / e.step_us);
    std::printf("\n  what-ifs (%s, x the measured program):", Unit(r.figure));
    for (const auto& [label, v] : r.what_ifs)
      std::printf(" %s %.2f (%.2fx);", label.c_str(), v, v / r.model);
    std::printf("\n");
  }
  const std::vector<LayoutEstimate> estimates = RunLayoutEstimates();
  std::printf(
      "\nLayouts tt-metal publishes no program for: estimates from the same op costs, the ops "
      "each layout needs on the program of its chip count - no device figure to check them "
      "against\n");
  std::printf("  %-13s %-6s %-8s %5s %11s %9s  %s\n", "model", "mesh", "phase", "ctx", "estimate",
              "ms", "layout");
  for (const LayoutEstimate& r : estimates)
    std::printf("  %-13s %-6s %-8s %5d %11.2f %9.2f  %s (%s)\n", r.preset.c_str(), r.mesh.c_str(),
                TtPhaseName(r.phase), r.ctx, r.model, r.estimate.step_us / 1000.0, r.layout.c_str(),
                Unit(r.phase));
  if (!o.estimates_csv.empty()) {
    WriteEstimatesCsv(o.estimates_csv, estimates);
    std::printf("estimates csv -> %s\n", o.estimates_csv.c_str());
  }
  if (!o.csv.empty()) {
    WriteCsv(o.csv, rows);
    std::printf("csv -> %s\n", o.csv.c_str());
  }
  if (!o.plot.empty()) {
    if (o.plot.size() < 4 || o.plot.compare(o.plot.size() - 4, 4, ".png") != 0)
      throw Error(Cat("--plot ", o.plot, ": the file name must end in .png"));
    Plot(o.plot, rows);
    std::printf("plot -> %s\n", o.plot.c_str());
  }
  if (!o.json.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const DeviceRow& r : rows) {
      nlohmann::json ops = nlohmann::json::object(), what_ifs = nlohmann::json::object();
      for (const StepOp& op : r.estimate.ops) ops[op.name] = op.us / r.estimate.step_us;
      for (const auto& [label, v] : r.what_ifs) what_ifs[label] = v;
      list.push_back({{"preset", r.figure.preset},
                      {"mesh", r.figure.mesh},
                      {"users", r.figure.users},
                      {"ctx", r.figure.ctx},
                      {"phase", TtPhaseName(r.figure.phase)},
                      {"unit", Unit(r.figure)},
                      {"measured", r.figure.measured},
                      {"model", r.model},
                      {"ratio", r.ratio},
                      {"program", r.estimate.program},
                      {"aiclk_ghz", r.estimate.aiclk_ghz},
                      {"step_us", r.estimate.step_us},
                      {"op_shares", ops},
                      {"what_ifs", what_ifs},
                      {"source", r.figure.source}});
    }
    nlohmann::json est = nlohmann::json::array();
    for (const LayoutEstimate& r : estimates)
      est.push_back({{"preset", r.preset},
                     {"mesh", r.mesh},
                     {"phase", TtPhaseName(r.phase)},
                     {"users", r.users},
                     {"ctx", r.ctx},
                     {"unit", Unit(r.phase)},
                     {"estimate", r.model},
                     {"step_us", r.estimate.step_us},
                     {"program", r.estimate.program},
                     {"layout", r.layout}});
    WriteJsonOutput(o.json, nlohmann::json{{"rows", list}, {"estimates", est}}.dump(2));
  }
}

}  // namespace wc
