// Device time of one tt-metal program (a TtOp of meshmodel/tt_graph.h) on a Wormhole chip, as
// tt-metal's profiler counts it ("DEVICE KERNEL DURATION": from the first core's start to the
// last core's end, no host dispatch, no gap between ops). Hardware figures come from
// mesh/wormhole_spec.h; what the software of the time made of them (the clock it ran, how its
// programs read DRAM, what a program costs before any work) from TtSoftware below. Each field
// names its source; none comes from the Falcon figures the model is tested against
// (meshmodel/README.md lists them and the error each could carry).
//
//   every program   a fixed cost (firmware start, runtime arguments, circular buffers, the end
//                   handshake: a data-movement program's, or a compute program's), then its body:
//   kMatmul         max(weights + DRAM activations over the read rate of its DRAM layout,
//                   output tiles per core x k tiles x cycles a tile at its fidelity / clock)
//   kBatchedMatmul  max(products per core x tile products x cycles a tile / clock, the bytes a
//                   core reads from other cores' L1 at its NoC rate)
//   kCompute        max(tiles per core x passes x pass cycles / clock, DRAM bytes / read rate)
//   kDataMovement   max(read bytes, written bytes) over the cores' copy rate (a tile per NoC
//                   round trip) and DRAM's interleaved rate
//   collectives     mesh/collectives.h's ring over Ethernet, plus the op's fixed cost
//   kFlashDecode    mesh/perf_model.h on one chip's heads (the attention model, unchanged)
#pragma once

#include <string>

#include "mesh/wormhole_spec.h"
#include "meshmodel/tt_graph.h"

namespace wc {

// What tt-metal's software of mid-2024 got out of a Wormhole chip. Sources: docs/tt-metal/
// op-costs.md and prefill-costs.md (research notes, every figure quoted with its commit or issue).
struct TtSoftware {
  std::string name = "tt-metal mid-2024";
  // The Tensix clock: 1 GHz on Wormhole device-perf runners from commit 7a3e3edb5a (2024-05-01,
  // "Update perf to reflect 1GHz clock": Stable Diffusion's device target x1.247), before both
  // measurements; issue #7408 ticks "1 GHz clock - expected 1.25x speedup. Got 1.2x". The T3000
  // runner's clock is not recorded anywhere found (meshmodel/README.md: +-25% if it was 800 MHz).
  double aiclk_ghz = 1.0;
  // Per program, before any work: tiny multi-core data-movement programs measure 0.98-1.16 us of
  // device kernel time (interleaved_to_sharded 975 ns, reshard 1078, sharded_to_interleaved 1160:
  // llama3_70b_galaxy decoder_perf_targets_4u.json, 2025), programs through the unpack / math /
  // pack pipeline 2.5-2.9 us (a one-tile-per-core binary op: test_llama_ops_perf_TG_llama.py 2.78
  // us, issue #20681 2.91 us; 2025). No mid-2024 figure was found; these are the nearest.
  double fixed_move_us = 1.07;
  double fixed_compute_us = 2.78;
  // A 1D-multicast matmul streaming DRAM-interleaved BFP8 weights: [32, 8192] x [8192, 4096] on
  // 8x4 cores took 242.4 us at 800 MHz (issue #6689, test 523a2f8ee0): 147 GB/s of tile bytes,
  // 184 bytes a cycle. The NoC, which limits interleaved reads ("interleaved ... will cause NoC
  // congestions", tech_reports/Saturating_DRAM_bandwidth), runs at the Tensix clock.
  double interleaved_bytes_per_cycle = 183.75;
  // DRAM-sharded decode matmuls reach 239-260 GB/s (tech_reports/Saturating_DRAM_bandwidth,
  // Llama3-70B decode), at 1 GHz.
  double dram_sharded_gbps = 239.0;
  // One core's NoC: 28.1 bytes a cycle absorbed by a worker, 30 a link, a read's round trip 270
  // cycles across the grid (tenstorrent/tt-npe device_models/wormhole_b0.hpp). Data-movement
  // kernels copy a tile at a time behind a barrier: a tile costs the round trip and its bytes.
  double core_read_bytes_per_cycle = 28.1;
  double noc_link_bytes_per_cycle = 30.0;
  double noc_read_latency_cycles = 270.0;
  // The vector unit is 32 lanes wide (llk.rst): an SFPU instruction over a 32 x 32 tile takes at
  // least 32 cycles; the compute programs count such passes (meshmodel/tt_graph.cpp).
  double pass_cycles = 32.0;
  // A ring CCL of the time (the erisc data mover launched per op, handshakes, teardown): issue
  // #12107 (2024-08-30) expects 24 us for a Llama BFP8 all-gather [32, 1024] -> [32, 8192] on a
  // T3000 ring, 1 link; less its bytes (243,712 B at 2 x 12.5 GB/s, 9.7 us) and 7 hops at 0.65
  // us leaves about 10 us fixed.
  double ccl_fixed_us = 10.0;
  // tech_reports/EthernetMultichip/BasicEthernetGuide.md: 12.5 GB/s a link and direction.
  double eth_gbps = 12.5;
  int eth_links = 1;  // ALL_GATHER_NUM_LINKS = 1 (falcon40b model_config.py)
};

// The constants of the runs that measured tt-metal's published figures.
TtSoftware MeasuredSoftware();

// One program's time and where it goes (microseconds).
struct OpCost {
  double us = 0;
  double fixed_us = 0, dram_us = 0, compute_us = 0, noc_us = 0, eth_us = 0;
  double dram_bytes = 0;
};

// `op` once, on one chip of a ring of `chips`. Throws wc::Error for an op whose sizes are
// negative or whose FlashDecode shape the attention model cannot run.
OpCost CostOf(const TtOp& op, int chips, const WormholeChipSpec& chip, const TtSoftware& sw);

}  // namespace wc
