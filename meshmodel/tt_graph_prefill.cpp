// The prefill of one user's prompt of S tokens as tt-metal's Falcon programs ran it
// (docs/tt-metal/falcon7b-graph.md section 7, falcon40b-graph.md section 5): the rows of every
// tensor are the prompt's tokens (Mt = S / 32 tiles), the matmuls run at HiFi2, the caches are
// filled, and attention is the one-chip program's sliced matmul-softmax-matmul or the ring's
// scaled_dot_product_attention.
#include <algorithm>
#include <cmath>

#include "meshmodel/tt_graph_builder.h"
#include "util/int_math.h"

namespace wc {
namespace tt {
namespace {

constexpr TtMemory D = TtMemory::kDram, L = TtMemory::kL1;

int64_t RoundUp(int64_t a, int64_t b) {
  return CeilDiv(a, b) * b;
}

// A prefill matmul [m, k] x [k, n] (tiles): 1D (every core all m rows, ceil(n / grid) columns a
// core) below `two_d_rows` rows of tiles, else 2D on `cols` x `rows` cores (a row of cores a share
// of m, a column a share of n; in0 and in1 each read once and multicast). HiFi2.
TtOp PrefillMatmul(const std::string& name, int64_t m, int64_t k, int64_t n, TileFormat w,
                   bool dram_sharded, TileFormat act, int one_d_grid, int cols, int rows,
                   int64_t two_d_rows) {
  const bool two_d = m >= two_d_rows;
  TtOp op = Matmul(name, two_d ? cols * rows : OneDCores(n, one_d_grid), m, k, n, w, dram_sharded,
                   act, D, D);
  op.m_split = two_d ? rows : 1;
  op.fidelity = MathFidelity::kHiFi2;
  return op;
}

}  // namespace

// models/demos/falcon7b_common/tt/ at 3216f4bb, "BFLOAT16-DRAM" prefill (PREFILL_OPTIMIZED_MODE):
// activations bf16 in DRAM, the 1D 8x7 auto-configured matmuls below 512 rows, 2D 8x7 above
// (QKV's explicit 8x8 config from 2048), attention in slices of the query rows (1 / 4 / 16 for
// S = 128 / 1024 / 2048: the scores of a slice must fit L1), the MLP padded to whole 8x8 blocks
// in slices of 1024 rows from S = 1024, the LM head in 256-row vocabulary slices from S = 1024.
void OneChipPrefill(const ModelConfig& c, const TtGraphOptions& o, const Shapes& s,
                    GraphBuilder& b) {
  const TileFormat B = TileFormat::kBF16;
  const double bf16 = TileBytes(B), kvb = TileBytes(s.kv);
  const int64_t S = o.ctx, mt = s.ut;
  const double act = mt * s.ht * bf16;
  // The attention slices (tt-metal's table: 128 -> 1, 1024 -> 4, 2048 -> 16).
  const int64_t slices = std::max<int64_t>(1, CeilDiv(S, 512) * CeilDiv(S, 512));
  const int64_t slice_rows = std::max<int64_t>(1, CeilDiv(mt, slices));
  // get_inputs_on_device, inside the measured window: the causal mask's slices tilized to BFP4.
  for (int64_t i = 0; i < slices; ++i)
    b.Once(Move("tilize", 64, slice_rows * 32.0 * S * 2, D,
                slice_rows * mt * TileBytes(TileFormat::kBFP4), D));
  b.Once(Move("embedding", static_cast<int>(std::min<int64_t>(64, mt)), S * c.hidden_size * 2.0, D,
              act, D));
  b.Once(Move("tilize", 64, act, D, act, D));
  const int ln_cores = static_cast<int>(8 * std::min<int64_t>(8, mt));
  auto layer_norm = [&](bool in_layer) {
    TtOp i2s = Move("interleaved_to_sharded", ln_cores, act, D, act, L);
    TtOp ln = Compute(NormName(c), ln_cores, mt * s.ht, NormPasses(c), bf16, L, L);
    ln.fidelity = MathFidelity::kHiFi4;
    TtOp s2i = Move("sharded_to_interleaved", ln_cores, act, L, act, D);
    for (TtOp* op : {&i2s, &ln, &s2i}) in_layer ? b.Layer(*op) : b.Once(*op);
  };
  layer_norm(true);
  if (c.mlp_norm()) layer_norm(true);  // a sequential layout's second norm (Falcon-7B: none)
  TtOp qkv = PrefillMatmul("qkv", mt, s.ht, s.qkv_t, s.w_attn, o.dram_sharded, B, 56, 8,
                           mt >= 64 ? 8 : 7, 16);
  // 2D: subblock 1 x 1 (auto-configured at 1024 tokens, per_core_N 19;
  // FUSED_QKV_MM_OPTIMIZED_PROGCFG at 2048); 1D below 512 tokens: 2 x 3.
  if (qkv.m_split > 1) qkv.out_subblock_tiles = 1;
  b.Layer(qkv);
  const int64_t q_tiles = s.q_heads * mt * s.hdt, k_tiles = s.kv_heads * mt * s.hdt;
  HeadsAndRotary(c, b, s, mt, B, 64, 64, static_cast<int>(std::min<int64_t>(64, k_tiles)), D, D);
  const TtOp fill = Move("fill_cache", static_cast<int>(std::min<int64_t>(64, k_tiles)),
                         k_tiles * bf16, D, k_tiles * kvb, D);
  b.Layer(fill);
  b.Layer(Move("transpose", 64, k_tiles * bf16, D, k_tiles * bf16, D));
  // Per slice, on 57 cores (ATTN_OPTIMIZED_ALLOWED_NUM_CORES): the slice's query rows of every
  // head sharded, Q K^T against the whole K^T (multicast), the scaled causal softmax with the
  // slice's mask, scores x V, written back to DRAM.
  const int attn_cores = 57;
  const int64_t rows = s.q_heads * slice_rows;  // tile rows of a slice, all heads
  const double q_slice = rows * s.hdt * bf16;
  const double kt_bytes = s.kv_heads * s.hdt * mt * bf16;
  for (int64_t i = 0; i < slices; ++i) {
    b.Layer(Move("interleaved_to_sharded", attn_cores, q_slice, D, q_slice, L));
    TtOp qk = Batched("attn_scores", attn_cores, rows, 1, s.hdt, mt, B);
    qk.fidelity = MathFidelity::kHiFi2;
    qk.out_subblock_tiles = 1;  // both of the slice's matmuls: 1 x 1
    qk.read_bytes = q_slice + attn_cores * kt_bytes;
    b.Layer(qk);
    if (c.alibi) b.Layer(AlibiBiasOp(attn_cores, rows * mt, s.q_heads * mt));
    TtOp sm = Compute("softmax", attn_cores, rows * mt, kSoftmaxPasses, bf16, L, L);
    sm.read_bytes = slice_rows * mt * TileBytes(TileFormat::kBFP4);  // the mask, from DRAM
    sm.read_from = D;
    sm.write_bytes = 0;
    b.Layer(sm);
    TtOp pv = Batched("attn_values", attn_cores, rows, 1, mt, s.hdt, B);
    pv.fidelity = MathFidelity::kHiFi2;
    pv.out_subblock_tiles = 1;
    pv.read_bytes = rows * mt * bf16 + attn_cores * kt_bytes;
    b.Layer(pv);
    b.Layer(Move("sharded_to_interleaved", attn_cores, q_slice, L, q_slice, D));
  }
  b.Layer(fill);
  b.Layer(Move("concat_heads", 64, q_tiles * bf16, D, q_tiles * bf16, D));
  b.Layer(PrefillMatmul("dense", mt, s.ht, s.ht, s.w_attn, o.dram_sharded, B, 56, 8, 7, 16));
  const int64_t h_pad = RoundUp(s.ht, 8), f_pad = RoundUp(s.ffn_t, 64);
  if (mt < 32) {
    TtOp ff1 = PrefillMatmul("ff1", mt, s.ht, s.ffn_t, s.w_mlp, o.dram_sharded, B, 56, 8, 7, 16);
    ff1.tiles = mt * s.ffn_t;  // GELU fused
    MlpUpOps(c, ff1, bf16, b);
    b.Layer(PrefillMatmul("ff2", mt, s.ffn_t, s.ht, s.w_mlp, o.dram_sharded, B, 56, 8, 7, 16));
  } else {
    // Hidden padded to 8-tile blocks, the MLP's width to 64 tiles; slices of 1024 rows.
    b.Layer(Move("concat", 64, act, D, mt * h_pad * bf16, D));
    const int64_t mlp_slices = CeilDiv(mt, 32), m = CeilDiv(mt, mlp_slices);
    for (int64_t i = 0; i < mlp_slices; ++i) {
      b.Layer(Move("interleaved_to_sharded", 64, m * h_pad * bf16, D, m * h_pad * bf16, L));
      TtOp ff1 = Matmul("ff1", 64, m, h_pad, f_pad, s.w_mlp, o.dram_sharded, B, L, L);
      ff1.m_split = 8;
      ff1.fidelity = MathFidelity::kHiFi2;
      ff1.tiles = m * f_pad;
      ff1.out_subblock_tiles = 1;  // #9723: "subblocks (1, 1) (due to di/dt avoidance)"
      MlpUpOps(c, ff1, bf16, b);
      TtOp ff2 = Matmul("ff2", 64, m, f_pad, h_pad, s.w_mlp, o.dram_sharded, B, L, L);
      ff2.m_split = 8;
      ff2.fidelity = MathFidelity::kHiFi2;
      ff2.out_subblock_tiles = 1;
      b.Layer(ff2);
      b.Layer(Move("sharded_to_interleaved", 64, m * h_pad * bf16, L, m * h_pad * bf16, D));
    }
    b.Layer(Move("slice", 64, mt * h_pad * bf16, D, act, D));
  }
  for (int a = 0; a < 2; ++a) {
    TtOp add = Compute("add", 64, mt * s.ht, kAddPasses, bf16, D, D);
    add.read_bytes *= 2;
    b.Layer(add);
  }
  layer_norm(false);
  if (mt < 32) {
    b.Once(PrefillMatmul("lm_head", mt, s.ht, s.vocab_t, s.w_lm, o.dram_sharded, B, 56, 8, 7, 16));
  } else {
    b.Once(Move("concat", 64, act, D, mt * h_pad * bf16, D));
    const int64_t vocab_slices = std::max<int64_t>(1, S / 256),
                  n = CeilDiv(s.vocab_t, vocab_slices);
    for (int64_t i = 0; i < vocab_slices; ++i) {
      TtOp lm = Matmul("lm_head", 64, mt, h_pad, n, s.w_lm, o.dram_sharded, B, D, D);
      lm.m_split = 8;
      lm.fidelity = MathFidelity::kHiFi2;
      b.Once(lm);
    }
    b.Once(Move("concat", 64, mt * s.vocab_t * bf16, D, mt * s.vocab_t * bf16, D));
  }
}

// models/demos/t3000/falcon40b/tt/ at fc937bf74f, "BFLOAT8_B-DRAM" prefill: the residual bf16 in
// DRAM, typecast to BFP8 for the all-gathers; the fused partial layer norm (sharded norm, then
// gamma and beta of each norm as broadcasts) in 1024-row slices; matmuls 1D below 512 rows, 2D on
// 8x8 from 512 (falcon_prefill_matmul), HiFi2 with fp32 accumulation; the caches filled in BFP8;
// scaled_dot_product_attention on 8x7; the MLP in 1024-row slices; a reduce-scatter after it.
void MultiChipPrefill(const ModelConfig& c, const TtGraphOptions& o, const Shapes& s,
                      GraphBuilder& b) {
  const TileFormat A = TileFormat::kBFP8, B = TileFormat::kBF16;
  const double ab = TileBytes(A), bf16 = TileBytes(B), kvb = TileBytes(s.kv);
  const int64_t mt = s.ut;
  const double shard = mt * s.hct * bf16;  // the residual, [S, hidden / chips] bf16
  const double full = mt * s.ht * ab;      // gathered, BFP8
  b.Once(Move("embedding", static_cast<int>(std::min<int64_t>(64, mt)), o.ctx * s.hct * 32 * 2.0, D,
              shard, D));
  auto typecast = [&](int64_t tiles) {
    return Compute("typecast", 64, tiles, kAddPasses, bf16, D, D);
  };
  // The fused partial layer norm: the norm, then each of `norms` layer norms' gamma and beta as
  // broadcasts (mul, add) and a conversion back; or (`fused`) gamma and beta inside the norm.
  auto norms = [&](bool in_layer, int n_norms, bool fused) {
    // One slice of up to 1024 rows at a time.
    const int64_t ln_slices = CeilDiv(mt, 32), rows = CeilDiv(mt, ln_slices);
    const int cores = static_cast<int>(8 * std::min<int64_t>(8, rows));
    const double slice = rows * s.ht * ab;
    for (int64_t i = 0; i < ln_slices; ++i) {
      std::vector<TtOp> ops;
      ops.push_back(Move("interleaved_to_sharded", cores, slice, D, slice, L));
      TtOp ln = Compute(NormName(c), cores, rows * s.ht,
                        NormPasses(c) - (fused ? 0 : NormParams(c)), ab, L, L);
      ln.fidelity = MathFidelity::kHiFi4;
      ops.push_back(ln);
      if (fused) ops.push_back(Move("sharded_to_interleaved", cores, slice, L, slice, D));
      for (int n = 0; n < (fused ? 0 : n_norms); ++n) {
        TtOp mul = Compute("bcast", cores, rows * s.ht, kAddPasses, ab, L, L);
        mul.read_bytes += s.ht * bf16;  // gamma (beta) row from DRAM
        mul.read_from = D;
        for (int param = 0; param < NormParams(c); ++param) ops.push_back(mul);  // gamma (, beta)
        ops.push_back(Move("sharded_to_interleaved", cores, slice, L, slice, D));
      }
      for (const TtOp& op : ops) in_layer ? b.Layer(op) : b.Once(op);
    }
  };
  b.Layer(Move("clone", 64, shard, D, shard, D));
  b.Layer(typecast(mt * s.hct));
  b.Layer(Collective(TtOpKind::kAllGather, full));
  norms(true, c.mlp_norm() ? 2 : 1, false);
  b.Layer(PrefillMatmul("qkv", mt, s.ht, s.qkv_t, s.w_attn, o.dram_sharded, A, 32, 8, 8, 16));
  const int64_t q_tiles = s.q_heads * mt * s.hdt, k_tiles = s.kv_heads * mt * s.hdt;
  HeadsAndRotary(c, b, s, mt, A, 64, 64, static_cast<int>(std::min<int64_t>(64, k_tiles)), D, D);
  for (int kv = 0; kv < 2; ++kv) {
    b.Layer(typecast(k_tiles));
    b.Layer(Move("fill_cache", static_cast<int>(std::min<int64_t>(64, k_tiles)), k_tiles * ab, D,
                 k_tiles * kvb, D));
  }
  TtOp sdpa;
  sdpa.name = "sdpa";
  sdpa.kind = TtOpKind::kSdpa;
  sdpa.cores = 56;  // SDPA_PROGCFG: compute_with_storage_grid_size [8, 7]
  sdpa.batch = s.q_heads;
  sdpa.m_tiles = mt;
  sdpa.k_tiles = s.hdt;
  sdpa.act = A;
  sdpa.fidelity = MathFidelity::kHiFi2;
  // ALiBi inside the flash attention: a pass over each causal score tile it computes.
  if (c.alibi) b.Layer(AlibiBiasOp(56, s.q_heads * mt * (mt + 1) / 2, s.q_heads * mt));
  b.Layer(sdpa);
  b.Layer(Move("concat_heads", 64, q_tiles * ab, D, mt * s.hct * ab, D));
  b.Layer(Collective(TtOpKind::kAllGather, full));
  // dense, FF1 and FF2: overwrite_subblock_w = h = 1 ("Workaround for non deterministic
  // output/hang; issue: 7066"); QKV and the LM head keep falcon_prefill_matmul's own (2-8 tiles).
  TtOp dense = PrefillMatmul("dense", mt, s.ht, s.hct, s.w_attn, o.dram_sharded, A, 32, 8, 8, 16);
  dense.out_subblock_tiles = 1;
  b.Layer(dense);
  b.Layer(Compute("add", 64, mt * s.hct, kAddPasses, bf16, D, D));
  const int64_t mlp_slices = CeilDiv(mt, 32), m = CeilDiv(mt, mlp_slices);
  for (int64_t i = 0; i < mlp_slices; ++i) {
    const double in = m * s.ht * ab;
    b.Layer(Move("interleaved_to_sharded", static_cast<int>(std::min<int64_t>(64, 8 * m)), in, D,
                 in, L));
    TtOp ff1 = PrefillMatmul("ff1", m, s.ht, s.ffn_t, s.w_mlp, o.dram_sharded, A, 64, 8, 8, 16);
    ff1.read_from = ff1.write_to = L;
    ff1.tiles = m * s.ffn_t;  // GELU fused
    ff1.out_subblock_tiles = 1;
    MlpUpOps(c, ff1, ab, b);
    TtOp ff2 = PrefillMatmul("ff2", m, s.ffn_t, s.ht, s.w_mlp, o.dram_sharded, A, 64, 8, 8, 16);
    ff2.read_from = ff2.write_to = L;
    ff2.out_subblock_tiles = 1;
    b.Layer(ff2);
    b.Layer(Move("sharded_to_interleaved", 64, in, L, in, D));
  }
  b.Layer(Collective(TtOpKind::kReduceScatter, full));
  b.Layer(Compute("add", 64, mt * s.hct, kAddPasses, bf16, D, D));
  b.Once(typecast(mt * s.hct));
  b.Once(Collective(TtOpKind::kAllGather, full));
  norms(false, 1, true);
  b.Once(typecast(mt * s.ht));
  b.Once(PrefillMatmul("lm_head", mt, s.ht, s.vocab_t, s.w_lm, o.dram_sharded, A, 64, 8, 8, 16));
}

}  // namespace tt
}  // namespace wc
