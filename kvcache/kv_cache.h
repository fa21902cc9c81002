// The KV cache: per layer, K and V rows of head_dim values in one of the formats of
// kv_formats.h (or plain bf16 / f32), laid out
//   contiguous: [user_rows, n_kv_heads, max_seq, row_bytes]   (the seed-001 layout), or
//   paged:      [n_blocks, n_kv_heads, block_size, row_bytes] from one BlockPool, with a block
//               table per user row (vLLM-style, seed 002).
// A token is encoded once, when written. Attention reads rows in place, in their stored format -
// the attention kernels dequantize inside their dot products - and copies a chunk's stored rows
// only when it spans pages. No decoded copy of the cache is ever made.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/matmul.h"
#include "kvcache/block_pool.h"
#include "kvcache/kv_formats.h"
#include "kvcache/kv_journal.h"
#include "kvcache/kv_view.h"
#include "util/page_buffer.h"

namespace wc {

enum class KVDType : uint8_t { kBF16, kF32, kInt8, kFP8E4M3, kFP8E5M2, kBFP8 };

// Parses bf16, f32, int8, fp8-e4m3, fp8-e5m2, bfp8. Throws wc::Error naming --kv-dtype otherwise.
KVDType ParseKVDType(const std::string& name);
const char* KVDTypeName(KVDType dtype);
bool IsQuantized(KVDType dtype);
// int8 and fp8 formats: the ones with scales (--kv-scale); bfp8 carries its own exponents.
bool HasScale(KVDType dtype);
// The row codec of a quantized format (IsQuantized(dtype) must hold).
KVQuant QuantOf(KVDType dtype);
// Parses token-head / tensor. Throws wc::Error naming --kv-scale otherwise.
ScaleMode ParseScaleMode(const std::string& name);
const char* ScaleModeName(ScaleMode mode);

struct KVCacheShape {
  int n_layers = 0;
  int user_rows = 0;
  int n_kv_heads = 0;
  int max_seq = 0;
  int head_dim = 0;
};

struct KVCacheOptions {
  KVDType dtype = KVDType::kBF16;
  ScaleMode scale = ScaleMode::kTokenHead;  // int8/fp8 only
  int block_size = 0;                       // 0: contiguous; else paged blocks of this many tokens
  // Paged only: blocks in the pool, shared by all user rows (--kv-blocks). 0: enough for every
  // user row's full context (user_rows * ceil(max_seq / block_size)).
  int n_blocks = 0;
  // kTensor: per layer, K then V dequantization multipliers: [n_layers * 2].
  std::vector<float> tensor_scales;
  // Log the row operations (KVCache::journal()) for a tensor-parallel group's other ranks.
  bool journal = false;
};

// Bytes one stored K (or V) row of `head_dim` values takes, scales included.
int64_t KVRowBytes(KVDType dtype, ScaleMode scale, int head_dim);
// Bytes of K plus V for one token of one user across all layers.
int64_t KVBytesPerToken(const KVCacheShape& shape, KVDType dtype, ScaleMode scale);
// Bytes of K (or of V) for one layer, all users and positions.
int64_t KVBytesPerLayerK(const KVCacheShape& shape, KVDType dtype, ScaleMode scale);

class KVCache {
 public:
  // Allocates (zeroed) storage for every layer. Throws wc::Error for an absurd size, a tensor
  // scale mode without scales, or a block size that is not a power of two.
  KVCache(const KVCacheShape& shape, const KVCacheOptions& options);
  KVCache(const KVCacheShape& shape, KVDType dtype) : KVCache(shape, Options(dtype)) {}
  ~KVCache();
  KVCache(KVCache&&) = default;
  KVCache& operator=(KVCache&&) = default;

  const KVCacheShape& shape() const { return shape_; }
  const KVCacheOptions& options() const { return options_; }
  KVDType dtype() const { return options_.dtype; }
  bool paged() const { return pool_ != nullptr; }
  // Bytes of K and V storage, all layers (what the cache maps, touched or not).
  int64_t storage_bytes() const;
  // Paged only (0 when contiguous): pool size, free blocks, block size in tokens.
  int n_blocks() const { return pool_ != nullptr ? pool_->n_blocks() : 0; }
  int free_blocks() const { return pool_ != nullptr ? pool_->free_blocks() : 0; }
  int block_size() const { return options_.block_size; }

  // The log of ResetUser, ShareUser and ReorderUsers calls (options().journal), else null.
  const std::shared_ptr<KVJournal>& journal() const { return journal_; }
  // Replays one logged operation (another cache's) on this one.
  void Apply(const KVCacheOp& op);

