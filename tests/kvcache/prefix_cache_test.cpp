// The prefix cache's index (kvcache/prefix_cache.h) and the KV cache's block operations it drives
// (AdoptBlocks, RetainBlock, ReleaseBlock): hits on full blocks only, the chain (a block matches
// only behind the same prefix), LRU eviction of unused leaves, and a row that adopts another's
// blocks reading exactly its K/V, journaled so a tensor-parallel rank's cache follows.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kvcache/kv_cache.h"
#include "kvcache/prefix_cache.h"
#include "util/error.h"

namespace wc {
namespace {

std::vector<int> Seq(int n, int start = 100) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Indexes the first `blocks` blocks of `tokens` as KV blocks first_block, first_block + 1, ...,
// each behind the handle the insert before it left.
void Index(PrefixCache& pc, const std::vector<int>& tokens, int blocks, int first_block) {
  PrefixCache::Handle chain;
  for (int i = 0; i < blocks; ++i) EXPECT_TRUE(pc.Insert(tokens.data(), i, first_block + i, chain));
}

// Insert with no handle: the parent is found by walking the chain from block 0.
bool InsertWalking(PrefixCache& pc, const std::vector<int>& tokens, int index, int block) {
  PrefixCache::Handle none;
  return pc.Insert(tokens.data(), index, block, none);
}

TEST(PrefixCache, MatchesTheLongestRunOfFullBlocks) {
  PrefixCache pc(4);
  const std::vector<int> a = Seq(10);
  Index(pc, a, 2, 7);  // blocks 7, 8 hold tokens [0, 8)
  EXPECT_EQ(pc.Match(a.data(), 10, 100), (std::vector<int>{7, 8}));
  EXPECT_EQ(pc.Match(a.data(), 8, 100), (std::vector<int>{7, 8}));
  EXPECT_EQ(pc.Match(a.data(), 7, 100), (std::vector<int>{7}));  // a partial block never matches
  EXPECT_EQ(pc.Match(a.data(), 3, 100), (std::vector<int>{}));
  EXPECT_EQ(pc.Match(a.data(), 10, 1), (std::vector<int>{7}));  // capped
  // A different token in block 1 stops the run there; in block 0, nothing matches.
  std::vector<int> b = a;
  b[5] = 1;
  EXPECT_EQ(pc.Match(b.data(), 10, 100), (std::vector<int>{7}));
  b[0] = 1;
  EXPECT_EQ(pc.Match(b.data(), 10, 100), (std::vector<int>{}));
  const PrefixCacheStats& s = pc.stats();
  EXPECT_EQ(s.lookups, 7);
  EXPECT_EQ(s.hits, 5);
  EXPECT_EQ(s.cached_tokens, 4 * (2 + 2 + 1 + 1 + 1));
  EXPECT_EQ(s.blocks, 2);
}

TEST(PrefixCache, ABlockMatchesOnlyBehindItsOwnPrefix) {
  PrefixCache pc(2);
  const std::vector<int> a = {1, 2, 3, 4}, b = {9, 9, 3, 4};  // the same second block
  Index(pc, a, 2, 0);
  EXPECT_EQ(pc.Match(b.data(), 4, 10), (std::vector<int>{}));
  // Inserting a block whose parent is not indexed does nothing.
  EXPECT_FALSE(InsertWalking(pc, b, 1, 5));
  EXPECT_EQ(pc.stats().blocks, 2);
  // The same tokens behind the same parent are indexed once: the second holder keeps its own.
  EXPECT_FALSE(InsertWalking(pc, a, 1, 6));
  EXPECT_EQ(pc.Match(a.data(), 4, 10), (std::vector<int>{0, 1}));
  // b's own chain is separate.
  EXPECT_TRUE(InsertWalking(pc, b, 0, 2));
  EXPECT_TRUE(InsertWalking(pc, b, 1, 3));
  EXPECT_EQ(pc.Match(b.data(), 4, 10), (std::vector<int>{2, 3}));
  EXPECT_EQ(pc.Match(a.data(), 4, 10), (std::vector<int>{0, 1}));
  EXPECT_EQ(pc.Blocks(), (std::vector<int>{0, 1, 2, 3}));
}

TEST(PrefixCache, EvictsTheLeastRecentlyUsedLeafNobodyUses) {
  PrefixCache pc(2);
  const std::vector<int> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9, 10};
  Index(pc, a, 3, 0);         // blocks 0 <- 1 <- 2
  Index(pc, b, 2, 3);         // blocks 3 <- 4
  pc.Match(a.data(), 6, 10);  // a used after b
  std::vector<bool> used(5, false);
  auto in_use = [&](int block) { return used[block]; };
  // Leaves are 2 and 4; 4's chain (b) was used longest ago.
  EXPECT_EQ(pc.EvictOne(in_use), 4);
  EXPECT_EQ(pc.EvictOne(in_use), 3);  // 3 became a leaf
  used[2] = true;                     // a running row holds block 2: it and its parents stay
  EXPECT_EQ(pc.EvictOne(in_use), -1);
  used[2] = false;
  EXPECT_EQ(pc.EvictOne(in_use), 2);
  EXPECT_EQ(pc.Match(a.data(), 6, 10), (std::vector<int>{0, 1}));
  EXPECT_EQ(pc.EvictOne(in_use), 1);
  EXPECT_EQ(pc.EvictOne(in_use), 0);
  EXPECT_EQ(pc.EvictOne(in_use), -1);
  EXPECT_EQ(pc.stats().evictions, 5);
  EXPECT_EQ(pc.stats().blocks, 0);
  // Freed nodes are reused and the index still answers right.
  Index(pc, b, 2, 9);
  EXPECT_EQ(pc.Match(b.data(), 4, 10), (std::vector<int>{9, 10}));
  EXPECT_EQ(pc.Match(a.data(), 6, 10), (std::vector<int>{}));
}

TEST(PrefixCache, InsertContinuesFromTheHandleTheLastCallLeft) {
  PrefixCache pc(2);
  const std::vector<int> a = {1, 2, 3, 4, 5, 6, 7, 8}, b = {1, 2, 3, 4, 9, 9, 9, 9};
  PrefixCache::Handle chain;
  EXPECT_TRUE(pc.Insert(a.data(), 0, 0, chain));
  EXPECT_TRUE(pc.Insert(a.data(), 1, 1, chain));
  // Tokens already indexed: false, and the handle moves to the node that holds them.
  PrefixCache::Handle other;
  EXPECT_FALSE(pc.Insert(a.data(), 0, 7, other));
  EXPECT_FALSE(pc.Insert(a.data(), 1, 8, other));
  EXPECT_TRUE(pc.Insert(a.data(), 2, 2, other));
  EXPECT_EQ(pc.Match(a.data(), 8, 10), (std::vector<int>{0, 1, 2}));
  // Match leaves a handle to the last block it returned; b goes on from a's first two blocks.
  PrefixCache::Handle from_match;
  EXPECT_EQ(pc.Match(b.data(), 8, 10, &from_match), (std::vector<int>{0, 1}));
  EXPECT_TRUE(pc.Insert(b.data(), 2, 3, from_match));
  EXPECT_TRUE(pc.Insert(b.data(), 3, 4, from_match));
  EXPECT_EQ(pc.Match(b.data(), 8, 10), (std::vector<int>{0, 1, 3, 4}));
  // A handle of another block index is not taken for the parent: the chain is walked.
  PrefixCache::Handle stale = from_match;  // block 3 of b
  EXPECT_TRUE(pc.Insert(a.data(), 3, 5, stale));
  EXPECT_EQ(pc.Match(a.data(), 8, 10), (std::vector<int>{0, 1, 2, 5}));
  // A handle whose node was evicted (its slot reused since) is stale: the walk finds nothing.
  PrefixCache::Handle evicted;
  EXPECT_EQ(pc.Peek(b.data(), 8, 10, &evicted), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(pc.EvictOne([](int block) { return block != 4; }), 4);
  PrefixCache::Handle reused;
  const std::vector<int> c = {6, 6};
  EXPECT_TRUE(pc.Insert(c.data(), 0, 6, reused));
  EXPECT_EQ(reused.node, evicted.node);  // the freed node, a first block now
  std::vector<int> b5 = b;
  b5.insert(b5.end(), {5, 5});
  EXPECT_FALSE(pc.Insert(b5.data(), 4, 9, evicted));
  EXPECT_EQ(evicted.node, -1);
  EXPECT_EQ(pc.Match(b5.data(), 10, 10), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(pc.Match(c.data(), 2, 10), (std::vector<int>{6}));
}

KVCacheShape Shape() {
  KVCacheShape s;
  s.n_layers = 2;
  s.user_rows = 3;
  s.n_kv_heads = 2;
  s.max_seq = 64;
  s.head_dim = 16;  // bfp8 shares an exponent among 16 values
  return s;
}

void WriteRow(KVCache& cache, int user, int from, int to, float base) {
  const KVCacheShape& s = cache.shape();
  std::vector<float> k(s.n_kv_heads * s.head_dim), v(k.size());
  for (int pos = from; pos < to; ++pos)
    for (int layer = 0; layer < s.n_layers; ++layer) {
      for (size_t i = 0; i < k.size(); ++i) {
        k[i] = base + 0.01f * pos + 0.1f * layer + 0.001f * i;
        v[i] = -k[i];
      }
      cache.Write(layer, user, pos, k.data(), v.data());
    }
}

std::vector<float> ReadRows(const KVCache& cache, int user, int len) {
  const KVCacheShape& s = cache.shape();
  std::vector<float> out;
  std::vector<float> k(len * s.head_dim), v(k.size());
  for (int layer = 0; layer < s.n_layers; ++layer)
    for (int h = 0; h < s.n_kv_heads; ++h) {
      cache.DecodeRows(layer, user, h, 0, len, k.data(), v.data());
      out.insert(out.end(), k.begin(), k.end());
      out.insert(out.end(), v.begin(), v.end());
    }
  return out;
}

// A row adopts another's full blocks: it reads exactly their K/V, writes past them without touching
// them, and the blocks live on while the index holds them. A tensor-parallel rank's cache follows
// by replaying the journal between the same writes (its forward pass's): its tables stay equal.
TEST(PrefixCacheKV, AdoptedBlocksReadAsWrittenAndTheJournalFollows) {
  for (KVDType dtype : {KVDType::kBF16, KVDType::kInt8, KVDType::kFP8E4M3, KVDType::kBFP8}) {
    SCOPED_TRACE(KVDTypeName(dtype));
    KVCacheOptions o;
    o.dtype = dtype;
    o.block_size = 8;
    o.n_blocks = 12;
    o.journal = true;
    KVCache cache(Shape(), o);
    o.journal = false;
    KVCache follower(Shape(), o);
    auto sync = [&] {
      for (const KVCacheOp& op : cache.journal()->Take()) follower.Apply(op);
    };
    auto both_write = [&](int user, int from, int to, float base) {
      sync();
      WriteRow(cache, user, from, to, base);
      WriteRow(follower, user, from, to, base);
    };
    PrefixCache pc(8);
    const std::vector<int> prompt = Seq(20);
    both_write(0, 0, 20, 1.0f);  // 2 full blocks + 4 positions
    PrefixCache::Handle chain;
    for (int i = 0; i < 2; ++i)
      if (pc.Insert(prompt.data(), i, cache.user_block(0, i * 8), chain))
        cache.RetainBlock(cache.user_block(0, i * 8));
    const std::vector<int> blocks = pc.Match(prompt.data(), 19, 100);
    ASSERT_EQ(blocks.size(), 2u);
    cache.AdoptBlocks(1, blocks);
    EXPECT_EQ(cache.block_refs(blocks[0]), 3);  // row 0, the index, row 1
    const std::vector<float> prefix = ReadRows(cache, 0, 16), row0 = ReadRows(cache, 0, 20);
    EXPECT_EQ(ReadRows(cache, 1, 16), prefix);
    both_write(1, 16, 24, 5.0f);  // row 1's own block from position 16
    EXPECT_EQ(ReadRows(cache, 0, 20), row0);
    EXPECT_EQ(ReadRows(cache, 1, 16), prefix);
    const int free_before = cache.free_blocks();
    cache.ResetUser(0);
    cache.ResetUser(1);
    EXPECT_EQ(cache.free_blocks(), free_before + 2);  // the 2 private blocks; the index keeps 2
    EXPECT_EQ(cache.block_refs(blocks[0]), 1);
    // A later request adopts them from the index alone.
    cache.AdoptBlocks(2, pc.Match(prompt.data(), 20, 100));
    EXPECT_EQ(ReadRows(cache, 2, 16), prefix);
    sync();
    for (int pos : {0, 8}) EXPECT_EQ(follower.user_block(2, pos), cache.user_block(2, pos));
    EXPECT_EQ(ReadRows(follower, 2, 16), prefix);
    EXPECT_EQ(follower.free_blocks(), cache.free_blocks());
    // Evicted and released, the blocks go back to the pool, on both.
    cache.ResetUser(2);
    for (int b; (b = pc.EvictOne([&](int blk) { return cache.block_refs(blk) > 1; })) >= 0;)
      cache.ReleaseBlock(b);
    EXPECT_EQ(cache.free_blocks(), 12);
    sync();
    EXPECT_EQ(follower.free_blocks(), 12);
    EXPECT_THROW(cache.AdoptBlocks(0, {99}), InternalError);
    EXPECT_THROW(cache.AdoptBlocks(0, {3}), InternalError);  // a free block
  }
}

}  // namespace
}  // namespace wc
