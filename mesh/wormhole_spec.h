// Tenstorrent Wormhole chip and mesh figures (from Tenstorrent's public documentation), kept in one
// place. Everything the emulator and the performance model assume about the hardware is here.
#pragma once

#include <string>
#include <vector>

namespace wc {

struct WormholeChipSpec {
  int grid_x = 8;     // Tensix grid columns
  int grid_y = 10;    // Tensix grid rows
  int compute_x = 8;  // compute grid used by ops: 8 x 8 = 64 cores
  int compute_y = 8;
  int l1_bytes = 1464 * 1024;  // L1 per core (1.5 MB, 1464 KiB usable)
  double clock_ghz = 1.0;      // 1 cycle = 1 ns
  int dram_channels = 12;      // GDDR6, 12 GB
  double dram_peak_gbps = 288.0;
  double dram_achievable_gbps = 256.0;  // measured ~250-267 GB/s
  // Round trip of a DRAM read as a reader core sees it (request over the NoC, GDDR6 access, the
  // data's way back), exposed once at every read barrier. Calibrated (mesh/README.md): 450 ns
  // makes the 64-core FlashDecode stream reach the seed's ~70% of achievable bandwidth at 128k.
  double dram_latency_ns = 450.0;
  double core_dram_read_gbps = 32.0;  // one core's NoC read port (32 B/cycle)
  // tt-metal's sdpa readers issue tile reads and wait on a read barrier every
  // ((512 / n_cores) * 1152) / q_tile_bytes tiles (reader_decode_all.cpp, "target 8KB of data
  // before a single barrier for 8x8 grid of readers"): a chip-wide in-flight budget split over the
  // op's cores, counted in units of the bf16 Q tile.
  int read_barrier_budget_bytes = 512 * 1152;
  int read_barrier_q_tile_bytes = 2048;
  double noc_bytes_per_cycle = 32.0;                 // per link, per direction
  double noc_large_transfer_bytes_per_cycle = 30.0;  // effective for transfers >= 2 KB
  int noc_hop_cycles = 9;                            // router + link per hop
  int noc_write_overhead_cycles = 68;  // per transfer issue/ack; small writes are slow
  int semaphore_inc_cycles = 40;       // a remote atomic increment round trip
  int tile_dim = 32;                   // 32 x 32 tiles of four 16 x 16 faces
  int matmul_tile_cycles_lofi = 16;    // per 32x32x32 tile matmul at each math fidelity
  int matmul_tile_cycles_hifi2 = 32;
  int matmul_tile_cycles_hifi4 = 64;
  int sfpu_tile_cycles = 64;        // exp/max/sum/scale on one tile (vector unit)
  int merge_tile_cycles = 64;       // one tile op of a partial merge (exp, scale, add): SFPU
  int bf16_tile_bytes = 2048;       // Q, scores, partials
  int bfp8_tile_bytes = 1088;       // 1024 mantissa bytes + 64 shared exponents (1 per 16)
  int bfp4_tile_bytes = 576;        // 512 mantissa bytes + 64 shared exponents
  int kernel_launch_cycles = 2000;  // dispatch + program start of one op
  // Baseline (unfused) attention, seed 000 §4.1: scores are written to DRAM in bf16, and softmax
  // costs this many SFPU passes per score tile (max, subtract + exp, sum, scale), as in the
  // FlashDecode compute counts.
  int softmax_sfpu_ops_per_tile = 4;
};

struct EthernetSpec {
  double link_gbps = 12.5;  // per direction
  double hop_latency_us = 0.7;
};

// A mesh of chips joined by ethernet. Attention heads are split over `chips`.
struct MeshSpec {
  std::string name;
  int chips = 1;
  int rows = 1, cols = 1;  // logical arrangement
  WormholeChipSpec chip;
  EthernetSpec eth;
  int cores_per_chip() const { return chip.compute_x * chip.compute_y; }
};

// n150 (1 chip), n300 (2), n300x2 (4, two n300 cards), t3k (8 as 2x4), galaxy (32 as 4x8).
// Throws wc::Error naming --mesh for an unknown name.
MeshSpec MeshPreset(const std::string& name);
std::vector<std::string> MeshPresetNames();

}  // namespace wc
