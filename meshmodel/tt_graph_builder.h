// The pieces meshmodel/tt_graph.cpp (decode) and tt_graph_prefill.cpp (prefill) build tt-metal's
// programs from: an op list builder, one constructor per op kind, the shapes of a model on a
// chip, and the passes the compute kernels make over a tile. Internal to meshmodel/.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "meshmodel/tt_graph.h"
#include "model/config.h"

namespace wc {
namespace tt {

// Passes a compute program makes over each tile: counts of what each kernel does to a tile
// (tt-metal's compute kernels of the time); op_costs.h prices a pass (TtSoftware::pass_cycles).
// Layer norm (layernorm_sharded.cpp): x - mean needs a reduce (sum), a subtract, a square, a
// second reduce, an add of epsilon and rsqrt, a multiply, then gamma and beta: 8 passes.
inline constexpr double kLayerNormPasses = 8;
// RMSNorm (Falcon3, an estimate): a square, a reduce, an add of epsilon and rsqrt, a multiply and
// gamma: 5 passes; no mean, no beta.
inline constexpr double kRmsNormPasses = 5;
// scale_mask_softmax (softmax_sharded.cpp): scale, + mask, max reduce, subtract and exp, sum
// reduce, reciprocal, multiply: 7 passes.
inline constexpr double kSoftmaxPasses = 7;
// rotary_embedding: x * cos, rotate-half (a matmul by a permutation tile), * sin, add: 4 passes.
inline constexpr double kRotaryPasses = 4;
inline constexpr double kAddPasses = 1;
inline constexpr double kTransposePasses = 1;  // transpose_wh: an unpack with transpose and a copy

// tt-metal's choice of output subblock for a block of per_core_m x per_core_n tiles (Falcon-40B's
// matmul_1d_config / matmul_2d_config): w the largest divisor of per_core_n up to `max_tiles`,
// then h the largest divisor of per_core_m with h x w up to `max_tiles` (8; 4 when the matmul
// accumulates in fp32). Returns h x w.
inline int LargestSubblockTiles(int64_t per_core_m, int64_t per_core_n, int max_tiles) {
  int w = 1, h = 1;
  for (int i = 1; i <= max_tiles; ++i)
    if (per_core_n % i == 0) w = i;
  for (int i = 1; i * w <= max_tiles; ++i)
    if (per_core_m % i == 0) h = i;
  return h * w;
}

// Accumulates the program's ops in order.
class GraphBuilder {
 public:
  explicit GraphBuilder(int layers) : layers_(layers) {}
  // Once a step.
  TtOp& Once(TtOp op) {
    ops_.push_back(std::move(op));
    return ops_.back();
  }
  // Once a layer.
  TtOp& Layer(TtOp op) {
    op.runs = layers_;
    ops_.push_back(std::move(op));
    return ops_.back();
  }
  std::vector<TtOp> Take() { return std::move(ops_); }

