#include "kvcache/block_pool.h"

#include <algorithm>

#include "util/error.h"

namespace wc {

BlockPool::BlockPool(int n_blocks, int block_size) : block_size_(block_size) {
  if (block_size < 1 || (block_size & (block_size - 1)) != 0)
    throw Error(Cat("--kv-block-size ", block_size, " must be a power of two"));
  WC_CHECK(n_blocks > 0, "empty block pool");
  ref_count_.assign(n_blocks, 0);
  outside_refs_.assign(n_blocks, 0);
  free_.reserve(n_blocks);
  for (int b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 is handed out first
}

void BlockPool::Adjust(int b, int refs, int outside) {
  const bool held_before = ref_count_[b] > outside_refs_[b];
  ref_count_[b] += refs;
  outside_refs_[b] += outside;
  const bool held_after = ref_count_[b] > outside_refs_[b];
  table_blocks_ += static_cast<int>(held_after) - static_cast<int>(held_before);
  ++version_;
}

int BlockPool::Allocate(bool outside) {
  if (free_.empty())
    throw Error(Cat("KV cache full: all ", n_blocks(), " blocks of ", block_size_,
                    " tokens are in use; raise --ctx or serve fewer users"));
  const int b = free_.back();
  free_.pop_back();
  Adjust(b, 1, outside ? 1 : 0);
  return b;
}

void BlockPool::AddRef(int b, bool outside) {
  WC_CHECK(b >= 0 && b < n_blocks() && ref_count_[b] > 0, "AddRef of free block ", b);
  Adjust(b, 1, outside ? 1 : 0);
}

void BlockPool::Release(int b, bool outside) {
  WC_CHECK(b >= 0 && b < n_blocks() && ref_count_[b] > 0, "Release of free block ", b);
  WC_CHECK(!outside || outside_refs_[b] > 0, "Release of an outside reference block ", b,
           " does not have");
  Adjust(b, -1, outside ? -1 : 0);
  if (ref_count_[b] == 0) free_.push_back(b);
}

void BlockTable::Reserve(int n_tokens) {
  const int need = (n_tokens + pool_->block_size() - 1) / pool_->block_size();
  const size_t before = blocks_.size();
  try {
    while (static_cast<int>(blocks_.size()) < need) blocks_.push_back(pool_->Allocate());
  } catch (...) {
    while (blocks_.size() > before) {  // all or nothing
      pool_->Release(blocks_.back());
      blocks_.pop_back();
    }
    throw;
  }
}

void BlockTable::ShareFrom(const BlockTable& other, int n_tokens) {
  WC_CHECK(blocks_.empty(), "ShareFrom into a non-empty block table");
  const int n = (n_tokens + pool_->block_size() - 1) / pool_->block_size();
  WC_CHECK(n <= static_cast<int>(other.blocks_.size()), "sharing more than the source holds");
  for (int i = 0; i < n; ++i) {
    pool_->AddRef(other.blocks_[i]);
    blocks_.push_back(other.blocks_[i]);
  }
}

void BlockTable::Adopt(const std::vector<int>& blocks) {
  WC_CHECK(blocks_.empty(), "Adopt into a non-empty block table");
  for (int b : blocks) {
    pool_->AddRef(b);
    blocks_.push_back(b);
  }
}

std::pair<int, int> BlockTable::MakeWritable(int pos) {
  const int i = pos / pool_->block_size();
  WC_CHECK(i < static_cast<int>(blocks_.size()), "position ", pos, " beyond the table");
  const int old = blocks_[i];
  if (pool_->ref_count(old) == 1) return {-1, -1};
  const int fresh = pool_->Allocate();
  pool_->Release(old);
  blocks_[i] = fresh;
  return {old, fresh};
}

void BlockTable::Truncate(int n_tokens) {
  const size_t keep =
      static_cast<size_t>((std::max(n_tokens, 0) + pool_->block_size() - 1) / pool_->block_size());
  while (blocks_.size() > keep) {
    pool_->Release(blocks_.back());
    blocks_.pop_back();
  }
}

void BlockTable::Clear() {
  for (int b : blocks_) pool_->Release(b);
  blocks_.clear();
}

}  // namespace wc
