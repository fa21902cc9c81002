// The op lists tt-metal ran for a Falcon model on Wormhole, as data: every device program of one
// decode step (or one prompt's prefill, tt_graph_prefill.cpp) with its shapes, core grid, memory
// layouts and formats, so that meshmodel/op_costs.h can price each one. Two programs are recorded,
// each as it stood when tt-metal measured its published device-only figures
// (docs/tt-metal/falcon7b-graph.md and falcon40b-graph.md give every op with its source line):
//
//   one chip    models/demos/falcon7b_common/tt/ at 3216f4bb (2024-09-23; the decode graph is the
//               same from df4e5049, 2024-07-26, when the 625 samples/s target was set): 29 programs
//               a layer; activations bf16 in DRAM, weights BFP8_B DRAM-interleaved, matmuls on an
//               8x7 grid with 1D multicast of the activations, attention as a batched matmul,
//               a sharded softmax and a second batched matmul on 8x4 (a user per core), the query
//               heads padded to a multiple of 32 rows, K/V caches bf16 in DRAM.
//   several     models/demos/t3000/falcon40b/tt/ at fc937bf74f (2024-08-23, standing in for
//   chips       v0.51.0-rc35; the same decode graph since 3495c524, 2024-07-31): 35 programs a
//               layer, tensor parallel over a ring of the chips; activations BFP8_B in L1
//               (width-sharded 8x4 between ops, interleaved for the collectives), weights BFP8_B
//               DRAM-interleaved, QKV on 8 cores and the other matmuls on 8x4, attention as
//               group_attn_matmul / sharded softmax / group_attn_matmul on the query heads' cores,
//               K/V caches BFP8_B in DRAM, two all-gathers and a reduce-scatter on one link.
//
// A loaded model other than the presets gets the program of its chip count with its own shapes.
// What-ifs (TtGraphOptions) change one thing each: FlashDecode in place of the attention ops,
// DRAM-sharded weights, the weight formats, links. The clock is a costing matter (op_costs.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attention/flash_decode.h"
#include "kernels/gemm/format_table.h"
#include "model/config.h"