 private:
  int layers_;
  std::vector<TtOp> ops_;
};

inline TtOp Move(const std::string& name, int cores, double read_bytes, TtMemory from,
                 double write_bytes, TtMemory to) {
  TtOp op;
  op.name = name;
  op.kind = TtOpKind::kDataMovement;
  op.cores = std::max(1, cores);
  op.read_bytes = read_bytes;
  op.read_from = from;
  op.write_bytes = write_bytes;
  op.write_to = to;
  return op;
}

inline TtOp Compute(const std::string& name, int cores, int64_t tiles, double passes,
                    double tile_bytes, TtMemory from, TtMemory to) {
  TtOp op;
  op.name = name;
  op.kind = TtOpKind::kCompute;
  op.cores = std::max(1, cores);
  op.tiles = tiles;
  op.passes = passes;
  op.read_bytes = tiles * tile_bytes;
  op.read_from = from;
  op.write_bytes = tiles * tile_bytes;
  op.write_to = to;
  return op;
}

// The model's norm as a program: its name and passes (LayerNorm as tt-metal's Falcon ran it;
// RMSNorm an estimate) and how many per-feature rows it reads (gamma and beta, or gamma alone).
inline const char* NormName(const ModelConfig& c) {
  return c.norm == NormKind::kRmsNorm ? "rms_norm" : "layer_norm";
}
inline double NormPasses(const ModelConfig& c) {
  return c.norm == NormKind::kRmsNorm ? kRmsNormPasses : kLayerNormPasses;
}
inline int NormParams(const ModelConfig& c) {
  return c.norm == NormKind::kRmsNorm ? 1 : 2;
}

// The MLP's first matmul (`ff1`, its activation fused on `tiles` output tiles), and for a gated
// MLP (SwiGLU, the Llama layout) the ops the gate adds. tt-metal publishes no such Falcon
// program, so its estimate runs ff1 as the up projection without an activation, the same matmul
// again as the gate with its SiLU fused into the packer as ff1's GELU is, and multiplies the two
// elementwise, on ff1's cores and tiles.
inline void MlpUpOps(const ModelConfig& c, const TtOp& ff1, double tile_bytes, GraphBuilder& b) {
  if (!c.gated_mlp) {
    b.Layer(ff1);
    return;
  }
  TtOp up = ff1;
  up.tiles = 0;
  b.Layer(up);
  TtOp gate = ff1;
  gate.name = "ff_gate";
  b.Layer(gate);
  TtOp mul =
      Compute("gate_mul", ff1.cores, ff1.tiles, kAddPasses, tile_bytes, ff1.write_to, ff1.write_to);
  mul.read_bytes *= 2;
  b.Layer(mul);
}

// ALiBi (Falcon-RW, an estimate): each head's slope times the key position added to its scores,
// one add pass over `score_tiles` on `cores`, the bias rows (`bias_tiles` bf16 tiles) read from
// DRAM. It takes the place of the rotary embedding.
inline TtOp AlibiBiasOp(int cores, int64_t score_tiles, int64_t bias_tiles) {
  TtOp op = Compute("alibi_bias", cores, score_tiles, kAddPasses, 0, TtMemory::kL1, TtMemory::kL1);
  op.read_bytes = bias_tiles * TileBytes(TileFormat::kBF16);
  op.read_from = TtMemory::kDram;
  op.write_bytes = 0;
  return op;
}

// A weight matmul: [m, k] x [k, n] tiles on `cores` (1D: whole output columns a core, all rows),
// in0 (`act` tiles) read from `from`, the output written to `to`. Math at LoFi (decode's); a
// prefill sets its fidelity and, for a 2D grid, m_split.
inline TtOp Matmul(const std::string& name, int cores, int64_t m, int64_t k, int64_t n,
                   TileFormat w, bool dram_sharded, TileFormat act, TtMemory from, TtMemory to) {
  TtOp op;
  op.name = name;
  op.kind = TtOpKind::kMatmul;
  op.cores = std::max(1, cores);
  op.m_tiles = m;
  op.k_tiles = k;
  op.n_tiles = n;
  op.weights = w;
  op.dram_sharded = dram_sharded;
  op.fidelity = MathFidelity::kLoFi;
  op.act = act;
  op.read_bytes = m * k * TileBytes(act);
  op.read_from = from;
  op.write_bytes = m * n * TileBytes(act);
  op.write_to = to;
  return op;
}

// tt-metal's auto-configured 1D matmul on a grid of `grid` cores: per_core_N = ceil(Nt / grid)
// output columns per core, so ceil(Nt / per_core_N) cores work (matmul_op.cpp,
// create_matmul_1d_systolic_array_program_config).
inline int OneDCores(int64_t n_tiles, int grid) {
  const int64_t per_core = (n_tiles + grid - 1) / grid;
  return static_cast<int>((n_tiles + per_core - 1) / per_core);
}

// `batch` [m, k] x [k, n] products of `act` tiles on `cores`, operands read from the cores that
// hold them.
inline TtOp Batched(const std::string& name, int cores, int64_t batch, int64_t m, int64_t k,
                    int64_t n, TileFormat act) {
  const double tile_bytes = TileBytes(act);
  TtOp op;
  op.name = name;
  op.kind = TtOpKind::kBatchedMatmul;
  op.cores = std::max(1, cores);
  op.batch = batch;
  op.m_tiles = m;
  op.k_tiles = k;
  op.n_tiles = n;
  op.fidelity = MathFidelity::kLoFi;
  op.act = op.weights = act;
  op.read_bytes = batch * (m * k + k * n) * tile_bytes;
  op.write_bytes = batch * m * n * tile_bytes;
  return op;
}

inline TtOp Collective(TtOpKind kind, double bytes) {
  TtOp op;
  op.name = kind == TtOpKind::kAllGather ? "all_gather" : "reduce_scatter";
  op.kind = kind;
  op.cores = 0;
  op.ccl_bytes = bytes;
  return op;
}

struct Shapes {
  int layers = 0, chips = 1, users = 32;
  int tokens_per_user = 1;  // decode: positions a user runs a step (a verify step: k + 1)
  // rows in tiles: decode's users x tokens_per_user (32 a row), prefill's prompt tokens
  int64_t ut = 1;
  int64_t ht = 0, hct = 0;  // hidden, and one chip's slice of it, in tiles
  int64_t q_heads = 0, kv_heads = 0, hdt = 0, head_dim = 0;  // per chip
  int64_t qkv_t = 0, ffn_t = 0, vocab_t = 0;                 // per chip, tiles
  int64_t p_t = 0;      // decode: cached positions + this one, padded to 32, in tiles
  int64_t q_pad_t = 0;  // a KV head's query heads padded to whole tiles (the one-chip program)
  TileFormat w_attn = TileFormat::kBFP8, w_mlp = TileFormat::kBFP8, w_lm = TileFormat::kBFP8;
  TileFormat kv = TileFormat::kBF16;
};

// Attention from the cache: `ops` between the cache updates and the heads' concatenation, or the
// FlashDecode what-if.
inline TtOp FlashDecodeOp(const Shapes& s, int ctx) {
  TtOp op;
  op.name = "flash_decode";
  op.kind = TtOpKind::kFlashDecode;
  op.cores = 64;
  op.batch = s.users;
  op.q_len = s.tokens_per_user;
  op.m_tiles = s.q_heads;   // query heads on the chip
  op.n_tiles = s.kv_heads;  // KV heads on the chip
  op.k_tiles = s.head_dim;  // head_dim (values, not tiles)
  op.tiles = ctx;           // cached positions (the first query's)
  op.weights = s.kv;        // the cache's format
  return op;
}

// One chip's shapes of a model under TtGraphOptions (tt_graph.cpp fills them).

// The fused QKV output split into heads (create_qkv_heads on `heads_cores`), then the rotary
// embedding of Q (on up to `q_cores`) and of K (on up to a core a K tile), HiFi4: `rows` tile rows
// of `act` tiles each, read from `from`, written to `to`. An ALiBi model has no rotary embedding
// (its bias goes on the scores: AlibiBiasOp).
inline void HeadsAndRotary(const ModelConfig& c, GraphBuilder& b, const Shapes& s, int64_t rows,
                           TileFormat act, int heads_cores, int q_cores, int k_cores, TtMemory from,
                           TtMemory to) {
  const double qkv = rows * s.qkv_t * TileBytes(act);
  b.Layer(Move("create_qkv_heads", heads_cores, qkv, from, qkv, from));
  if (c.alibi) return;
  const int64_t q_tiles = s.q_heads * rows * s.hdt, k_tiles = s.kv_heads * rows * s.hdt;
  TtOp rq = Compute("rotary_embedding", q_cores, q_tiles, kRotaryPasses, TileBytes(act), from, to);
  TtOp rk = Compute("rotary_embedding", k_cores, k_tiles, kRotaryPasses, TileBytes(act), from, to);
  rq.fidelity = rk.fidelity = MathFidelity::kHiFi4;
  b.Layer(rq);
  b.Layer(rk);
}

// update_cache (decode): each user's new K (or V) row lands in a tile of its cache, which is read,
// patched and written back in DRAM (update_cache_op_multi_core.cpp: a core for a batched head); the
// new rows arrive as `act` tiles.
// A verify step's tokens_per_user rows patch a tile each.
inline TtOp UpdateCacheOp(const Shapes& s, TileFormat act) {
  const double cache_rows =
      static_cast<double>(s.users) * s.tokens_per_user * s.kv_heads * s.hdt * TileBytes(s.kv);
  return Move("update_cache", static_cast<int>(s.kv_heads),
              cache_rows + s.kv_heads * s.ut * s.hdt * TileBytes(act), TtMemory::kDram, cache_rows,
              TtMemory::kDram);
}

// The four programs (tt_graph.cpp: decode; tt_graph_prefill.cpp: prefill), appending their ops.
void OneChipDecode(const ModelConfig& c, const TtGraphOptions& o, const Shapes& s, GraphBuilder& b);
void MultiChipDecode(const ModelConfig& c, const TtGraphOptions& o, const Shapes& s,
                     GraphBuilder& b);
void OneChipPrefill(const ModelConfig& c, const TtGraphOptions& o, const Shapes& s,
                    GraphBuilder& b);
void MultiChipPrefill(const ModelConfig& c, const TtGraphOptions& o, const Shapes& s,
                      GraphBuilder& b);

}  // namespace tt
}  // namespace wc
