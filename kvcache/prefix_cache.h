// The prefix cache's index (vLLM's automatic prefix caching, on wormchat's paged blocks): which KV
// block holds the K/V of which run of block_size tokens, given everything before it. A block is
// keyed by a hash chain - the hash of its tokens and of its parent block's key - and found only
// when its tokens and its parent's node compare equal too (a hash collision never hands out the
// wrong K/V). Only full blocks are indexed.
//
// The index holds block ids, not bytes: the KV cache's pool keeps the bytes, and the caller holds
// one pool reference for every indexed block (KVCache::RetainBlock when Insert says the block is
// new, ReleaseBlock when EvictOne returns it). Everything else that shares a block (a user row
// that took it with KVCache::AdoptBlocks) holds its own reference, so `in_use(block)` - a
// reference count above the index's own - tells eviction which blocks it must not touch.
//
// One index serves one cache of one model, weights and KV layout; what changes a block's bytes
// (the model's fingerprint, the weight spec, the KV format, block size, scales) is the caller's
// key for the whole index (a persisted index is stored under it).
//
// Deterministic: the same calls in the same order give the same answers (eviction breaks ties by
// node index). Not thread-safe: one thread (the serving loop's) owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace wc {

struct PrefixCacheStats {
  int64_t lookups = 0;        // Match calls
  int64_t hits = 0;           // Match calls that found at least one block
  int64_t cached_tokens = 0;  // tokens handed out by Match (whole blocks)
  int64_t inserted = 0;       // blocks indexed
  int64_t evictions = 0;      // blocks evicted
  int blocks = 0;             // blocks indexed now
};

class PrefixCache {
 public:
  // Where a sequence's chain ends in the index: the node of its last indexed block, as Match, Peek
  // and Insert hand it out, so that inserting the next block needs no walk from block 0. Stays
  // good until that node is evicted; a stale or empty handle only costs the walk.
  struct Handle {
    int node = -1;  // -1: none
    int64_t generation = 0;
  };

  // Blocks of `block_size` tokens (>= 1).
  explicit PrefixCache(int block_size);

  int block_size() const { return block_size_; }
  const PrefixCacheStats& stats() const { return stats_; }

  // The blocks holding the longest indexed run of full blocks that begins `tokens` [n_tokens],
  // at most `max_blocks` of them, in order (block i holds tokens [i * block_size, (i + 1) *
  // block_size)). Marks them used now (LRU). `last`: set to the node of the last block returned
  // (none when no block matched), for Insert of the next one.
  std::vector<int> Match(const int* tokens, int n_tokens, int max_blocks, Handle* last = nullptr);
  // What Match would return, without marking anything used or counting a lookup (admission asks
  // before it knows the request fits).
  std::vector<int> Peek(const int* tokens, int n_tokens, int max_blocks,
                        Handle* last = nullptr) const;

  // Indexes block `index` of a sequence `tokens` (at least (index + 1) * block_size of them) as
  // held by KV block `block`, behind its parent (block index - 1 of the same sequence, which must
  // be indexed: else nothing happens). Returns true when the block is new to the index - the
  // caller then retains it - and false when these tokens behind this parent are indexed already
  // (by this block or another holding the same K/V: the caller keeps its own).
  // `chain`: in, the parent's node as the last Match, Peek or Insert of this sequence left it
  // (then the parent is found in O(1); a handle that is empty, stale or of another block index is
  // ignored and the chain walked from block 0); out, the node indexing block `index` now (this
  // block's or the one already there), or none when the parent is not indexed.
  bool Insert(const int* tokens, int index, int block, Handle& chain);

  // Removes the least recently used indexed block that no other holder uses and that no indexed
  // block follows (a leaf: its children would become unreachable) and returns it for the caller
  // to release; -1 when there is none. `in_use(block)`: whether anything but the index holds it.
  int EvictOne(const std::function<bool(int block)>& in_use);

  // Every indexed block (for releasing them all).
  std::vector<int> Blocks() const;

 private:
  struct Node {
    uint64_t key = 0;
    int parent = -1;          // node index, -1 for a first block
    std::vector<int> tokens;  // [block_size]
    int block = -1;           // the KV block, -1 once evicted (the node is free)
    int children = 0;         // indexed nodes behind this one
    int64_t last_used = 0;    // LRU tick
    int depth = 0;            // the block index it holds in its sequence
    int64_t generation = 0;   // changes when the node is evicted (a Handle to it goes stale)
  };
  // The node for these tokens behind `parent`, or -1.
  int Find(int parent, const int* tokens) const;
  Handle HandleOf(int node) const;
  // The node of block `index` - 1 of `tokens` (-1 for block 0, -2 when it is not indexed): `chain`
  // when it still names that node, else found by walking the chain.
  int ParentOf(const int* tokens, int index, const Handle& chain) const;
  uint64_t KeyOf(int parent, const int* tokens) const;

  int block_size_;
  std::vector<Node> nodes_;                                // indexed and freed nodes
  std::vector<int> free_nodes_;                            // indices of freed nodes
  std::unordered_map<uint64_t, std::vector<int>> by_key_;  // key -> nodes (collisions listed)
  int64_t tick_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace wc
