// Paged KV bookkeeping: allocation, free, reuse, sharing with reference counts, copy-on-write,
// and a full pool that fails cleanly.
#include <gtest/gtest.h>

#include "kvcache/block_pool.h"
#include "util/error.h"

namespace wc {
namespace {

TEST(BlockPool, AllocatesFreesAndReusesBlocks) {
  BlockPool pool(4, 32);
  const int a = pool.Allocate(), b = pool.Allocate();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(pool.free_blocks(), 2);
  pool.Release(a);
  EXPECT_EQ(pool.free_blocks(), 3);
  EXPECT_EQ(pool.Allocate(), a);  // the freed block comes back first
  EXPECT_THROW(BlockPool(4, 48), Error);
}

TEST(BlockTable, MapsPositionsToBlocksAndReturnsThemOnClear) {
  BlockPool pool(8, 32);
  {
    BlockTable t(pool);
    t.Reserve(65);  // 3 blocks
    EXPECT_EQ(t.capacity(), 96);
    EXPECT_EQ(t.block(0), t.blocks()[0]);
    EXPECT_EQ(t.block(64), t.blocks()[2]);
    EXPECT_EQ(pool.free_blocks(), 5);
    t.Reserve(10);  // already addressable: nothing new
    EXPECT_EQ(pool.free_blocks(), 5);
  }
  EXPECT_EQ(pool.free_blocks(), 8);  // the destructor gave them back
}

// Speculative decoding's rollback: the blocks past the positions kept return to the pool; a block
// another table shares stays with it.
TEST(BlockTable, TruncateReturnsTheBlocksPastThePositionsKept) {
  BlockPool pool(8, 16);
  BlockTable t(pool);
  t.Reserve(40);  // 3 blocks
  EXPECT_EQ(pool.free_blocks(), 5);
  t.Truncate(40);
  EXPECT_EQ(t.blocks().size(), 3u);
  t.Truncate(33);
  EXPECT_EQ(t.blocks().size(), 3u);
  t.Truncate(32);
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_EQ(pool.free_blocks(), 6);
  t.Truncate(17);
  EXPECT_EQ(t.blocks().size(), 2u);
  BlockTable other(pool);
  other.ShareFrom(t, 32);  // both blocks shared
  t.Truncate(1);
  EXPECT_EQ(t.blocks().size(), 1u);
  EXPECT_EQ(pool.free_blocks(), 6) << "the second block is still the other table's";
  EXPECT_EQ(pool.ref_count(other.blocks()[1]), 1);
  t.Truncate(0);
  EXPECT_TRUE(t.blocks().empty());
  EXPECT_EQ(pool.ref_count(other.blocks()[0]), 1);
  other.Clear();
  EXPECT_EQ(pool.free_blocks(), 8);
}

TEST(BlockTable, FullPoolFailsWithoutLeakingOrCorrupting) {
  BlockPool pool(3, 16);
  BlockTable a(pool), b(pool);
  a.Reserve(32);
  try {
    b.Reserve(40);  // needs 3, only 1 free
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache full"), std::string::npos);
  }
  EXPECT_EQ(b.capacity(), 0);  // all or nothing
  EXPECT_EQ(pool.free_blocks(), 1);
  EXPECT_EQ(a.capacity(), 32);  // the other table is untouched
}

TEST(BlockTable, SharedPromptBlocksAreCountedAndCopiedOnWrite) {
  BlockPool pool(8, 4);
  BlockTable prompt(pool);
  prompt.Reserve(10);  // blocks for positions 0..11
  BlockTable beam(pool);
  beam.ShareFrom(prompt, 10);
  EXPECT_EQ(beam.blocks(), prompt.blocks());
  for (int blk : prompt.blocks()) EXPECT_EQ(pool.ref_count(blk), 2);
  const int free_before = pool.free_blocks();
  // The beam writes position 10 (in the shared third block): it gets its own copy.
  const auto [from, to] = beam.MakeWritable(10);
  EXPECT_EQ(from, prompt.blocks()[2]);
  EXPECT_NE(to, from);
  EXPECT_EQ(beam.block(10), to);
  EXPECT_EQ(pool.ref_count(from), 1);
  EXPECT_EQ(pool.free_blocks(), free_before - 1);
  EXPECT_EQ(beam.MakeWritable(10), std::make_pair(-1, -1));  // already private
  prompt.Clear();
  EXPECT_EQ(pool.ref_count(beam.block(0)), 1);  // still held by the beam
  beam.Clear();
  EXPECT_EQ(pool.free_blocks(), 8);
}

}  // namespace
}  // namespace wc