  // Stores one token's keys and values for `user` at `pos` of `layer`.
  //   k, v: [n_kv_heads, head_dim] f32
  // Throws wc::Error, leaving the cache as it was, if pos is outside [0, max_seq) ("KV cache
  // full"), the block pool is exhausted, or k/v hold NaN or Inf (naming layer, user and position).
  void Write(int layer, int user, int pos, const float* k, const float* v);
  // Largest |value| written so far into layer's K (kv = 0) or V (kv = 1): calibration.
  float amax(int layer, int kv) const { return amax_[2 * layer + kv]; }
  // Forgets a user row (paged: returns its blocks to the pool).
  void ResetUser(int user);
  // Keeps positions [0, n_tokens) of row `user` and forgets the rest: paged, the blocks past them
  // return to the pool (a shared block the row keeps is untouched); contiguous, nothing moves
  // (later writes overwrite). Speculative decoding's rollback of rejected positions.
  void TruncateUser(int user, int n_tokens);
  // Paged only: user row `dst` (emptied first) shares the blocks of row `src` that hold positions
  // [0, n_tokens) - a prompt prefilled once, read by several beams. No K/V bytes move. The first
  // Write into a block that is still shared copies that one block (copy-on-write), so the rows
  // diverge from there on.
  void ShareUser(int src, int dst, int n_tokens);
  // Paged only, the prefix cache's operations (kvcache/prefix_cache.h), journaled like the rest:
  // row `user` (emptied first) takes `blocks` - full blocks some index holds - as its first
  // blocks, so positions [0, blocks.size() * block_size) hold their K/V; the row writes past them
  // (a write into one of them would copy it, as for any shared block).
  void AdoptBlocks(int user, const std::vector<int>& blocks);
  // A reference to block `block` held outside any row (the index's), taken and dropped.
  void RetainBlock(int block);
  void ReleaseBlock(int block);
  // Paged only, the persisted prefix cache's (kvcache/prefix_store.h): a block's stored bytes,
  // every layer's K then V, [n_layers][2][n_kv_heads, block_size, row_bytes] = block_bytes(), as
  // the cache holds them (scales included); and a free block filled with such bytes, returned with
  // one reference held by the caller (-1 when the pool has no free block). Not journaled: a
  // tensor-parallel rank holds only its heads of a block, so persisted blocks are one rank's.
  void ReadBlock(int block, uint8_t* out) const;
  int ImportBlock(const uint8_t* bytes);
  // References block `block` has (rows' and the index's); the block of `user` holding `pos`.
  int block_refs(int block) const;
  // Paged (0 when contiguous): blocks some user row holds - the pool's taken blocks less those
  // only references from outside the rows (RetainBlock, ImportBlock) hold. A running count.
  int row_blocks() const { return pool_ != nullptr ? pool_->table_blocks() : 0; }
  // Paged (0 when contiguous): changes whenever a block reference is taken or dropped, so whenever
  // a row's blocks change.
  int64_t blocks_version() const { return pool_ != nullptr ? pool_->version() : 0; }
  int user_block(int user, int pos) const;
  // At once, row users[i] takes over positions [0, n_tokens) of row parents[i] (each parent one of
  // `users`), or is emptied when parents[i] is -1 - beams reordered after a step. No K/V bytes
  // move. Paged: the rows share blocks (blocks no row keeps return to the pool). Contiguous: a
  // cache indirection (TensorRT-LLM's, seed 003) records which row's storage holds each position
  // of a row; reads follow it, and a write at `pos` goes to the row's own storage. The caller
  // keeps the rows of one reordering together until they are all reset, and writes each only past
  // the positions it took over (beams do: they all advance from the same position).
  void ReorderUsers(const std::vector<int>& users, const std::vector<int>& parents, int n_tokens);
  // Bytes of K/V the given rows hold for positions [0, n_tokens), what several share counted once:
  // paged, their distinct blocks; contiguous, their distinct (storage row, position) pairs.
  int64_t HeldBytes(const std::vector<int>& users, int n_tokens) const;
  // Bytes of one block, every layer's K and V (paged; 0 when contiguous).
  int64_t block_bytes() const;
  // Blocks covering n_tokens positions (paged; 0 when contiguous).
  int BlocksFor(int n_tokens) const {
    return pool_ != nullptr ? (n_tokens + options_.block_size - 1) / options_.block_size : 0;
  }
  // Blocks user row `user` holds (paged; 0 when contiguous).
  int user_blocks(int user) const {
    return pool_ != nullptr ? static_cast<int>(tables_[user].blocks().size()) : 0;
  }

