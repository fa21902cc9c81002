// A performance model of decode attention on Wormhole: turns what the emulated cores did (an
// OpTrace of the FlashDecode engine) into device time, and estimates the unfused baseline the seed
// compares against (seed 000 §4.1; docs/references.md). Every formula and constant is documented
// in mesh/README.md ("The performance model"); every constant lives in WormholeChipSpec.
//
// FlashDecode, per emulated core:
//   read    K and V chunks from DRAM: bytes at min(core read port, chip DRAM / streaming cores),
//           plus one DRAM round trip at every read barrier (the reader waits on a barrier every
//           (read_barrier_budget_bytes / op cores) / read_barrier_q_tile_bytes tiles, and after
//           every K and every V chunk); Q is read first (pipeline fill).
//   compute matmul tiles x cycles at the math fidelity + SFPU tiles x sfpu_tile_cycles, per chunk;
//           reads and compute of consecutive chunks overlap (double-buffered K/V):
//           T = read(Q) + R + C + (chunks - 1) * max(R, C).
//   reduce  NoC writes of partials (overhead + bytes / 30 B/cycle + hops * hop cycles; writes into
//           one receiver serialize on its incoming link), a semaphore increment after each write;
//           a receiver merges after its semaphore count is reached (flat: all workers at once;
//           tree: step by step), then the reducer's final fold and normalization.
// Op time = slowest core on the slowest chip + one kernel launch. KV heads are split over chips
// and every chip attends its own heads: the attention op itself sends nothing over ethernet.
#pragma once

#include <cstdint>
#include <string>

#include "attention/flash_decode.h"
#include "mesh/wormhole_spec.h"

namespace wc {

// The shape of one decode-attention op, as the model needs it.
struct AttentionShape {
  int bsz = 0, n_q_heads = 0, n_kv_heads = 0, head_dim = 0, kv_len = 0;
  double kv_row_bytes = 0;  // one K (or V) row of head_dim values in the stored format
  int queries = 0;          // query positions over all users (0: one per user)
  // The seed's FLOP count: 4 * queries * kv_len * head_dim * n_q_heads.
  double Flops() const;
  // K + V bytes of the whole cache (every row up to kv_len, padded to 32 rows).
  double KVBytes() const;
};
AttentionShape ShapeOf(const DecodeAttentionOp& op);

struct PerfEstimate {
  bool feasible = true;  // baseline only: false when the op cannot run on the chip (see `note`)
  std::string note;
  double emulated_us = 0;  // device time of the op (the slowest chip)
  double dram_bytes = 0;   // K + V bytes read (the seed's bandwidth numerator), all chips
  double dram_gbps = 0;    // dram_bytes / emulated time: the mesh's achieved KV bandwidth
  double tflops = 0;       // AttentionShape::Flops() / emulated time
  double noc_bytes = 0;    // partial bytes written over the NoC (FlashDecode reductions)
  int64_t cores_used = 0;  // active cores, all chips
  // Where the slowest core's time went, in microseconds since launch.
  double launch_us = 0;
  double local_done_us = 0;  // its last chunk computed (reads + compute pipeline)
  double reduced_us = 0;     // its reduction and normalization done
  // The longest time any core spends reading K and V from DRAM (its chunks' reads, as if not
  // overlapped with compute): the part of the op that scales with the cache format's bytes.
  double kv_read_us = 0;
};

// Device time of a FlashDecode op from its trace (a planning run suffices: compute = false).
// `fidelity` sets the matmul cycles. Throws wc::Error for a shape with invalid heads.
PerfEstimate EstimateFlashDecode(const OpTrace& trace, const MeshSpec& mesh,
                                 const AttentionShape& shape, MathFidelity fidelity);

// Device time of the unfused TTNN decode attention the seed compares against (seed 000 section
// 4.1), as tt-metal's Falcon-7B ran it with inputs and outputs in DRAM: K sliced from the cache and
// transposed, V sliced (copies), Q K^T with a KV head's query heads as the rows of one padded tile
// row, the bf16 scores [32, kv_len] scaled, masked (an explicit mask read) and softmaxed, each a
// DRAM round trip, then scores V. Each op runs on up to all cores of a chip (parallel over its
// output tiles / tile rows) and pays a kernel launch. Not feasible (feasible = false,
// emulated_us = 0) when a softmax tile row of scores does not fit a core's L1.
PerfEstimate EstimateBaselineAttention(const MeshSpec& mesh, const AttentionShape& shape,
                                       MathFidelity fidelity);

// Nanoseconds one core needs to read `tiles` tiles of `tile_bytes` from DRAM in one run (one
// barrier at its end) while `streaming` cores of the chip read, for an op spread over `op_cores`
// cores (which sets the read-barrier interval).
double DramReadNs(const WormholeChipSpec& chip, int64_t tiles, double tile_bytes, int streaming,
                  int op_cores);

// Matmul cycles per 32x32x32 tile at `fidelity`.
int MatmulTileCycles(const WormholeChipSpec& chip, MathFidelity fidelity);

}  // namespace wc
