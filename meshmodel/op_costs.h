// Device time of the non-attention ops of a decode step on one Wormhole chip, from the figures in
// mesh/wormhole_spec.h (their sources are there and in mesh/README.md). Every op pays
// one kernel launch (dispatch + program start) and runs on up to the chip's compute grid:
//
//   matmul [m, k] x [k, n] with weights in DRAM (decode: m = users, padded to 32):
//     DRAM    = (k/32 * n/32 weight tiles * tile bytes + m x k activations in bf16) over the chip's
//               achievable DRAM bandwidth: at decode batch sizes every weight byte is read once
//               per step and the matmul is bound by it;
//     compute = ceil(m/32) * k/32 * n/32 tile products * cycles at the math fidelity, over the
//               cores (every core gets whole output tiles);
//     time    = launch + max(DRAM, compute).
//   element-wise (layer norm, RoPE, GELU, adds, cache updates) on activations held in L1:
//     time    = launch + tiles * SFPU passes * sfpu_tile_cycles over the cores (+ DRAM bytes, if
//               any, over the bandwidth, whichever is larger).
#pragma once

#include <cstdint>
#include <string>

#include "attention/flash_decode.h"
#include "mesh/wormhole_spec.h"

namespace wc {

// A Wormhole tile format for weights or the KV cache.
enum class TileFormat { kBF16, kBFP8, kBFP4 };
const char* TileFormatName(TileFormat f);  // "bf16", "bfp8", "bfp4"
TileFormat ParseTileFormat(const std::string& name, const std::string& flag);  // throws wc::Error
// Bytes of one 32 x 32 tile (WormholeChipSpec's): bf16 2048; BFP8_B 1024 mantissas + 64 exponents
// = 1088; BFP4_B 512 + 64 = 576.
double TileBytes(TileFormat f);
// 32 x 32 tiles spanning n values: ceil(n / 32).
int64_t Tiles(int64_t n);
// One op's kernel launch (dispatch + program start), microseconds.
double LaunchUs(const WormholeChipSpec& chip);

// One op's modelled time and where it goes (microseconds; DRAM and compute overlap, the op takes
// the larger plus its launch).
struct OpCost {
  double us = 0;
  double launch_us = 0, dram_us = 0, compute_us = 0;
  double dram_bytes = 0;
};

OpCost MatmulCost(const WormholeChipSpec& chip, int64_t m, int64_t k, int64_t n, TileFormat weights,
                  MathFidelity fidelity);
// `tiles` 32 x 32 tiles, `passes` SFPU passes each, `dram_bytes` read or written in DRAM.
OpCost EltwiseCost(const WormholeChipSpec& chip, int64_t tiles, int passes, double dram_bytes);

}  // namespace wc
