#include "mesh/perf_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "util/error.h"
#include "util/int_math.h"

namespace wc {
namespace {

double NsPerCycle(const WormholeChipSpec& chip) {
  return 1.0 / chip.clock_ghz;
}

// Bytes of one 32 x 32 tile of K or V in the stored format (a row of head_dim values is
// kv_row_bytes; rows are padded to whole tiles).
double KVTileBytes(const AttentionShape& s) {
  return s.kv_row_bytes * 32.0 / static_cast<double>(CeilDiv(s.head_dim, 32));
}

// One NoC write in flight: when it may start, and what it carries.
struct PendingWrite {
  double ready_ns;
  int src;  // trace index
  int dst;  // trace index
  int64_t bytes;
  int hops;
};

}  // namespace

double AttentionShape::Flops() const {
  return 4.0 * (queries > 0 ? queries : bsz) * static_cast<double>(kv_len) * head_dim * n_q_heads;
}

double AttentionShape::KVBytes() const {
  const double padded = static_cast<double>(CeilDiv(kv_len, 32) * 32);
  return 2.0 * bsz * n_kv_heads * padded * kv_row_bytes;
}

AttentionShape ShapeOf(const DecodeAttentionOp& op) {
  WC_CHECK(op.kv != nullptr, "op without a K/V view");
  AttentionShape s;
  s.bsz = op.bsz;
  s.n_q_heads = op.n_q_heads;
  s.n_kv_heads = op.n_kv_heads;
  s.head_dim = op.head_dim;
  s.kv_len = op.kv_len;
  s.kv_row_bytes = op.kv->RowBytes();
  s.queries = op.tokens();
  return s;
}

int MatmulTileCycles(const WormholeChipSpec& chip, MathFidelity fidelity) {
  switch (fidelity) {
    case MathFidelity::kLoFi:
      return chip.matmul_tile_cycles_lofi;
    case MathFidelity::kHiFi2:
      return chip.matmul_tile_cycles_hifi2;
    case MathFidelity::kHiFi4:
      return chip.matmul_tile_cycles_hifi4;
  }
  return chip.matmul_tile_cycles_hifi4;
}

double DramReadNs(const WormholeChipSpec& chip, int64_t tiles, double tile_bytes, int streaming,
                  int op_cores) {
  if (tiles <= 0) return 0.0;
  const double share_gbps =  // GB/s == bytes per ns
      std::min(chip.core_dram_read_gbps, chip.dram_achievable_gbps / std::max(1, streaming));
  const int64_t per_barrier = std::max<int64_t>(
      1, chip.read_barrier_budget_bytes / std::max(1, op_cores) / chip.read_barrier_q_tile_bytes);
  const int64_t barriers = CeilDiv(tiles, per_barrier);
  return static_cast<double>(barriers) * chip.dram_latency_ns +
         static_cast<double>(tiles) * tile_bytes / share_gbps;
}

PerfEstimate EstimateFlashDecode(const OpTrace& trace, const MeshSpec& mesh,
                                 const AttentionShape& shape, MathFidelity fidelity) {
  const WormholeChipSpec& chip = mesh.chip;
  if (shape.n_kv_heads < 1 || shape.n_q_heads % shape.n_kv_heads != 0 || shape.head_dim < 1)
    throw Error(Cat("attention shape heads ", shape.n_q_heads, "/", shape.n_kv_heads, ", head_dim ",
                    shape.head_dim, " is not a valid decode-attention shape"));
  const double cyc = NsPerCycle(chip);
  const int hd_tiles = static_cast<int>(CeilDiv(shape.head_dim, 32));
  const int q_tile_rows = static_cast<int>(CeilDiv(shape.n_q_heads / shape.n_kv_heads, 32));
  const double kv_tile_bytes = KVTileBytes(shape);
  const int mm_cycles = MatmulTileCycles(chip, fidelity);
  const int n_cores = mesh.cores_per_chip();

  PerfEstimate est;
  est.launch_us = chip.kernel_launch_cycles * cyc / 1000.0;
  est.cores_used = static_cast<int64_t>(trace.cores.size());
  est.dram_bytes = trace.dram_bytes;
  est.noc_bytes = trace.noc_bytes;

  // Per chip: the cores streaming K/V, and the op's cores (what sets the read-barrier interval:
  // the real op is configured for cores_per_work cores per work even when some have no chunk).
  std::map<int, std::vector<int>> chip_cores;  // chip -> trace indices
  for (int i = 0; i < static_cast<int>(trace.cores.size()); ++i)
    chip_cores[trace.cores[i].chip].push_back(i);

  double op_ns = 0;
  for (const auto& [chip_id, members] : chip_cores) {
    int streaming = 0, works = 0;
    for (int i : members) {
      streaming += trace.cores[i].chunks > 0 ? 1 : 0;
      works += trace.cores[i].rank == 0 ? trace.cores[i].works : 0;
    }
    const int op_cores = trace.cores_per_work > 1 ? std::min(n_cores, works * trace.cores_per_work)
                                                  : static_cast<int>(members.size());

    // ---- Local phase: Q read, then the double-buffered read/compute pipeline over its chunks.
    std::vector<double> ready(trace.cores.size(), 0.0);
    std::map<int, int> by_core;  // core index on this chip -> trace index
    for (int i : members) {
      const CoreTrace& ct = trace.cores[i];
      by_core[ct.core] = i;
      if (ct.chunks == 0) continue;  // exits at once (a rank-0 core still reduces, below)
      const double chunk_bytes = ct.dram_bytes / static_cast<double>(ct.chunks);
      const auto half_tiles =  // K (or V) tiles per chunk
          static_cast<int64_t>(std::ceil(chunk_bytes / 2.0 / kv_tile_bytes - 1e-9));
      const double read_ns = 2.0 * DramReadNs(chip, half_tiles, kv_tile_bytes, streaming, op_cores);
      const double compute_ns = (static_cast<double>(ct.matmul_tiles) * mm_cycles +
                                 static_cast<double>(ct.sfpu_tiles) * chip.sfpu_tile_cycles) *
                                cyc / static_cast<double>(ct.chunks);
      const double q_ns =
          DramReadNs(chip, static_cast<int64_t>(q_tile_rows) * hd_tiles * ct.queries,
                     chip.bf16_tile_bytes, streaming, op_cores);
      ready[i] = q_ns + read_ns + compute_ns +
                 static_cast<double>(ct.chunks - 1) * std::max(read_ns, compute_ns);
      est.kv_read_us = std::max(est.kv_read_us, static_cast<double>(ct.chunks) * read_ns / 1000.0);
    }
    std::vector<double> local_done = ready;

    // ---- Reduction: steps in order; each step's writes, then each receiver's merge.
    int steps = 0;
    for (int i : members)
      for (const auto& w : trace.cores[i].writes) steps = std::max(steps, w.step + 1);
    std::vector<double> link_free(trace.cores.size(), 0.0);  // receiver's incoming link
    for (int step = 0; step < steps; ++step) {
      std::vector<PendingWrite> writes;
      for (int i : members) {
        for (const auto& w : trace.cores[i].writes) {
          if (w.step != step) continue;
          const auto dst = by_core.find(w.dst_core);
          WC_CHECK(dst != by_core.end(), "NoC write to core ", w.dst_core, " not in the trace");
          writes.push_back({ready[i], i, dst->second, w.bytes, w.hops});
        }
      }
      std::stable_sort(
          writes.begin(), writes.end(),
          [](const PendingWrite& a, const PendingWrite& b) { return a.ready_ns < b.ready_ns; });
      std::vector<double> arrived(trace.cores.size(), 0.0);  // last semaphore increment
      for (const PendingWrite& w : writes) {
        const double head =
            w.ready_ns + (chip.noc_write_overhead_cycles + w.hops * chip.noc_hop_cycles) * cyc;
        const double data_ns =
            static_cast<double>(w.bytes) / chip.noc_large_transfer_bytes_per_cycle * cyc;
        const double done = std::max(head, link_free[w.dst]) + data_ns;
        link_free[w.dst] = done;
        const double sem = done + chip.semaphore_inc_cycles * cyc;
        ready[w.src] = sem;  // a sender is finished once its increment landed
        arrived[w.dst] = std::max(arrived[w.dst], sem);
      }
      for (int i : members) {
        const CoreTrace& ct = trace.cores[i];
        if (step >= static_cast<int>(ct.received_per_step.size()) ||
            ct.received_per_step[step] == 0)
          continue;
        const int64_t tiles = step < static_cast<int>(ct.merge_tiles_per_step.size())
                                  ? ct.merge_tiles_per_step[step]
                                  : 0;
        ready[i] = std::max(ready[i], arrived[i]) +
                   static_cast<double>(tiles) * chip.merge_tile_cycles * cyc;
      }
    }
    // Final fold and normalization (reducers, and cores that own whole works).
    for (int i : members) {
      const CoreTrace& ct = trace.cores[i];
      if (ct.rank == 0)
        ready[i] += static_cast<double>(ct.final_merge_tiles) * chip.merge_tile_cycles * cyc;
    }
    for (int i : members) {
      if (ready[i] > op_ns) {
        op_ns = ready[i];
        est.local_done_us = (est.launch_us * 1000.0 + local_done[i]) / 1000.0;
        est.reduced_us = (est.launch_us * 1000.0 + ready[i]) / 1000.0;
      }
    }
  }
  const double total_ns = op_ns + chip.kernel_launch_cycles * cyc;
  est.emulated_us = total_ns / 1000.0;
  est.dram_gbps = est.dram_bytes / total_ns;
  est.tflops = shape.Flops() / total_ns / 1000.0;
  return est;
}

PerfEstimate EstimateBaselineAttention(const MeshSpec& mesh, const AttentionShape& shape,
                                       MathFidelity fidelity) {
  const WormholeChipSpec& chip = mesh.chip;
  if (shape.n_kv_heads < 1 || shape.n_q_heads % shape.n_kv_heads != 0 || shape.head_dim < 1)
    throw Error(Cat("attention shape heads ", shape.n_q_heads, "/", shape.n_kv_heads, ", head_dim ",
                    shape.head_dim, " is not a valid decode-attention shape"));
  const double cyc = NsPerCycle(chip);
  const int64_t n_cores = mesh.cores_per_chip();
  const int64_t hd_tiles = CeilDiv(shape.head_dim, 32);
  // TTNN's decode attention before FlashDecode (tt-metal's Falcon-7B decode,
  // models/demos/falcon7b_common/tt/falcon_attention.py, DRAM-interleaved path): a KV head's query
  // heads are the rows of one padded tile row (group_attn_matmul), so K and V are read once per
  // (user, KV head) group - but K is first sliced out of the cache and transposed, V sliced, and
  // the bf16 scores [32, kv_len] make a DRAM round trip for each of scale, mask add and softmax.
  const int64_t qpk = shape.n_q_heads / shape.n_kv_heads;
  const int64_t rows = CeilDiv(qpk, 32);         // score tile rows per group
  const int64_t lt = CeilDiv(shape.kv_len, 32);  // score tiles per row
  const int64_t chips_used = std::min<int64_t>(mesh.chips, shape.n_kv_heads);
  const int64_t groups = static_cast<int64_t>(shape.bsz) * CeilDiv(shape.n_kv_heads, chips_used);
  const double kv_tile = KVTileBytes(shape), s_tile = chip.bf16_tile_bytes;
  const int mm = MatmulTileCycles(chip, fidelity);

  PerfEstimate est;
  est.dram_bytes = shape.KVBytes();
  est.launch_us = chip.kernel_launch_cycles * cyc / 1000.0;
  // A softmax core holds one tile row of scores, [32, kv_len] bf16, in L1.
  const int64_t row_bytes = lt * chip.bf16_tile_bytes;
  if (row_bytes > chip.l1_bytes) {
    est.feasible = false;
    est.note = Cat("softmax needs a [32, ", shape.kv_len, "] bf16 score row (", row_bytes >> 10,
                   " KiB) in one core's L1 (", chip.l1_bytes >> 10, " KiB)");
    return est;
  }
  // One TTNN op over `units` work units spread over up to all cores; the slowest core does
  // ceil(units / cores) units: it reads/writes `tiles` tiles of `bytes` and computes `cycles`.
  struct CoreLoad {
    int64_t tiles = 0;
    double bytes = 0, cycles = 0;
  };
  int64_t max_cores = 0;
  auto op_ns = [&](int64_t units, const CoreLoad& load) {
    const int64_t cores = std::min(n_cores, units);
    max_cores = std::max(max_cores, cores);
    const double dram = DramReadNs(chip, load.tiles, load.bytes / std::max<int64_t>(1, load.tiles),
                                   static_cast<int>(cores), static_cast<int>(cores));
    return chip.kernel_launch_cycles * cyc + std::max(dram, load.cycles * cyc);
  };
  auto per_core = [&](int64_t units) { return CeilDiv(units, std::min(n_cores, units)); };
  // A tile-wise op over `units` tiles: each reads `in` tiles (of `in_bytes` each) and writes one
  // of `out_bytes`, with `sfpu_ops` vector passes per tile.
  auto tilewise = [&](int64_t units, int in, double in_bytes, double out_bytes, int sfpu_ops) {
    const int64_t upc = per_core(units);
    CoreLoad load;
    load.tiles = upc * (in + 1);
    load.bytes = static_cast<double>(upc) * (in * in_bytes + out_bytes);
    load.cycles = static_cast<double>(upc) * sfpu_ops * chip.sfpu_tile_cycles;
    return op_ns(units, load);
  };
  const int64_t kv_tiles = groups * lt * hd_tiles;  // one group's K (or V) slice, all groups
  const int64_t score_tiles = groups * rows * lt;

  // K: slice the cache to kv_len (a copy), transpose it (a copy; one transpose pass per tile).
  double total_ns = tilewise(kv_tiles, 1, kv_tile, kv_tile, 0);
  total_ns += tilewise(kv_tiles, 1, kv_tile, kv_tile, 1);
  // Q K^T: one unit per score tile; reads Q once and hd_tiles K^T tiles per score tile, writes it.
  {
    const int64_t upc = per_core(score_tiles);
    CoreLoad qk;
    qk.tiles = rows * hd_tiles + upc * (hd_tiles + 1);
    qk.bytes = rows * hd_tiles * s_tile + upc * (hd_tiles * kv_tile + s_tile);
    qk.cycles = static_cast<double>(upc * hd_tiles) * mm;
    total_ns += op_ns(score_tiles, qk);
  }
  // Scale, then add the explicit mask (FlashDecode needs neither: seed 000 section 2.2).
  total_ns += tilewise(score_tiles, 1, s_tile, s_tile, 1);
  total_ns += tilewise(score_tiles, 2, s_tile, s_tile, 1);
  // Softmax: one unit per tile row; reads and writes the row, softmax_sfpu_ops_per_tile passes.
  {
    const int64_t upc = per_core(groups * rows);
    CoreLoad sm;
    sm.tiles = 2 * upc * lt;
    sm.bytes = static_cast<double>(sm.tiles) * s_tile;
    sm.cycles =
        static_cast<double>(upc * lt) * chip.softmax_sfpu_ops_per_tile * chip.sfpu_tile_cycles;
    total_ns += op_ns(groups * rows, sm);
  }
  // V: slice the cache to kv_len.
  total_ns += tilewise(kv_tiles, 1, kv_tile, kv_tile, 0);
  // scores V: one unit per output tile (no split of kv_len over cores); a core reads each score
  // row it needs once and a kv_len x 32 column of V per output tile.
  {
    const int64_t pv_units = groups * rows * hd_tiles;
    const int64_t upc = per_core(pv_units);
    const int64_t pv_rows = CeilDiv(upc, hd_tiles);
    CoreLoad pv;
    pv.tiles = pv_rows * lt + upc * lt;
    pv.bytes = static_cast<double>(pv_rows * lt) * s_tile + static_cast<double>(upc * lt) * kv_tile;
    pv.cycles = static_cast<double>(upc * lt) * mm;
    total_ns += op_ns(pv_units, pv);
  }
  est.cores_used = max_cores * chips_used;
  est.emulated_us = total_ns / 1000.0;
  est.dram_gbps = est.dram_bytes / total_ns;
  est.tflops = shape.Flops() / total_ns / 1000.0;
  return est;
}

}  // namespace wc
