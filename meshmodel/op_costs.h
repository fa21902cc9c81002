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
//                   output tiles per core x k tiles x measured cycles a tile product (at its
//                   output subblock) + fused activation tiles x their cycles, over the clock)
//   kBatchedMatmul  max(products per core x tile products x cycles a tile (at its subblock) /
//                   clock, the bytes a core reads from other cores' L1 at its NoC rate)
//   kCompute        max(tiles per core x passes x pass cycles / clock, DRAM bytes / read rate)
//   kDataMovement   max(read bytes, written bytes) over the cores' copy rate (a tile per NoC
//                   round trip) and DRAM's interleaved rate
//   collectives     mesh/collectives.h's ring over Ethernet, plus the op's fixed cost
//   kFlashDecode    mesh/perf_model.h on one chip's heads (the attention model, unchanged)
//   kSdpa           causal FLOPs over the FlashAttention report's rate at that length
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
  // Per program, before any work (firmware start, runtime arguments, circular buffers, the end
  // handshake; run by the RISC-V cores, so in cycles). Figures of the time, on Llama2-70B decode:
  // a compute program: #8060 (2024-05-02) measured an RMSNorm of [32, 8192] on 32 cores at 24.5 us
  // at 800 MHz, 19,600 cycles, of which its math (8 tiles a core, 6 passes of pass_cycles) is
  // 1,536: 18,064 fixed. A data-movement program: #7408 (Llama2 burndown, 2024-04, 800 MHz):
  // folding a pad and a transpose into create_nlp_heads "saves 30 us" a layer, 12,000 cycles a
  // program (their data not subtracted: an upper bound). The 2025 floors (what-if "2025 op
  // floors"): 1,070 and 2,780 cycles (llama3_70b_galaxy decoder_perf_targets_4u.json:
  // interleaved_to_sharded 975 ns, reshard 1078, sharded_to_interleaved 1160;
  // test_llama_ops_perf_TG_llama.py: a one-tile binary op 2.78 us).
  double fixed_move_cycles = 12000;
  double fixed_compute_cycles = 18064;
  // A 1D-multicast matmul streaming DRAM-interleaved BFP8 weights: [32, 8192] x [8192, 4096] on
  // 8x4 cores took 242.4 us at 800 MHz (issue #6689, test 523a2f8ee0); less its fixed cost
  // (18,064 cycles, 22.6 us) that is 35.65 MB in 219.8 us, 162 GB/s, 203 bytes a cycle. The NoC,
  // which limits interleaved reads ("interleaved ... will cause NoC congestions",
  // tech_reports/Saturating_DRAM_bandwidth), runs at the Tensix clock.
  double interleaved_bytes_per_cycle = 35651584.0 / ((242.4 - 18064 / 800.0) * 0.8 * 1000.0);
  // DRAM-sharded decode matmuls reach 239-260 GB/s (tech_reports/Saturating_DRAM_bandwidth,
  // Llama3-70B decode), at 1 GHz.
  double dram_sharded_gbps = 239.0;
  // One core's NoC: 28.1 bytes a cycle absorbed by a worker, 30 a link, a read's round trip 270
  // cycles across the grid (tenstorrent/tt-npe device_models/wormhole_b0.hpp). Data-movement
  // kernels copy a tile at a time behind a barrier: a tile costs the round trip and its bytes.
  double core_read_bytes_per_cycle = 28.1;
  double noc_link_bytes_per_cycle = 30.0;
  double noc_read_latency_cycles = 270.0;
  // Cycles a 32 x 32 x 32 tile product takes a core in a large matmul, as measured
  // (tech_reports/GEMM_FLOPS @ 93fccc5e88, N150/N300 8x8, 1 GHz, traced; the plateau of the
  // largest shapes; docs/tt-metal/prefill-costs.md section 6.1): LoFi BFP8 29, BFP4 21; HiFi2
  // BFP8 41, BF16 54; HiFi4 BF16 79. A bf16 x BFP8 product (no row measured) takes the mean of the
  // two HiFi2 rows, 47.5.
  double gemm_cycles_lofi_bfp8 = 29, gemm_cycles_lofi_bfp4 = 21;
  double gemm_cycles_hifi2_bfp8 = 41, gemm_cycles_hifi2_bf16 = 54;
  double gemm_cycles_hifi4_bf16 = 79;
  // The same product with 1 x 1 output subblocks (the di/dt workaround of Falcon's prefill
  // matmuls: every product re-unpacks both operands and packs its one output tile), from issue
  // #9723's op timings of Falcon-7B's prefill MLP as it ran (8x8 cores, HiFi2, bf16 x BFP8_B):
  // FF2 at 1024 tokens, a plain matmul of 4 x 18 output tiles a core x 576 k tiles, took 2.38 ms
  // at 1 GHz; less a compute program's fixed cost of that time (not the "2025 op floors" what-if's)
  // that is 56.95 cycles a product, 1.20x the plateau. Other formats and fidelities take that
  // ratio of their own plateau (GemmTileCycles). docs/tt-metal/prefill-costs.md section 6.1
  // writes the arithmetic out and checks it at 2048 tokens.
  double gemm_cycles_1x1_hifi2_bf16_bfp8 = (2.38e6 - fixed_compute_cycles) / (4.0 * 18 * 576);
  // A fused activation (GELU, SiLU) on an output tile, in the packer: FF1 runs FF2's product count
  // on the same cores plus GELU on its 4 x 72 output tiles a core, 2.64 ms: (2.64 - 2.38) ms over
  // 288 tiles, 903 cycles a tile (28 of the vector unit's 32-cycle passes).
  double fused_activation_tile_cycles = (2.64e6 - 2.38e6) / (4.0 * 72);
  // scaled_dot_product_attention, causal, head_dim 64, BFP8 (tech_reports/FlashAttention @
  // 0f7aa9bbf2, n150 8x8): 14.4 / 18.1 / 20.9 / 22.5 TFLOP/s at S = 512 / 1k / 2k / 4k, FLOPs =
  // 2 b s^2 h d; shorter prompts take the 512 rate (none measured), between them log-linear.
  double sdpa_tflops[4] = {14.4, 18.1, 20.9, 22.5};
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

// Cycles a core takes for one tile product at `fidelity` with `in0` x `in1` tiles, in a matmul
// whose output subblocks hold `subblock_tiles` tiles (1: 1 x 1, the measured #9723 cost; 2-8: the
// GEMM report's plateau).
double GemmTileCycles(const TtSoftware& sw, MathFidelity fidelity, TileFormat in0, TileFormat in1,
                      int subblock_tiles = 8);

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
