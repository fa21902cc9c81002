#include "meshmodel/op_costs.h"

#include <algorithm>
#include <cmath>

#include "mesh/experiments.h"
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
  ac.q_len = op.q_len;  // a verify step: causal queries per user, the KV read once
  ac.kv_len = static_cast<int>(op.tiles) + op.q_len - 1;  // the last query attends them all
  ac.kv_dtype = TileFormatName(op.weights);
  ac.reduction = Reduction::kTree;
  const MeshBenchRow row = RunMeshBenchConfig(ac);
  OpCost c;
  c.fixed_us = Us(sw.fixed_compute_cycles, sw);
  c.dram_us = row.emulated_us;  // the attention model's op, streaming K and V
  c.us = c.fixed_us + c.dram_us;
  return c;
}

}  // namespace

double GemmTileCycles(const TtSoftware& sw, MathFidelity fidelity, TileFormat in0, TileFormat in1,
                      int subblock_tiles) {
  double plateau = sw.gemm_cycles_hifi4_bf16;
  switch (fidelity) {
    case MathFidelity::kLoFi:
      plateau = in0 == TileFormat::kBFP4 && in1 == TileFormat::kBFP4 ? sw.gemm_cycles_lofi_bfp4
                                                                     : sw.gemm_cycles_lofi_bfp8;
      break;
    case MathFidelity::kHiFi2: {
      auto half = [&](TileFormat f) {
        return (f == TileFormat::kBF16 ? sw.gemm_cycles_hifi2_bf16 : sw.gemm_cycles_hifi2_bfp8) / 2;
      };
      plateau = half(in0) + half(in1);
      break;
    }
    case MathFidelity::kHiFi4:
      plateau = sw.gemm_cycles_hifi4_bf16;
      break;
  }
  if (subblock_tiles > 1) return plateau;
  // #9723's ratio to the plateau of the format it measured (bf16 x BFP8_B at HiFi2).
  return plateau * sw.gemm_cycles_1x1_hifi2_bf16_bfp8 /
         GemmTileCycles(sw, MathFidelity::kHiFi2, TileFormat::kBF16, TileFormat::kBFP8);
}

TtSoftware MeasuredSoftware() {
  return TtSoftware{};
}

OpCost CostOf(const TtOp& op, int chips, const WormholeChipSpec& chip, const TtSoftware& sw) {
  if (op.read_bytes < 0 || op.write_bytes < 0 || op.tiles < 0 || op.ccl_bytes < 0 || op.runs < 0)
    throw Error(Cat("op ", op.name, ": sizes must be >= 0"));
  OpCost c;
  c.fixed_us =
      Us(op.kind == TtOpKind::kDataMovement ? sw.fixed_move_cycles : sw.fixed_compute_cycles, sw);
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
      // A grid of m_split rows of cores (each a share of m) by cores / m_split columns.
      const int cols = std::max(1, op.cores / std::max(1, op.m_split));
      const double products =
          PerCore(op.m_tiles, op.m_split) * PerCore(op.n_tiles, cols) * op.k_tiles;
      const double fused = op.tiles > 0 ? PerCore(op.tiles, op.cores) : 0;
      c.compute_us =
          Us(products * GemmTileCycles(sw, op.fidelity, op.act, op.weights, op.out_subblock_tiles) +
                 fused * sw.fused_activation_tile_cycles,
             sw);
      c.us = c.fixed_us + std::max(c.dram_us, c.compute_us);
      break;
    }
    case TtOpKind::kBatchedMatmul: {
      const double products = PerCore(op.batch, op.cores) * op.m_tiles * op.k_tiles * op.n_tiles;
      c.compute_us =
          Us(products * GemmTileCycles(sw, op.fidelity, op.act, op.weights, op.out_subblock_tiles),
             sw);
      // Each core reads its operands from the cores that hold them (sharded, or one user's K
      // per core) at its NoC port.
      c.noc_us = Us(op.read_bytes / op.cores / sw.core_read_bytes_per_cycle, sw);
      c.us = c.fixed_us + std::max(c.compute_us, c.noc_us);
      break;
    }
    case TtOpKind::kCompute: {
      c.compute_us = Us(PerCore(op.tiles, op.cores) * op.passes * sw.pass_cycles, sw);
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
    case TtOpKind::kSdpa: {
      // Causal: 2 heads s^2 d FLOPs, at the report's rate for this length on its 64 cores at
      // 1 GHz, scaled to the op's cores and clock.
      const double seq = 32.0 * op.m_tiles, d = 32.0 * op.k_tiles;
      const double flops = 2.0 * op.batch * seq * seq * d;
      const double x = std::clamp(std::log2(seq / 512.0), 0.0, 3.0);
      const int i = std::min(2, static_cast<int>(x));
      const double tflops =
          sw.sdpa_tflops[i] + (sw.sdpa_tflops[i + 1] - sw.sdpa_tflops[i]) * (x - i);
      c.compute_us = flops / (tflops * 1e12 * op.cores / 64.0 * sw.aiclk_ghz) * 1e6;
      c.us = c.fixed_us + c.compute_us;
      break;
    }
  }
  return c;
}

}  // namespace wc
