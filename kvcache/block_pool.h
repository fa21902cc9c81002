// Paged KV-cache bookkeeping (vLLM-style, seed 002 in docs/references.md): fixed-size blocks of
// `block_size` tokens from one pool, a free list, reference counts so a block can be shared (a
// prompt's blocks across beams or users), and a block table per user row mapping positions to
// blocks. Only indices live here; the K/V bytes of block b are wherever the cache puts block b.
#pragma once

#include <cstdint>
#include <vector>

namespace wc {

class BlockPool {
 public:
  // n_blocks blocks, all free. block_size must be a power of two.
  BlockPool(int n_blocks, int block_size);

  int block_size() const { return block_size_; }
  int n_blocks() const { return static_cast<int>(ref_count_.size()); }
  int free_blocks() const { return static_cast<int>(free_.size()); }

  // A free block with reference count 1. Throws wc::Error ("KV cache full") when none is free.
  // `outside`: the reference is held outside any block table (an index's), not by a table.
  int Allocate(bool outside = false);
  // Shares block b (count + 1).
  void AddRef(int b, bool outside = false);
  // Drops one reference; the block returns to the free list when its count reaches 0.
  void Release(int b, bool outside = false);
  int ref_count(int b) const { return ref_count_[b]; }
  // Blocks some block table holds (a reference beyond those held outside the tables), kept as
  // references come and go (no scan).
  int table_blocks() const { return table_blocks_; }
  // Counts every reference taken or dropped: unchanged, no table's blocks changed either.
  int64_t version() const { return version_; }

 private:
  // Moves block b's counts by the given deltas, keeping table_blocks_ and version_.
  void Adjust(int b, int refs, int outside);

  int block_size_;
  std::vector<int> ref_count_;     // [n_blocks]
  std::vector<int> outside_refs_;  // [n_blocks] of ref_count_, those held outside the tables
  std::vector<int> free_;          // free block ids; the most recently freed is reused first
  int table_blocks_ = 0;
  int64_t version_ = 0;
};

// The blocks of one user row: position p lives in block blocks[p / block_size] at row
// p % block_size.
class BlockTable {
 public:
  explicit BlockTable(BlockPool& pool) : pool_(&pool) {}
  ~BlockTable() { Clear(); }
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;
  BlockTable(BlockTable&& other) noexcept : pool_(other.pool_), blocks_(std::move(other.blocks_)) {
    other.blocks_.clear();
  }
  // Releases this table's blocks, then takes `other`'s.
  BlockTable& operator=(BlockTable&& other) noexcept {
    if (this != &other) {
      Clear();
      pool_ = other.pool_;
      blocks_ = std::move(other.blocks_);
      other.blocks_.clear();
    }
    return *this;
  }

  // Makes positions [0, n_tokens) addressable, allocating blocks as needed. Throws wc::Error when
  // the pool runs out (the table keeps what it had: nothing is corrupted).
  void Reserve(int n_tokens);
  // Shares `other`'s first ceil(n_tokens / block_size) blocks (a common prompt) instead of owning
  // new ones; this table must be empty.
  void ShareFrom(const BlockTable& other, int n_tokens);
  // Takes `blocks` (each already held by someone: a reference is added) as this table's first
  // blocks, holding positions [0, blocks.size() * block_size); this table must be empty.
  void Adopt(const std::vector<int>& blocks);
  // Before writing position `pos` into a shared block: gives this table a private copy of that
  // block (copy-on-write). Returns {old block, new block} when a copy is needed (the caller copies
  // the bytes), or {-1, -1}.
  std::pair<int, int> MakeWritable(int pos);
  // Returns every block to the pool.
  void Clear();
  // Returns the blocks past the first ceil(n_tokens / block_size) to the pool: positions
  // [0, n_tokens) stay addressable, nothing after them is held (speculative positions rejected).
  void Truncate(int n_tokens);

  int block(int pos) const { return blocks_[pos / pool_->block_size()]; }
  int capacity() const { return static_cast<int>(blocks_.size()) * pool_->block_size(); }
  const std::vector<int>& blocks() const { return blocks_; }

 private:
  BlockPool* pool_;
  std::vector<int> blocks_;
};

}  // namespace wc
