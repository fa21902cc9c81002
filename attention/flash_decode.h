// FlashDecode (seed 000 §2.3-3.4, docs/references.md) executed on an emulated Wormhole mesh.
//
// One op: Q [1, bsz, n_q_heads, head_dim] (the query heads of each KV group in the tile's row
// dimension) against K/V [bsz, n_kv_heads, kv_len, head_dim]. KV heads are split over the mesh's
// chips; on each chip the bsz x heads "works" are spread over the 64 compute cores
// (n_cores / works cores per work, capped by max_cores_per_head_batch; several works per core when
// there are more works than cores). Each core reads its contiguous range of k_chunk_size chunks
// (causal: only up to cur_pos) and computes partial softmax results; workers write them into their
// reducer's L1 with emulated NoC writes and semaphore increments; reducers merge (flat, or in a
// binary tree) and normalize. Optionally (seed 001) a second KV part - the new token - is attended
// and merged at the end, so the new K/V need not be in the cache first.
//
// Multi-query (a verify chunk or a prompt chunk of one user row): a user may carry q_len
// consecutive query positions, causal within them. A work is then (user, KV head, a run of the
// user's queries): its cores read each K/V chunk once and compute every query of the run that
// attends the chunk against it, so the trace counts the user's KV bytes once, not q_len times.
// Each query keeps its own chunk partials and canonical merge, exactly as if it ran alone (the
// chunk size never depends on q_len), so its output bits equal the single-query op's.
//
// Numerics are bit-identical for any host thread count, any cores-per-work split, any batch
// composition, any grouping of queries into users and either reduction (see softmax_partial.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attention/alibi.h"
#include "kvcache/kv_view.h"
#include "mesh/wormhole_spec.h"

namespace wc {

enum class Reduction { kFlat, kTree };
enum class MathFidelity { kLoFi, kHiFi2, kHiFi4 };
const char* ReductionName(Reduction r);
Reduction ParseReduction(const std::string& name);  // "flat" | "tree"; throws wc::Error

struct FlashDecodeConfig {
  int k_chunk_size = 0;  // 0: the largest power of two dividing the 32-padded kv_len, <= 512
  int max_cores_per_head_batch = 16;
  Reduction reduction = Reduction::kTree;
  MathFidelity fidelity = MathFidelity::kHiFi2;
};

// `bsz` users; `tokens` = the sum of q_len (bsz when q_len is null). User b's queries are the
// tokens [first_b, first_b + q_len[b]), first_b the sum of the earlier users' q_len.
struct DecodeAttentionOp {
  int bsz = 0, n_q_heads = 0, n_kv_heads = 0, head_dim = 0, kv_len = 0;
  const float* q = nullptr;    // [tokens, n_q_heads, head_dim]; KV group g owns heads g*qpk..+qpk
  const KVView* kv = nullptr;  // [bsz, n_kv_heads, kv_len, head_dim]
  bool causal = true;
  // causal: [bsz] last position the user's first query attends (inclusive; -1 = none); its query
  // i attends [0, cur_pos[b] + i].
  const int32_t* cur_pos = nullptr;
  const float* mask = nullptr;  // non-causal: [bsz, n_q_heads, kv_len] additive (0 / -inf) or null
  const KVView* new_kv = nullptr;  // optional second part: [tokens, n_kv_heads, 1, head_dim]
  // Optional [bsz] query positions per user, each >= 1 (null: one each). Needs causal.
  const int32_t* q_len = nullptr;
  float scale = 1.0f;
  // ALiBi (attention/alibi.h): slopes [n_q_heads]; key position j (the cached rows' index, a new
  // token's own position) adds its bias to the raw score of every chunk, before `scale`. Needs
  // causal.
  AlibiBias alibi;
  float* out = nullptr;  // [tokens, n_q_heads, head_dim]

  int tokens() const;  // query positions over all users
};

// What one emulated core did: the performance model's input.
struct CoreTrace {
  struct NocWrite {
    int dst_core;  // core index on the same chip
    int64_t bytes;
    int hops;
    int step;  // reduction step (flat: 0)
  };
  int chip = 0;
  int core = 0;            // index in the chip's compute grid: x = core % compute_x
  int works = 0;           // works processed (> 1 only when works outnumber cores)
  int queries = 0;         // query positions of those works (works, without multi-query)
  int group_size = 1;      // cores sharing its work (1: no reduction)
  int rank = 0;            // rank in that group (0 = reducer)
  int64_t chunks = 0;      // K/V chunks read (each computed against every query attending it)
  int64_t chunk_rows = 0;  // rows per full chunk
  double dram_bytes = 0;   // K+V bytes read, in the stored format
  int64_t matmul_tiles = 0, sfpu_tiles = 0;  // summed over the queries computed per chunk
  std::vector<NocWrite> writes;
  std::vector<int> received_per_step;  // partial messages received at each reduction step
  int64_t sem_waits = 0;
  int64_t merge_tiles = 0;  // tile operations spent merging and normalizing partials
  // The part of merge_tiles spent after each reduction step's semaphore wait (parallel to
  // received_per_step), and after the last step (reducer's final fold, new-token merge and
  // normalization; for a core without reduction: its normalization). The rest is the fold of its
  // own chunk partials, which the hardware does as the per-chunk online-softmax rescale.
  std::vector<int64_t> merge_tiles_per_step;
  int64_t final_merge_tiles = 0;
};

struct OpTrace {
  int k_chunk_size = 0;
  int queries_per_work = 1;  // most query positions one work carries (L1 bounds a user's run)
  int cores_per_work = 0;    // per chip; 1 when works >= cores
  int chips_used = 0;
  int64_t l1_bytes_per_core = 0;
  double dram_bytes = 0, noc_bytes = 0;
  int64_t cores_used = 0;
  std::vector<CoreTrace> cores;  // active cores only
};

class FlashDecodeEngine {
 public:
  // Throws wc::Error for an invalid config (chunk size not a power of two / multiple of 32,
  // max_cores_per_head_batch < 1).
  FlashDecodeEngine(const MeshSpec& mesh, const FlashDecodeConfig& config);

  // Runs `op` (compute = false: plan and count only; out and the views' data are not touched).
  // Throws wc::Error for inconsistent shapes, cur_pos beyond kv_len, or buffers that do not fit
  // L1 with an explicit k_chunk_size.
  OpTrace Run(const DecodeAttentionOp& op, bool compute = true) const;

  const MeshSpec& mesh() const { return mesh_; }
  const FlashDecodeConfig& config() const { return config_; }

  // The chunk size for kv_len (auto or configured, lowered to fit L1 when auto). Sized for one
  // query per work whatever q_len is, so a query's chunks (and bits) never depend on q_len.
  int ChunkSizeFor(const DecodeAttentionOp& op) const;
  // L1 bytes one core needs for this op shape and chunk size with `queries` query positions per
  // work (their Q, running partials, outputs and reduction slots; K/V and scores are shared).
  int64_t L1BytesPerCore(const DecodeAttentionOp& op, int k_chunk_size, int group_size,
                         int queries = 1) const;

 private:
  MeshSpec mesh_;
  FlashDecodeConfig config_;
};

}  // namespace wc
