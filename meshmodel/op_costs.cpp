#include "meshmodel/op_costs.h"

#include <algorithm>

#include "mesh/experiments.h"
#include "mesh/perf_model.h"
#include "meshmodel/collectives.h"
#include "util/error.h"

namespace wc {
namespace {

double PerCore(int64_t units, int cores) {
  return static_cast<double>((units + cores - 1) / cores);
}

// Bytes per nanosecond a DRAM-interleaved stream read by `cores` cores gets: the chip's
// interleaved rate (it scales with the NoC clock), no more than the cores' read ports, no more
// than the DRAM.
double InterleavedGbps(const WormholeChipSpec& chip, const TtSoftware& sw, int cores) {
  return std::min({chip.dram_achievable_gbps, sw.interleaved_bytes_per_cycle * sw.aiclk_ghz,
                   cores * sw.core_read_bytes_per_cycle * sw.aiclk_ghz});
}

double Us(double cycles, const TtSoftware& sw) {
  return cycles / sw.aiclk_ghz / 1000.0;
}

OpCost FlashDecodeCost(const TtOp& op, const TtSoftware& sw) {
  MeshBenchConfig ac;
  ac.experiment = "decode-step";
  ac.mesh = "n150";  // every chip attends its own heads
  ac.bsz = static_cast<int>(op.batch);
  ac.n_q_heads = static_cast<int>(op.m_tiles);
  ac.n_kv_heads = static_cast<int>(op.n_tiles);
  ac.head_dim = static_cast<int>(op.k_tiles);
  ac.kv_len = static_cast<int>(op.tiles);
  ac.kv_dtype = TileFormatName(op.weights);
  ac.reduction = Reduction::kTree;
  const MeshBenchRow row = RunMeshBenchConfig(ac);
  OpCost c;
  c.fixed_us = sw.fixed_compute_us;
  c.dram_us = row.emulated_us;  // the attention model's op, streaming K and V
  c.us = c.fixed_us + c.dram_us;
  return c;
}

}  // namespace

TtSoftware MeasuredSoftware() {
  return TtSoftware{};
}

OpCost CostOf(const TtOp& op, int chips, const WormholeChipSpec& chip, const TtSoftware& sw) {
  if (op.read_bytes < 0 || op.write_bytes < 0 || op.tiles < 0 || op.ccl_bytes < 0 || op.runs < 0)
    throw Error(Cat("op ", op.name, ": sizes must be >= 0"));
  OpCost c;
  c.fixed_us = op.kind == TtOpKind::kDataMovement ? sw.fixed_move_us : sw.fixed_compute_us;
  const double read_dram = op.read_from == TtMemory::kDram ? op.read_bytes : 0;
  const double write_dram = op.write_to == TtMemory::kDram ? op.write_bytes : 0;
  switch (op.kind) {
    case TtOpKind::kMatmul: {
      const double weights = static_cast<double>(op.k_tiles * op.n_tiles) * TileBytes(op.weights);
      c.dram_bytes = weights + read_dram + write_dram;
      const double gbps = op.dram_sharded
                              ? std::min(sw.dram_sharded_gbps, chip.dram_achievable_gbps)
                              : InterleavedGbps(chip, sw, op.cores);
      c.dram_us = c.dram_bytes / gbps / 1000.0;
      const double products = op.m_tiles * PerCore(op.n_tiles, op.cores) * op.k_tiles;
      const double fused = op.tiles > 0 ? PerCore(op.tiles, op.cores) * op.cycles_per_tile : 0;
      c.compute_us =
          Us(products * MatmulTileCycles(chip, op.fidelity) + fused * sw.pass_cycles, sw);
      c.us = c.fixed_us + std::max(c.dram_us, c.compute_us);
      break;
    }
    case TtOpKind::kBatchedMatmul: {
      const double products = PerCore(op.batch, op.cores) * op.m_tiles * op.k_tiles * op.n_tiles;
      c.compute_us = Us(products * MatmulTileCycles(chip, op.fidelity), sw);
      // Each core reads its operands from the cores that hold them (sharded, or one user's K
      // per core) at its NoC port.
      c.noc_us = Us(op.read_bytes / op.cores / sw.core_read_bytes_per_cycle, sw);
      c.us = c.fixed_us + std::max(c.compute_us, c.noc_us);
      break;
    }
    case TtOpKind::kCompute: {
      c.compute_us = Us(PerCore(op.tiles, op.cores) * op.cycles_per_tile * sw.pass_cycles, sw);
      c.dram_bytes = read_dram + write_dram;
      c.dram_us = c.dram_bytes / InterleavedGbps(chip, sw, op.cores) / 1000.0;
      c.us = c.fixed_us + std::max(c.dram_us, c.compute_us);
      break;
    }
    case TtOpKind::kDataMovement: {
      // Reader and writer kernels overlap through a double-buffered circular buffer: the larger
      // side sets the time, each at the cores' copy rate or DRAM's interleaved rate.
      const double tile = 2048;  // bytes a copy step moves
      const double per_core =
          tile / (sw.noc_read_latency_cycles + tile / sw.noc_link_bytes_per_cycle);
      const double copy_gbps = op.cores * per_core * sw.aiclk_ghz;
      auto side_us = [&](double bytes, TtMemory where) {
        const double gbps = where == TtMemory::kDram
                                ? std::min(copy_gbps, InterleavedGbps(chip, sw, op.cores))
                                : copy_gbps;
        return bytes / gbps / 1000.0;
      };
      const double r = side_us(op.read_bytes, op.read_from);
      const double w = side_us(op.write_bytes, op.write_to);
      c.dram_bytes = read_dram + write_dram;
      (read_dram + write_dram > 0 ? c.dram_us : c.noc_us) = std::max(r, w);
      c.us = c.fixed_us + std::max(r, w);
      break;
    }
    case TtOpKind::kAllGather:
    case TtOpKind::kReduceScatter: {
      RingSpec ring;
      ring.chips = chips;
      ring.links = sw.eth_links;
      ring.bidirectional = true;  // tt-metal's ring CCLs of the time (enable_bidirectional)
      ring.eth.link_gbps = sw.eth_gbps;
      const CollectiveKind kind = op.kind == TtOpKind::kAllGather ? CollectiveKind::kAllGather
                                                                  : CollectiveKind::kReduceScatter;
      const CollectiveCost cc = RingCollective(kind, ring, op.ccl_bytes);
      c.fixed_us = chips > 1 ? sw.ccl_fixed_us : 0;
      c.eth_us = cc.us;
      c.us = c.fixed_us + c.eth_us;
      break;
    }
    case TtOpKind::kFlashDecode:
      return FlashDecodeCost(op, sw);
  }
  return c;
}

}  // namespace wc
