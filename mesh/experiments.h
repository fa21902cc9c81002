// The FlashDecode report's performance experiments (seed 000 §4, Figures 3-5; docs/references.md)
// replayed on the emulated mesh: each configuration is a planning run of the FlashDecode engine
// (no math) turned into device time by the performance model (mesh/perf_model.h), or the model of
// the unfused baseline.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attention/flash_decode.h"

namespace wc {

// One configuration of an experiment.
struct MeshBenchConfig {
  std::string experiment;  // "seed-fig3-4", "seed-fig3-4-baseline", "seed-fig5", "seed-fig5-fine"
  std::string mesh;        // a MeshPreset name
  int bsz = 1, n_q_heads = 8, n_kv_heads = 1, head_dim = 128, kv_len = 1024;
  std::string kv_dtype = "bfp8";  // "bfp8" (1088 bytes per 1024 values) or "bf16"
  int max_cores_per_head = 16;
  int k_chunk_size = 0;  // 0: the engine's automatic choice
  Reduction reduction = Reduction::kFlat;
  bool baseline = false;  // the unfused softmax attention instead of FlashDecode
  // Query positions per user, causal within them (a speculative verify step): the first attends
  // kv_len - q_len + 1 positions, the last all kv_len. 1: the seed's op (every query all kv_len).
  int q_len = 1;
};

// One CSV row: the configuration and what the model says about it.
struct MeshBenchRow {
  MeshBenchConfig config;
  int chips = 1;
  int64_t cores_used = 0;  // active cores over all chips
  double emulated_us = 0, dram_gbps = 0, tflops = 0, noc_bytes = 0;
};

// "seed-fig3-4" (with its baseline rows), "seed-fig5", "seed-fig5-fine" (t3k every 2k of kv_len),
// "all" (seed-fig3-4 and seed-fig5).
std::vector<std::string> MeshExperimentNames();

// The configurations of experiment `name`, in CSV order. Throws wc::Error naming --experiment
// and listing the names for an unknown one.
std::vector<MeshBenchConfig> MeshExperimentConfigs(const std::string& name);

// Runs one configuration (a planning run: compute = false). Throws wc::Error for a configuration
// the engine or the baseline cannot run (for example a baseline whose score row overflows L1).
MeshBenchRow RunMeshBenchConfig(const MeshBenchConfig& config);

// Runs every configuration of `name` (rows in order). `progress` (optional) hears (configurations
// done, configurations in all), from one thread at a time.
std::vector<MeshBenchRow> RunMeshExperiment(
    const std::string& name, const std::function<void(int64_t, int64_t)>& progress = nullptr);

// Headline numbers of the rows, one line each: FlashDecode's speedup over the baseline, its DRAM
// bandwidth at the longest kv_len, the t3k time per max_cores_per_head at the longest kv_len.
std::vector<std::string> MeshBenchSummary(const std::vector<MeshBenchRow>& rows);

// The CSV header (no newline): experiment,mesh,chips,bsz,...,noc_bytes.
const char* MeshBenchCsvHeader();
// One CSV line (no newline) in the header's column order.
std::string MeshBenchCsvLine(const MeshBenchRow& row);
// Writes header + rows to `path`. Throws wc::Error naming --csv if it cannot be written.
void WriteMeshBenchCsv(const std::string& path, const std::vector<MeshBenchRow>& rows);

}  // namespace wc
