#include "meshmodel/op_costs.h"

#include <algorithm>

#include "mesh/perf_model.h"
#include "util/error.h"

namespace wc {

int64_t Tiles(int64_t n) {
  return (n + 31) / 32;
}

double LaunchUs(const WormholeChipSpec& chip) {
  return chip.kernel_launch_cycles / chip.clock_ghz / 1000.0;
}

const char* TileFormatName(TileFormat f) {
  switch (f) {
    case TileFormat::kBF16:
      return "bf16";
    case TileFormat::kBFP8:
      return "bfp8";
    case TileFormat::kBFP4:
      return "bfp4";
  }
  return "?";
}

TileFormat ParseTileFormat(const std::string& name, const std::string& flag) {
  if (name == "bf16") return TileFormat::kBF16;
  if (name == "bfp8") return TileFormat::kBFP8;
  if (name == "bfp4") return TileFormat::kBFP4;
  throw Error(Cat(flag, " '", name, "' is not a Wormhole tile format; choose bf16, bfp8 or bfp4"));
}

double TileBytes(TileFormat f) {
  static const WormholeChipSpec chip;
  switch (f) {
    case TileFormat::kBF16:
      return chip.bf16_tile_bytes;
    case TileFormat::kBFP8:
      return chip.bfp8_tile_bytes;
    case TileFormat::kBFP4:
      return chip.bfp4_tile_bytes;
  }
  return 0;
}

OpCost MatmulCost(const WormholeChipSpec& chip, int64_t m, int64_t k, int64_t n, TileFormat weights,
                  MathFidelity fidelity) {
  WC_CHECK(m > 0 && k > 0 && n > 0, "matmul dims must be positive");
  OpCost c;
  c.launch_us = LaunchUs(chip);
  const int64_t weight_tiles = Tiles(k) * Tiles(n);
  c.dram_bytes = static_cast<double>(weight_tiles) * TileBytes(weights) +
                 static_cast<double>(Tiles(m) * Tiles(k)) * TileBytes(TileFormat::kBF16);
  c.dram_us = c.dram_bytes / chip.dram_achievable_gbps / 1000.0;  // GB/s = bytes per ns
  const int64_t cores = static_cast<int64_t>(chip.compute_x) * chip.compute_y;
  const int64_t out_tiles = Tiles(m) * Tiles(n);
  const int64_t tiles_per_core = (out_tiles + cores - 1) / cores;
  const double cycles =
      static_cast<double>(tiles_per_core * Tiles(k)) * MatmulTileCycles(chip, fidelity);
  c.compute_us = cycles / chip.clock_ghz / 1000.0;
  c.us = c.launch_us + std::max(c.dram_us, c.compute_us);
  return c;
}

OpCost EltwiseCost(const WormholeChipSpec& chip, int64_t tiles, int passes, double dram_bytes) {
  WC_CHECK(tiles >= 0 && passes >= 0 && dram_bytes >= 0, "element-wise op sizes must be >= 0");
  OpCost c;
  c.launch_us = LaunchUs(chip);
  const int64_t cores = static_cast<int64_t>(chip.compute_x) * chip.compute_y;
  const int64_t tiles_per_core = (tiles + cores - 1) / cores;
  c.compute_us = static_cast<double>(tiles_per_core) * passes * chip.sfpu_tile_cycles /
                 chip.clock_ghz / 1000.0;
  c.dram_bytes = dram_bytes;
  c.dram_us = dram_bytes / chip.dram_achievable_gbps / 1000.0;
  c.us = c.launch_us + std::max(c.dram_us, c.compute_us);
  return c;
}

}  // namespace wc