namespace wc {

// A Wormhole tile format for weights, activations or the KV cache: format_table.h's TileFormat,
// the one a host weight format is counted as.
const char* TileFormatName(TileFormat f);  // "bf16", "bfp8", "bfp4"
TileFormat ParseTileFormat(const std::string& name, const std::string& flag);  // throws wc::Error
// Bytes of one 32 x 32 tile: bf16 2048; BFP8_B 1024 mantissas + 64 exponents = 1088; BFP4_B 512 +
// 64 = 576.
double TileBytes(TileFormat f);
// 32 x 32 tiles spanning n values: ceil(n / 32).
int64_t Tiles(int64_t n);

enum class TtOpKind {
  kMatmul,         // [m, k] x [k, n] with the weights (in1) in DRAM; activations multicast (1D)
  kBatchedMatmul,  // `batch` products with both operands in L1 (attention scores, scores x V)
  kCompute,        // Tensix math on tiles in L1: layer norm, softmax, rotary embedding, adds
  kDataMovement,   // layout conversions, slices, transposes, pads, heads, cache writes, embedding
  kAllGather,      // ring collectives over Ethernet between the chips
  kReduceScatter,
  kFlashDecode,  // what-if: the fused decode attention op, priced by mesh/perf_model.h
  kSdpa,         // prefill: scaled_dot_product_attention (flash attention), causal
};
const char* TtOpKindName(TtOpKind k);

enum class TtMemory { kDram, kL1 };

// One device program, run `runs` times a step (a per-layer op: once a layer).
struct TtOp {
  std::string name;  // what the step does with it: "qkv", "interleaved_to_sharded", "softmax", ...
  TtOpKind kind = TtOpKind::kCompute;
  int runs = 1;
  int cores = 1;  // Tensix cores the program runs on
  // kMatmul: one [m, k] x [k, n] product in tiles, on a grid of `m_split` rows of cores (each
  // row a share of m; 1: a 1D matmul, every core all of m) and cores / m_split columns (each a
  // share of n); kBatchedMatmul: `batch` products spread over `cores` (whole products a core);
  // kSdpa: `batch` heads of m x m causal attention with k head_dim tiles.
  int64_t m_tiles = 0, k_tiles = 0, n_tiles = 0, batch = 1;
  int m_split = 1;
  int q_len = 1;  // kFlashDecode: query positions per user (causal within them)
  TileFormat weights = TileFormat::kBFP8;  // kMatmul: in1's format in DRAM
  TileFormat act = TileFormat::kBF16;      // in0's format (and the activations')
  bool dram_sharded = false;               // kMatmul: in1 sharded by DRAM bank (else interleaved)
  MathFidelity fidelity = MathFidelity::kLoFi;
  // kMatmul, kBatchedMatmul: tiles of the program's output subblock (out_subblock_h x
  // out_subblock_w). 1 where tt-metal's program ran 1 x 1 (its di/dt and hang workarounds, as the
  // graph files record them); the default stands for the 2-8 tile subblocks tt-metal's configs
  // pick otherwise, which op_costs.h prices alike (the GEMM report's plateau).
  int out_subblock_tiles = 8;
  // kCompute: tiles processed and passes over each (op_costs.h prices a pass); kMatmul: output
  // tiles a fused activation (GELU, SiLU) runs on.
  int64_t tiles = 0;
  double passes = 0;
  // Bytes the program reads and writes (kMatmul: in0 and the output; the weights are counted from
  // the tiles) and where they live.
  double read_bytes = 0, write_bytes = 0;
  TtMemory read_from = TtMemory::kL1, write_to = TtMemory::kL1;
  // kAllGather, kReduceScatter: bytes of the whole (gathered, or unreduced) tensor on a chip.
  double ccl_bytes = 0;
};

enum class TtPhase { kDecode, kPrefill };
const char* TtPhaseName(TtPhase p);  // "decode", "prefill"

struct TtGraphOptions {
  int chips = 1;
  TtPhase phase = TtPhase::kDecode;
  int users = 32;  // decode: user rows (a tile row holds 32); prefill: 1
  int ctx = 128;   // decode: cached positions attended; prefill: the prompt's tokens
  // Formats. Unset: the measured program's (weights BFP8_B everywhere; KV bf16 on one chip, BFP8_B
  // on several).
  std::optional<TileFormat> attn_weights, mlp_weights, lm_head_weights, kv;
  int lm_head_vocab = 0;      // padded vocabulary the LM head computes (0: the config's)
  bool flash_decode = false;  // what-if: FlashDecode instead of matmul-softmax-matmul
  bool dram_sharded = false;  // what-if: weights sharded by DRAM bank
  // decode: token positions each user runs a step (what-if: a speculative verify step of k
  // proposals runs k + 1). The matmuls and per-row ops get users x tokens_per_user rows; the
  // attention (FlashDecode only) k + 1 causal queries per user, reading its KV once.
  int tokens_per_user = 1;
  // what-if: the di/dt limit lifted - every matmul the program ran with 1 x 1 output subblocks
  // takes the largest its per-core block allows (tt-metal's rule: w the largest divisor of
  // per_core_N up to 8, then h up to 8 / w; 4 with fp32 accumulation).
  bool large_subblocks = false;
};

struct TtGraph {
  std::string program;  // which tt-metal program: "falcon7b_common", "t3000/falcon40b"
  std::vector<TtOp> ops;
  int chips = 1;
  TileFormat kv = TileFormat::kBF16;
  double weight_bytes = 0;  // per chip, read once a step
  double kv_bytes = 0;      // per chip, K/V cache bytes the attention reads a step
};

// How model `c`'s layout differs from the Falcon programs tt-metal ran and measured (RoPE,
// LayerNorm, a GELU MLP, attention and MLP in parallel): "" for those, else the differences
// ("RMSNorm, SwiGLU MLP, sequential attention and MLP"; "ALiBi, sequential attention and MLP").
// The graph then runs the op list the layout needs on the same op costs: an estimate no device
// figure checks.
std::string LayoutDifferences(const ModelConfig& c);

// The step of model `c` under `o` (decode, or the prefill of one prompt). Throws wc::Error for
// users outside [1, 32] (decode) or other than 1 (prefill), ctx outside
// [1, max_position_embeddings), or tokens_per_user outside [1, 17] or above 1 without decode's
// FlashDecode.
TtGraph BuildTtGraph(const ModelConfig& c, const TtGraphOptions& o);

}  // namespace wc
