#include "meshmodel/tt_graph.h"

#include "mesh/wormhole_spec.h"
#include "meshmodel/tt_graph_builder.h"

#include <algorithm>

#include "model/lm_head.h"
#include "util/error.h"
#include "util/int_math.h"

namespace wc {

int64_t Tiles(int64_t n) {
  return (n + 31) / 32;
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
  static const WormholeChipSpec chip;  // the tile formats' sizes live with the hardware figures
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

const char* TtPhaseName(TtPhase p) {
  return p == TtPhase::kPrefill ? "prefill" : "decode";
}

const char* TtOpKindName(TtOpKind k) {
  switch (k) {
    case TtOpKind::kMatmul:
      return "matmul";
    case TtOpKind::kBatchedMatmul:
      return "batched matmul";
    case TtOpKind::kCompute:
      return "compute";
    case TtOpKind::kDataMovement:
      return "data movement";
    case TtOpKind::kAllGather:
      return "all-gather";
    case TtOpKind::kReduceScatter:
      return "reduce-scatter";
    case TtOpKind::kFlashDecode:
      return "flash decode";
    case TtOpKind::kSdpa:
      return "sdpa";
  }
  return "?";
}

namespace tt {

// models/demos/falcon7b_common/tt/ (falcon_model.py, falcon_decoder.py, falcon_attention.py,
// falcon_mlp.py, falcon_causallm.py, model_config.py "BFLOAT16-L1_SHARDED") at 3216f4bb.
void OneChipDecode(const ModelConfig& c, const TtGraphOptions& o, const Shapes& s,
                   GraphBuilder& b) {
  const double bf16 = TileBytes(TileFormat::kBF16), kvb = TileBytes(s.kv);
  const TtMemory D = TtMemory::kDram, L = TtMemory::kL1;
  const double act = s.ut * s.ht * bf16;  // [users, hidden] bf16 tiles
  const int64_t u = s.users;
  const int grid = 56;  // get_falcon_default_core_grid: CoreGrid(y=7, x=8)
  // Embedding rows (bf16, row-major in DRAM), then tilize.
  const int64_t rows = u * s.tokens_per_user;  // tokens of the step
  b.Once(Move("embedding", static_cast<int>(std::min<int64_t>(64, rows)),
              rows * c.hidden_size * 2.0, D, rows * c.hidden_size * 2.0, D));
  b.Once(Move("tilize", static_cast<int>(std::min<int64_t>(64, s.ht)), act, D, act, D));
  auto layer_norm = [&](bool in_layer) {
    // Block-sharded on 8 cores of a row (shard [32, 576]: hidden padded to 8 x 18 tiles).
    TtOp i2s = Move("interleaved_to_sharded", 8, act, D, act, L);
    TtOp ln = Compute(NormName(c), 8, s.ut * s.ht, NormPasses(c), bf16, L, L);
    ln.fidelity = MathFidelity::kHiFi4;
    TtOp s2i = Move("sharded_to_interleaved", 8, act, L, act, D);
    for (TtOp* op : {&i2s, &ln, &s2i}) in_layer ? b.Layer(*op) : b.Once(*op);
  };
  // The layer's ops, each run once a layer.
  layer_norm(true);
  if (c.mlp_norm()) layer_norm(true);  // a sequential layout's second norm (Falcon-7B: none)
  b.Layer(Matmul("qkv", OneDCores(s.qkv_t, grid), s.ut, s.ht, s.qkv_t, s.w_attn, o.dram_sharded,
                 TileFormat::kBF16, D, D));
  // Heads on one core (num_blocks = 1); rotary a tile row of heads a core, into L1.
  HeadsAndRotary(c, b, s, s.ut, TileFormat::kBF16, 1,
                 static_cast<int>(std::min<int64_t>(64, s.q_heads * s.ut)),
                 static_cast<int>(s.kv_heads * s.ut), D, L);
  const int64_t q_tiles = s.q_heads * s.ut * s.hdt;
  const TtOp update = UpdateCacheOp(s, TileFormat::kBF16);
  // The cache sliced to the attended positions, then sharded one user per core on 8x4.
  const double slice = u * s.kv_heads * s.p_t * s.hdt * kvb;
  const int users_cores = static_cast<int>(std::min<int64_t>(32, u));
  // ALiBi's bias on the scores: every query head's row of the attended positions.
  const TtOp alibi = AlibiBiasOp(users_cores, u * s.kv_heads * s.q_pad_t * s.p_t,
                                 users_cores * s.kv_heads * s.q_pad_t * s.p_t);
  if (o.flash_decode) {
    b.Layer(update);
    b.Layer(update);
    if (c.alibi) b.Layer(alibi);  // inside the fused op, priced as its own pass
    b.Layer(FlashDecodeOp(s, o.ctx));
  } else {
    b.Layer(update);
    b.Layer(Move("slice", 64, slice, D, slice, D));  // K_CACHE_SLICE stays in DRAM
    b.Layer(Move("interleaved_to_sharded", users_cores, slice, D, slice, L));
    // Q's heads padded to whole tile rows (single-core pad_tile), transposed (heads <-> users)
    // and sharded a user per core.
    const double q_bytes = q_tiles * bf16;
    const double q_pad = s.q_pad_t * 32 * s.kv_heads * s.ut * s.hdt * bf16;
    b.Layer(Move("pad", 1, q_bytes, L, q_pad, L));
    b.Layer(Move("transpose", 64, q_pad, L, q_pad, L));
    b.Layer(Move("interleaved_to_sharded", users_cores, q_pad, L, q_pad, L));
    TtOp kt = Compute("transpose", users_cores, u * s.kv_heads * s.p_t * s.hdt, kTransposePasses,
                      kvb, L, L);
    b.Layer(kt);
    // ATTN_BATCHED_MM_PROGCFG: out_subblock 1 x 1 for both batched matmuls.
    TtOp qk = Batched("attn_scores", users_cores, u * s.kv_heads, s.q_pad_t, s.hdt, s.p_t,
                      TileFormat::kBF16);
    qk.out_subblock_tiles = 1;
    b.Layer(qk);
    if (c.alibi) b.Layer(alibi);
    TtOp sm = Compute("softmax", users_cores, u * s.kv_heads * s.q_pad_t * s.p_t, kSoftmaxPasses,
                      bf16, L, L);
    sm.fidelity = MathFidelity::kHiFi4;
    b.Layer(sm);
    b.Layer(update);
    b.Layer(Move("slice", 64, slice, D, slice, L));
    b.Layer(Move("interleaved_to_sharded", users_cores, slice, L, slice, L));
    TtOp pv = Batched("attn_values", users_cores, u * s.kv_heads, s.q_pad_t, s.p_t, s.hdt,
                      TileFormat::kBF16);
    pv.out_subblock_tiles = 1;
    b.Layer(pv);
    b.Layer(Move("sharded_to_interleaved", users_cores, q_pad, L, q_pad, L));
    b.Layer(Move("transpose", 64, q_pad, L, q_pad, L));
    b.Layer(Move("slice", 64, q_pad, L, q_bytes, L));  // unpad the heads
  }
  b.Layer(Move("concat_heads", 1, q_tiles * bf16, L, q_tiles * bf16, D));  // 1 core
  b.Layer(Matmul("dense", OneDCores(s.ht, grid), s.ut, s.ht, s.ht, s.w_attn, o.dram_sharded,
                 TileFormat::kBF16, D, D));
  TtOp ff1 = Matmul("ff1", OneDCores(s.ffn_t, grid), s.ut, s.ht, s.ffn_t, s.w_mlp, o.dram_sharded,
                    TileFormat::kBF16, D, D);
  ff1.tiles = s.ut * s.ffn_t;  // GELU on every output tile, fused
  // h_to_4h: per_core_N 11, subblock 1 x 1 (falcon7b-graph.md section 5).
  ff1.out_subblock_tiles = 1;
  MlpUpOps(c, ff1, bf16, b);
  b.Layer(Matmul("ff2", OneDCores(s.ht, grid), s.ut, s.ffn_t, s.ht, s.w_mlp, o.dram_sharded,
                 TileFormat::kBF16, D, D));
  for (int a = 0; a < 2; ++a) {  // mlp + attention, then + residual: eltwise binary in DRAM
    TtOp add = Compute("add", static_cast<int>(std::min<int64_t>(64, s.ut * s.ht)), s.ut * s.ht,
                       kAddPasses, bf16, D, D);
    add.read_bytes *= 2;
    b.Layer(add);
  }
  layer_norm(false);
  TtOp lm = Matmul("lm_head", OneDCores(s.vocab_t, grid), s.ut, s.ht, s.vocab_t, s.w_lm,
                   o.dram_sharded, TileFormat::kBF16, D, D);
  lm.out_subblock_tiles = 1;  // per_core_N 37: subblock 1 x 1
  b.Once(lm);
}

// models/demos/t3000/falcon40b/tt/ at fc937bf74f ("BFLOAT8_B-SHARDED" decode config).
void MultiChipDecode(const ModelConfig& c, const TtGraphOptions& o, const Shapes& s,
                     GraphBuilder& b) {
  const TileFormat A = TileFormat::kBFP8;  // activations: DEFAULT_DTYPE = BFLOAT8_B
  const double ab = TileBytes(A), kvb = TileBytes(s.kv), bf16 = TileBytes(TileFormat::kBF16);
  const TtMemory D = TtMemory::kDram, L = TtMemory::kL1;
  const int64_t u = s.users;
  const double full = s.ut * s.ht * ab;    // [users, hidden] gathered
  const double shard = s.ut * s.hct * ab;  // [users, hidden / chips]
  const int grid = 32;                     // MAX_GRID_SIZE (8, 4)
  // Once a step: the attention mask tilized on device, the embedding rows and their sharding.
  const double mask = s.ut * s.p_t * ab;
  b.Once(Move("tilize", 1, s.ut * s.p_t * bf16, L, mask, L));
  const int64_t rows = u * s.tokens_per_user;  // tokens of the step
  b.Once(Move("embedding", static_cast<int>(std::min<int64_t>(64, rows)), rows * s.hct * 32 * 2.0,
              D, shard, D));
  b.Once(Move("interleaved_to_sharded", grid, shard, D, shard, L));
  auto gather = [&](bool in_layer) {
    TtOp s2i = Move("sharded_to_interleaved", grid, shard, L, shard, L);
    TtOp ag = Collective(TtOpKind::kAllGather, full);
    TtOp i2s = Move("interleaved_to_sharded", grid, full, L, full, L);
    for (TtOp* op : {&s2i, &ag, &i2s}) in_layer ? b.Layer(*op) : b.Once(*op);
  };
  // Layer norm on 8x4 width-sharded: gamma and beta read from DRAM as bf16 tiles of [32, hidden]
  // (pad_ln_params pads them to 32 rows), two tile rows a norm.
  auto layer_norm = [&](bool in_layer) {
    TtOp ln = Compute(NormName(c), grid, s.ut * s.ht, NormPasses(c), ab, L, L);
    ln.fidelity = MathFidelity::kHiFi4;
    ln.read_bytes += NormParams(c) * s.ht * bf16;
    ln.read_from = D;
    in_layer ? b.Layer(ln) : b.Once(ln);
  };
  gather(true);
  layer_norm(true);
  if (c.mlp_norm()) layer_norm(true);  // ln_mlp, or a sequential layout's second norm
  b.Layer(Move("sharded_to_interleaved", grid, full, L, full, L));
  b.Layer(Move("interleaved_to_sharded", 8, full, L, full, L));
  // QKV on 8 cores of a row (QKV_MM_PROGCFG: grid (8, 1), in0_block_w 32, per_core_N 5).
  TtOp qkv_mm = Matmul("qkv", 8, s.ut, s.ht, s.qkv_t, s.w_attn, o.dram_sharded, A, L, L);
  qkv_mm.out_subblock_tiles = 1;  // QKV_MM_PROGCFG: out_subblock 1 x 1
  b.Layer(qkv_mm);
  const double qkv = s.ut * s.qkv_t * ab;
  b.Layer(Move("sharded_to_interleaved", 8, qkv, L, qkv, L));
  b.Layer(Move("interleaved_to_sharded", 1, qkv, L, qkv, L));
  HeadsAndRotary(c, b, s, s.ut, A, 1, static_cast<int>(s.q_heads), static_cast<int>(s.kv_heads), L,
                 L);
  const int64_t q_tiles = s.q_heads * s.ut * s.hdt;
  const TtOp update = UpdateCacheOp(s, A);
  const double slice = u * s.kv_heads * s.p_t * s.hdt * kvb;
  const int users_cores = static_cast<int>(std::min<int64_t>(32, u));
  const int head_cores = static_cast<int>(s.q_heads);  // group_attn_matmul: a query head a core
  const TtOp alibi =
      AlibiBiasOp(std::min(16, head_cores), s.q_heads * s.ut * s.p_t, head_cores * s.p_t);
  if (o.flash_decode) {
    b.Layer(update);
    b.Layer(update);
    if (c.alibi) b.Layer(alibi);
    b.Layer(FlashDecodeOp(s, o.ctx));
  } else {
    b.Layer(update);
    b.Layer(Move("slice", grid, slice, D, slice, L));
    b.Layer(Move("interleaved_to_sharded", users_cores, slice, L, slice, L));
    b.Layer(Compute("transpose", users_cores, u * s.kv_heads * s.p_t * s.hdt, kTransposePasses, kvb,
                    L, L));
    // group_attn_matmul: each query head's core multiplies every user's query row (a tile row
    // of which one row is used) by that user's K^T, and then the scores by V.
    b.Layer(Batched("attn_scores", head_cores, s.q_heads * u, 1, s.hdt, s.p_t, A));
    if (c.alibi) b.Layer(alibi);
    TtOp sm = Compute("softmax", std::min(16, head_cores), s.q_heads * s.ut * s.p_t, kSoftmaxPasses,
                      ab, L, L);
    sm.fidelity = MathFidelity::kHiFi4;
    b.Layer(sm);
    b.Layer(update);
    b.Layer(Move("slice", grid, slice, D, slice, L));
    b.Layer(Move("interleaved_to_sharded", users_cores, slice, L, slice, L));
    b.Layer(Batched("attn_values", head_cores, s.q_heads * u, 1, s.p_t, s.hdt, A));
  }
  b.Layer(Move("concat_heads", head_cores, q_tiles * ab, L, q_tiles * ab, L));
  b.Layer(Move("sharded_to_interleaved", grid, shard, L, shard, L));
  b.Layer(Collective(TtOpKind::kAllGather, full));
  b.Layer(Move("interleaved_to_sharded", grid, full, L, full, L));
  TtOp dense =
      Matmul("dense", OneDCores(s.hct, grid), s.ut, s.ht, s.hct, s.w_attn, o.dram_sharded, A, L, L);
  dense.out_subblock_tiles = 1;  // SELFOUT_MM_PROGCFG: 1 x 1
  b.Layer(dense);
  b.Layer(Compute("add", grid, s.ut * s.hct, kAddPasses, ab, L, L));
  TtOp ff1 = Matmul("ff1", OneDCores(s.ffn_t, grid), s.ut, s.ht, s.ffn_t, s.w_mlp, o.dram_sharded,
                    A, L, L);
  ff1.tiles = s.ut * s.ffn_t;  // GELU fused; DENSE_H_TO_4H_MM_PROGCFG: subblock 1 x 4
  MlpUpOps(c, ff1, ab, b);
  // The down projection's weights are split by rows: every chip has partial sums of all columns.
  TtOp ff2 =
      Matmul("ff2", OneDCores(s.ht, grid), s.ut, s.ffn_t, s.ht, s.w_mlp, o.dram_sharded, A, L, L);
  ff2.out_subblock_tiles = 1;  // DENSE_4H_TO_H_MM_PROGCFG: 1 x 1
  b.Layer(ff2);
  b.Layer(Move("sharded_to_interleaved", grid, full, L, full, L));
  b.Layer(Collective(TtOpKind::kReduceScatter, full));
  b.Layer(Move("interleaved_to_sharded", grid, shard, L, shard, L));
  b.Layer(Compute("add", grid, s.ut * s.hct, kAddPasses, ab, L, L));
  gather(false);
  layer_norm(false);
  b.Once(Matmul("lm_head", OneDCores(s.vocab_t, grid), s.ut, s.ht, s.vocab_t, s.w_lm,
                o.dram_sharded, A, L, L));
}

}  // namespace tt

std::string LayoutDifferences(const ModelConfig& c) {
  std::string out;
  auto add = [&out](const char* what) { out += (out.empty() ? "" : ", ") + std::string(what); };
  if (c.alibi) add("ALiBi");
  if (c.norm != NormKind::kLayerNorm) add("RMSNorm");
  if (c.gated_mlp) add("SwiGLU MLP");
  if (!c.parallel_attn) add("sequential attention and MLP");
  return out;
}

TtGraph BuildTtGraph(const ModelConfig& c, const TtGraphOptions& o) {
  if (o.chips < 1) throw Error(Cat("a mesh needs at least one chip, got ", o.chips));
  const bool prefill = o.phase == TtPhase::kPrefill;
  if (prefill && o.users != 1)
    throw Error(
        Cat("--users must be 1 with --phase prefill (tt-metal's Falcon prefill runs one "
            "user's prompt), got ",
            o.users));
  if (o.users < 1 || o.users > 32)
    throw Error(
        Cat("--users must be in [1, 32] (tt-metal's Falcon decode runs one tile row of "
            "users), got ",
            o.users));
  if (o.tokens_per_user < 1 || o.tokens_per_user > 17)
    throw Error(
        Cat("tokens per user must be in [1, 17] (a verify step of up to 16 proposals), got ",
            o.tokens_per_user));
  if (o.tokens_per_user > 1 && (prefill || !o.flash_decode))
    throw Error("a verify step of several tokens per user is a decode what-if with FlashDecode");
  // The cache holds max_position_embeddings positions: a prompt that long, or that many less one
  // cached before the decoded token.
  const int max_ctx = c.max_position_embeddings - (prefill ? 0 : 1);
  if (o.ctx < 1 || o.ctx > max_ctx)
    throw Error(Cat("--ctx must be in [1, ", max_ctx,
                    "] (the model's max_position_embeddings bounds the cache), got ", o.ctx));
  const int n = o.chips;
  // Heads, hidden and ffn columns split over the chips; a share that is not whole is padded (the
  // last chip's), as tt-metal pads a tensor to the mesh.
  auto share = [n](int64_t v) { return (v + n - 1) / n; };
  tt::Shapes s;
  s.layers = c.n_layers;
  s.chips = n;
  s.users = o.users;
  s.tokens_per_user = prefill ? 1 : o.tokens_per_user;
  // rows: the prompt's tokens, or the users' tokens of the step
  s.ut = prefill ? Tiles(o.ctx) : Tiles(static_cast<int64_t>(o.users) * s.tokens_per_user);
  s.ht = Tiles(c.hidden_size);
  s.hct = Tiles(share(c.hidden_size));
  s.head_dim = c.head_dim();
  s.hdt = Tiles(s.head_dim);
  s.q_heads = share(c.n_head);
  s.kv_heads = std::max<int64_t>(1, share(c.n_kv_heads));
  s.qkv_t = Tiles((s.q_heads + 2 * s.kv_heads) * s.head_dim);
  s.ffn_t = Tiles(share(c.ffn_hidden_size));
  const int64_t vocab = o.lm_head_vocab > 0 ? o.lm_head_vocab : c.vocab_size;
  s.vocab_t = Tiles(share(vocab));
  s.p_t = Tiles(o.ctx + s.tokens_per_user);
  s.q_pad_t = Tiles((s.q_heads + s.kv_heads - 1) / s.kv_heads);
  const TileFormat measured_kv = n == 1 ? TileFormat::kBF16 : TileFormat::kBFP8;
  s.kv = o.kv.value_or(measured_kv);
  s.w_attn = o.attn_weights.value_or(TileFormat::kBFP8);
  s.w_mlp = o.mlp_weights.value_or(TileFormat::kBFP8);
  s.w_lm = o.lm_head_weights.value_or(TileFormat::kBFP8);

  TtGraph g;
  g.chips = n;
  g.kv = s.kv;
  tt::GraphBuilder b(c.n_layers);
  g.program = n == 1 ? "falcon7b_common" : "t3000/falcon40b";
  if (prefill)
    n == 1 ? tt::OneChipPrefill(c, o, s, b) : tt::MultiChipPrefill(c, o, s, b);
  else
    n == 1 ? tt::OneChipDecode(c, o, s, b) : tt::MultiChipDecode(c, o, s, b);
  g.ops = b.Take();
  // The what-if: the subblock each 1 x 1 matmul would take without the workaround, from its block
  // a core (the one-chip program accumulates in bf16: up to 8 tiles; the ring's in fp32: 4).
  if (o.large_subblocks)
    for (TtOp& op : g.ops) {
      if (op.out_subblock_tiles != 1) continue;
      if (op.kind == TtOpKind::kMatmul) {
        const int cols = std::max(1, op.cores / std::max(1, op.m_split));
        op.out_subblock_tiles = tt::LargestSubblockTiles(CeilDiv(op.m_tiles, op.m_split),
                                                         CeilDiv(op.n_tiles, cols), n == 1 ? 8 : 4);
      } else if (op.kind == TtOpKind::kBatchedMatmul) {
        op.out_subblock_tiles = tt::LargestSubblockTiles(op.m_tiles, op.n_tiles, n == 1 ? 8 : 4);
      }
    }
  for (const TtOp& op : g.ops)
    if (op.kind == TtOpKind::kMatmul)
      g.weight_bytes +=
          op.runs * static_cast<double>(op.k_tiles * op.n_tiles) * TileBytes(op.weights);
  // Decode reads the cached positions; prefill writes the prompt's.
  g.kv_bytes = prefill ? 2.0 * c.n_layers * s.kv_heads * s.ut * s.hdt * TileBytes(s.kv)
                       : 2.0 * c.n_layers * o.users * s.kv_heads * s.p_t * s.hdt * TileBytes(s.kv);
  return g;
}

}  // namespace wc
