#include "kvcache/prefix_cache.h"

#include <algorithm>

#include <xxhash.h>

#include "util/error.h"

namespace wc {

PrefixCache::PrefixCache(int block_size) : block_size_(block_size) {
  WC_CHECK(block_size >= 1, "prefix cache block size ", block_size);
}

uint64_t PrefixCache::KeyOf(int parent, const int* tokens) const {
  // The chain: a block's key seeds with its parent's, so equal tokens behind different prefixes
  // get different keys.
  const uint64_t seed = parent < 0 ? 0x9e3779b97f4a7c15ull : nodes_[parent].key;
  return XXH3_64bits_withSeed(tokens, sizeof(int) * static_cast<size_t>(block_size_), seed);
}

int PrefixCache::Find(int parent, const int* tokens) const {
  const auto it = by_key_.find(KeyOf(parent, tokens));
  if (it == by_key_.end()) return -1;
  for (int n : it->second) {
    const Node& node = nodes_[n];
    if (node.parent == parent && std::equal(node.tokens.begin(), node.tokens.end(), tokens))
      return n;
  }
  return -1;
}

PrefixCache::Handle PrefixCache::HandleOf(int node) const {
  if (node < 0) return {};
  return {node, nodes_[node].generation};
}

std::vector<int> PrefixCache::Peek(const int* tokens, int n_tokens, int max_blocks,
                                   Handle* last) const {
  std::vector<int> blocks;
  const int full = std::min(n_tokens / block_size_, std::max(0, max_blocks));
  int parent = -1;
  for (int i = 0; i < full; ++i) {
    const int n = Find(parent, tokens + static_cast<int64_t>(i) * block_size_);
    if (n < 0) break;
    blocks.push_back(nodes_[n].block);
    parent = n;
  }
  if (last != nullptr) *last = HandleOf(parent);
  return blocks;
}

std::vector<int> PrefixCache::Match(const int* tokens, int n_tokens, int max_blocks, Handle* last) {
  ++stats_.lookups;
  std::vector<int> blocks;
  const int full = std::min(n_tokens / block_size_, std::max(0, max_blocks));
  int parent = -1;
  ++tick_;
  for (int i = 0; i < full; ++i) {
    const int n = Find(parent, tokens + static_cast<int64_t>(i) * block_size_);
    if (n < 0) break;
    nodes_[n].last_used = tick_;
    blocks.push_back(nodes_[n].block);
    parent = n;
  }
  if (last != nullptr) *last = HandleOf(parent);
  if (!blocks.empty()) {
    ++stats_.hits;
    stats_.cached_tokens += static_cast<int64_t>(blocks.size()) * block_size_;
  }
  return blocks;
}

int PrefixCache::ParentOf(const int* tokens, int index, const Handle& chain) const {
  if (index == 0) return -1;
  // A live node at depth index - 1 that this sequence's chain led to: its ancestors are indexed
  // still (only leaves are evicted), so the walk would find this very node.
  const int h = chain.node;
  if (h >= 0 && h < static_cast<int>(nodes_.size()) && nodes_[h].block >= 0 &&
      nodes_[h].generation == chain.generation && nodes_[h].depth == index - 1)
    return h;
  int parent = -1;
  for (int i = 0; i < index; ++i) {  // the chain up to the parent must be indexed
    parent = Find(parent, tokens + static_cast<int64_t>(i) * block_size_);
    if (parent < 0) return -2;
  }
  return parent;
}

bool PrefixCache::Insert(const int* tokens, int index, int block, Handle& chain) {
  WC_CHECK(index >= 0 && block >= 0, "prefix cache insert of block ", block, " at ", index);
  const int parent = ParentOf(tokens, index, chain);
  chain = {};
  if (parent == -2) return false;
  const int* own = tokens + static_cast<int64_t>(index) * block_size_;
  const int existing = Find(parent, own);
  ++tick_;
  if (existing >= 0) {
    nodes_[existing].last_used = tick_;
    chain = HandleOf(existing);
    return false;
  }
  int n;
  if (!free_nodes_.empty()) {
    n = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    n = static_cast<int>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& node = nodes_[n];
  node.parent = parent;
  node.key = KeyOf(parent, own);
  node.tokens.assign(own, own + block_size_);
  node.block = block;
  node.children = 0;
  node.last_used = tick_;
  node.depth = index;
  by_key_[node.key].push_back(n);
  if (parent >= 0) ++nodes_[parent].children;
  ++stats_.inserted;
  ++stats_.blocks;
  chain = HandleOf(n);
  return true;
}

int PrefixCache::EvictOne(const std::function<bool(int block)>& in_use) {
  int victim = -1;
  for (int n = 0; n < static_cast<int>(nodes_.size()); ++n) {
    const Node& node = nodes_[n];
    if (node.block < 0 || node.children > 0 || in_use(node.block)) continue;
    if (victim < 0 || node.last_used < nodes_[victim].last_used) victim = n;
  }
  if (victim < 0) return -1;
  Node& node = nodes_[victim];
  auto& list = by_key_[node.key];
  list.erase(std::find(list.begin(), list.end(), victim));
  if (list.empty()) by_key_.erase(node.key);
  if (node.parent >= 0) --nodes_[node.parent].children;
  const int block = node.block;
  node.block = -1;
  node.tokens.clear();
  ++node.generation;
  free_nodes_.push_back(victim);
  ++stats_.evictions;
  --stats_.blocks;
  return block;
}

std::vector<int> PrefixCache::Blocks() const {
  std::vector<int> out;
  for (const Node& node : nodes_)
    if (node.block >= 0) out.push_back(node.block);
  return out;
}

}  // namespace wc