  // Rows [start, start + len) of one KV head's K (or V), [len, head_dim], in place in their
  // stored format (kernels/attention/kv_rows.h), or an empty RowsRef when they span more than one
  // page.
  RowsRef Keys(int layer, int user, int kv_head, int start, int len) const;
  RowsRef Values(int layer, int user, int kv_head, int start, int len) const;
  // Copies those rows as stored (no decoding) into k_buf / v_buf, len * RowBytes() bytes each:
  // how a core gathers a chunk that spans pages into its L1. Returns views of the copies.
  std::pair<RowsRef, RowsRef> CopyRows(int layer, int user, int kv_head, int start, int len,
                                       uint8_t* k_buf, uint8_t* v_buf) const;
  // Decodes those rows to f32 with the format's scalar codec (kv_formats.h): the oracle of tests
  // and of the reference attention path. k_out, v_out: [len, head_dim].
  void DecodeRows(int layer, int user, int kv_head, int start, int len, float* k_out,
                  float* v_out) const;
  RowFormat row_format() const;
  // Bytes of one stored K (or V) row: what reading it from DRAM moves.
  double RowBytes() const { return static_cast<double>(row_bytes_); }

 private:
  static KVCacheOptions Options(KVDType dtype) {
    KVCacheOptions o;
    o.dtype = dtype;
    return o;
  }
  // Byte offset of the row (user, kv_head, pos) in a layer's K or V storage.
  int64_t RowOffset(int user, int kv_head, int pos) const;
  // The tensor scale of layer's K (kv = 0) or V (kv = 1); 0 without tensor scales.
  float TensorScale(int layer, int kv) const;
  RowsRef StoredRows(int layer, int kv, const uint8_t* data, int len) const;
  RowsRef Rows(int layer, int kv, int user, int kv_head, int start, int len) const;
  // ReorderUsers of the contiguous layout: the indirection only.
  void ReorderContiguous(const std::vector<int>& users, const std::vector<int>& parents,
                         int n_tokens);
  // Contiguous: the row whose storage holds position `pos` of row `user`.
  int SourceRow(int user, int pos) const {
    const std::vector<int32_t>& s = sources_[user];
    return pos < static_cast<int>(s.size()) ? s[pos] : user;
  }
  // How many rows from `pos` on (at most `most`) lie in one strided run of storage: the rest of
  // a block (paged), or positions read from one source row (contiguous).
  int RunLength(int user, int pos, int most) const;
  // Copies block `from`'s K/V bytes, every layer, into block `to` (copy-on-write).
  void CopyBlock(int from, int to);
  void CheckRows(int layer, int user, int kv_head, int start, int len) const;

  KVCacheShape shape_;
  KVCacheOptions options_;
  int64_t row_bytes_;
  std::unique_ptr<BlockPool> pool_;  // paged only
  std::vector<BlockTable> tables_;   // paged only: [user_rows]
  // Contiguous only: [user_rows][positions taken over by ReorderUsers] source row of each
  // position; empty (the row itself) unless the row is a beam.
  std::vector<std::vector<int32_t>> sources_;
  std::vector<float> amax_;    // [n_layers * 2]: K then V
  std::vector<PageBuffer> k_;  // [n_layers] of the layout above, as bytes
  std::vector<PageBuffer> v_;
  std::shared_ptr<KVJournal> journal_;  // options_.journal only
};

// One layer of a KVCache seen by an attention engine: batch entry b reads user row users[b],
// shifted by offsets[b] rows (0 for the cache part; the token's own position for the seed-001 "new
// token" part). The arrays must outlive the view.
class KVCacheLayerView : public KVView {
 public:
  KVCacheLayerView(const KVCache& cache, int layer, const int32_t* users, const int32_t* offsets)
      : cache_(cache), layer_(layer), users_(users), offsets_(offsets) {}
  RowsRef Keys(int b, int h, int start, int len) const override {
    return cache_.Keys(layer_, users_[b], h, offsets_[b] + start, len);
  }
  RowsRef Values(int b, int h, int start, int len) const override {
    return cache_.Values(layer_, users_[b], h, offsets_[b] + start, len);
  }
  std::pair<RowsRef, RowsRef> CopyRows(int b, int h, int start, int len, uint8_t* k_buf,
                                       uint8_t* v_buf) const override {
    return cache_.CopyRows(layer_, users_[b], h, offsets_[b] + start, len, k_buf, v_buf);
  }
  double RowBytes() const override { return cache_.RowBytes(); }
  int head_dim() const override { return cache_.shape().head_dim; }

 private:
  const KVCache& cache_;
  int layer_;
  const int32_t* users_;
  const int32_t* offsets_;
};

}  // namespace wc
