#include "mesh/experiments.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "kvcache/kv_view.h"
#include "mesh/perf_model.h"
#include "mesh/wormhole_spec.h"
#include "util/error.h"

namespace wc {
namespace {

// K/V lengths: powers of two from 1k to 128k (Figures 3-5), and every 2k (the fine sweep).
std::vector<int> PowerOfTwoLengths() {
  std::vector<int> v;
  for (int len = 1024; len <= 128 * 1024; len *= 2) v.push_back(len);
  return v;
}

std::vector<int> FineLengths() {
  std::vector<int> v = {1024};
  for (int len = 2048; len <= 128 * 1024; len += 2048) v.push_back(len);
  return v;
}

// The chunk size the seed's measurements used (tt-metal's test_sdpa_decode.py, get_chunk_size):
// 32 rows up to 128 positions, 128 up to 1024, then 512 - at most the largest power of two
// dividing kv_len.
int SeedChunkSize(int kv_len) {
  int chunk = kv_len <= 128 ? 32 : kv_len <= 1024 ? 128 : 512;
  int divisor = 2;
  while (divisor < kv_len && kv_len % (2 * divisor) == 0) divisor *= 2;
  return std::max(32, std::min(chunk, divisor));
}

// Seed §4.1: BF16 Q, BFP8 K/V, bsz 8/16/32, head_dim 64/128/256, 8 q heads on 1 KV head, n150.
// The baseline stops at 16k as in the seed (its softmax row no longer fits L1 beyond).
void AddFig34(std::vector<MeshBenchConfig>& out) {
  for (bool baseline : {false, true}) {
    for (int head_dim : {64, 128, 256}) {
      for (int bsz : {8, 16, 32}) {
        for (int len : PowerOfTwoLengths()) {
          if (baseline && len > 16 * 1024) continue;
          MeshBenchConfig c;
          c.experiment = baseline ? "seed-fig3-4-baseline" : "seed-fig3-4";
          c.mesh = "n150";
          c.bsz = bsz;
          c.n_q_heads = 8;
          c.n_kv_heads = 1;
          c.head_dim = head_dim;
          c.kv_len = len;
          c.max_cores_per_head = 16;  // the op's default max_cores_per_head_batch
          c.k_chunk_size = SeedChunkSize(len);
          c.reduction = Reduction::kFlat;
          c.baseline = baseline;
          out.push_back(c);
        }
      }
    }
  }
}

// Seed §4.2: Llama-3.1-8B attention (bsz 1, head_dim 128, 32 q / 8 KV heads) split over 1, 2, 4, 8
// chips, max_cores_per_head 8-64, with the seed's flat reducer and the engine's tree. The fine
// variant sweeps t3k every 2k to show what the power-of-two points hide (mesh/README.md).
void AddFig5(std::vector<MeshBenchConfig>& out, bool fine) {
  const std::vector<const char*> meshes =
      fine ? std::vector<const char*>{"t3k"}
           : std::vector<const char*>{"n150", "n300", "n300x2", "t3k"};
  const std::vector<int> cores = fine ? std::vector<int>{16, 64} : std::vector<int>{8, 16, 32, 64};
  for (Reduction r : {Reduction::kFlat, Reduction::kTree}) {
    for (const char* mesh : meshes) {
      for (int max_cores : cores) {
        for (int len : fine ? FineLengths() : PowerOfTwoLengths()) {
          MeshBenchConfig c;
          c.experiment = fine ? "seed-fig5-fine" : "seed-fig5";
          c.mesh = mesh;
          c.bsz = 1;
          // The whole model's heads; the engine splits them over the chips, which gives the
          // seed's 32/8 (n150), 16/4 (n300), 8/2 (n300x2) and 4/1 (t3k) heads per chip.
          c.n_q_heads = 32;
          c.n_kv_heads = 8;
          c.head_dim = 128;
          c.kv_len = len;
          c.max_cores_per_head = max_cores;
          c.k_chunk_size = SeedChunkSize(len);
          c.reduction = r;
          out.push_back(c);
        }
      }
    }
  }
}

double RowBytes(const MeshBenchConfig& c) {
  if (c.kv_dtype == "bfp8") return c.head_dim * 1088.0 / 1024.0;
  if (c.kv_dtype == "bf16") return c.head_dim * 2.0;
  throw Error(Cat("kv_dtype '", c.kv_dtype, "' is not supported by mesh-bench; use bfp8 or bf16"));
}

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::vector<std::string> MeshExperimentNames() {
  return {"seed-fig3-4", "seed-fig5", "seed-fig5-fine", "all"};
}

std::vector<MeshBenchConfig> MeshExperimentConfigs(const std::string& name) {
  std::vector<MeshBenchConfig> out;
  if (name == "seed-fig3-4" || name == "all") AddFig34(out);
  if (name == "seed-fig5" || name == "all") AddFig5(out, false);
  if (name == "seed-fig5-fine") AddFig5(out, true);
  if (out.empty()) {
    std::string names;
    for (const auto& n : MeshExperimentNames()) names += (names.empty() ? "" : ", ") + n;
    throw Error(Cat("--experiment '", name, "' is not known; choose one of: ", names));
  }
  return out;
}

MeshBenchRow RunMeshBenchConfig(const MeshBenchConfig& c) {
  const MeshSpec mesh = MeshPreset(c.mesh);
  AttentionShape shape;
  shape.bsz = c.bsz;
  shape.n_q_heads = c.n_q_heads;
  shape.n_kv_heads = c.n_kv_heads;
  shape.head_dim = c.head_dim;
  shape.kv_len = c.kv_len;
  shape.kv_row_bytes = RowBytes(c);
  shape.queries = c.bsz * std::max(1, c.q_len);
  const FlashDecodeConfig fd{c.k_chunk_size, c.max_cores_per_head, c.reduction,
                             MathFidelity::kHiFi2};

  MeshBenchRow row;
  row.config = c;
  row.chips = mesh.chips;
  PerfEstimate est;
  if (c.baseline) {
    est = EstimateBaselineAttention(mesh, shape, fd.fidelity);
    if (!est.feasible)
      throw Error(Cat("the baseline attention cannot run kv_len ", c.kv_len, ": ", est.note));
  } else {
    const ShapeOnlyKV kv(shape.kv_row_bytes, c.head_dim);
    DecodeAttentionOp op;
    op.bsz = c.bsz;
    op.n_q_heads = c.n_q_heads;
    op.n_kv_heads = c.n_kv_heads;
    op.head_dim = c.head_dim;
    op.kv_len = c.kv_len;
    op.kv = &kv;
    op.causal = false;                    // the seed always attends the full kv_len
    std::vector<int32_t> cur_pos, q_len;  // [bsz]
    if (c.q_len > 1) {  // a verify chunk: causal within the user's queries, the KV read once
      if (c.baseline || c.q_len > c.kv_len)
        throw Error(Cat("q_len ", c.q_len, " needs FlashDecode and kv_len >= q_len"));
      cur_pos.assign(c.bsz, c.kv_len - c.q_len);
      q_len.assign(c.bsz, c.q_len);
      op.causal = true;
      op.cur_pos = cur_pos.data();
      op.q_len = q_len.data();
    }
    const OpTrace trace = FlashDecodeEngine(mesh, fd).Run(op, /*compute=*/false);
    est = EstimateFlashDecode(trace, mesh, shape, fd.fidelity);
  }
  row.cores_used = est.cores_used;
  row.emulated_us = est.emulated_us;
  row.dram_gbps = est.dram_gbps;
  row.tflops = est.tflops;
  row.noc_bytes = est.noc_bytes;
  return row;
}

std::vector<MeshBenchRow> RunMeshExperiment(const std::string& name,
                                            const std::function<void(int64_t, int64_t)>& progress) {
  const std::vector<MeshBenchConfig> configs = MeshExperimentConfigs(name);
  std::vector<MeshBenchRow> rows(configs.size());
  int64_t done = 0;  // under the critical section below
  // Configurations in parallel (each planning run is small; the engine's own parallel regions
  // run on one thread inside this one). Rows are pure functions of their configuration.
  std::string error;
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < static_cast<int64_t>(configs.size()); ++i) {
    try {
      rows[i] = RunMeshBenchConfig(configs[i]);
      if (progress) {
#pragma omp critical(mesh_progress)
        progress(++done, static_cast<int64_t>(configs.size()));
      }
    } catch (const Error& e) {
#pragma omp critical
      if (error.empty()) error = e.what();
    }
  }
  if (!error.empty()) throw Error(error);
  return rows;
}

std::vector<std::string> MeshBenchSummary(const std::vector<MeshBenchRow>& rows) {
  std::vector<std::string> lines;
  // FlashDecode against the baseline of the same shape.
  double lo = 1e30, hi = 0, log_sum = 0;
  int pairs = 0;
  for (const auto& b : rows) {
    if (!b.config.baseline) continue;
    for (const auto& f : rows) {
      const MeshBenchConfig &x = f.config, &y = b.config;
      if (x.experiment != "seed-fig3-4" || x.bsz != y.bsz || x.head_dim != y.head_dim ||
          x.kv_len != y.kv_len)
        continue;
      const double speedup = b.emulated_us / f.emulated_us;
      lo = std::min(lo, speedup);
      hi = std::max(hi, speedup);
      log_sum += std::log(speedup);
      ++pairs;
    }
  }
  if (pairs > 0)
    lines.push_back(Cat("FlashDecode vs baseline: ", Num(lo), "x to ", Num(hi),
                        "x faster (geometric mean ", Num(std::exp(log_sum / pairs)), "x, ", pairs,
                        " shapes)"));
  // Bandwidth at the longest fig3-4 kv_len.
  int longest = 0;
  for (const auto& r : rows)
    if (r.config.experiment == "seed-fig3-4") longest = std::max(longest, r.config.kv_len);
  double g_lo = 1e30, g_hi = 0;
  for (const auto& r : rows) {
    if (r.config.experiment != "seed-fig3-4" || r.config.kv_len != longest) continue;
    g_lo = std::min(g_lo, r.dram_gbps);
    g_hi = std::max(g_hi, r.dram_gbps);
  }
  if (longest > 0) {
    const double achievable = MeshPreset("n150").chip.dram_achievable_gbps;
    lines.push_back(Cat("seed-fig3-4 DRAM bandwidth at kv_len ", longest, ": ", Num(g_lo), "-",
                        Num(g_hi), " GB/s (", Num(100 * g_lo / achievable), "-",
                        Num(100 * g_hi / achievable), "% of the achievable ", Num(achievable),
                        ")"));
  }
  // t3k at the longest fig5 kv_len, per reduction and max_cores_per_head.
  for (Reduction red : {Reduction::kFlat, Reduction::kTree}) {
    int len = 0;
    std::string experiment;
    for (const auto& r : rows) {
      if (r.config.experiment.rfind("seed-fig5", 0) == 0 && r.config.mesh == "t3k" &&
          r.config.kv_len >= len) {
        len = r.config.kv_len;
        experiment = r.config.experiment;
      }
    }
    std::string line;
    for (const auto& r : rows) {
      const MeshBenchConfig& c = r.config;
      if (c.experiment != experiment || c.mesh != "t3k" || c.reduction != red || c.kv_len != len)
        continue;
      line +=
          Cat(line.empty() ? "" : ", ", c.max_cores_per_head, " cores ", Num(r.emulated_us), " us");
    }
    if (!line.empty())
      lines.push_back(Cat(experiment, " t3k kv_len ", len, " (", ReductionName(red), "): ", line));
  }
  return lines;
}

const char* MeshBenchCsvHeader() {
  return "experiment,mesh,chips,bsz,n_q_heads,n_kv_heads,head_dim,kv_len,kv_dtype,"
         "max_cores_per_head,cores_used,reduction,emulated_us,dram_gbps,tflops,noc_bytes";
}

std::string MeshBenchCsvLine(const MeshBenchRow& r) {
  const MeshBenchConfig& c = r.config;
  return Cat(c.experiment, ",", c.mesh, ",", r.chips, ",", c.bsz, ",", c.n_q_heads, ",",
             c.n_kv_heads, ",", c.head_dim, ",", c.kv_len, ",", c.kv_dtype, ",",
             c.max_cores_per_head, ",", r.cores_used, ",",
             c.baseline ? "none" : ReductionName(c.reduction), ",", Num(r.emulated_us), ",",
             Num(r.dram_gbps), ",", Num(r.tflops), ",", Num(r.noc_bytes));
}

void WriteMeshBenchCsv(const std::string& path, const std::vector<MeshBenchRow>& rows) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw Error(Cat("--csv ", path, ": cannot open for writing"));
  out << MeshBenchCsvHeader() << "\n";
  for (const auto& r : rows) out << MeshBenchCsvLine(r) << "\n";
  out.flush();
  if (!out) throw Error(Cat("--csv ", path, ": write failed"));
}

}  // namespace wc
