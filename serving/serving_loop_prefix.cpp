// The serving loop's side of the prefix cache (kvcache/prefix_cache.h): full blocks a row has
// written go into the index as they fill; a request admitted into an empty row takes the longest
// cached run of its tokens' blocks; unused cached blocks are evicted, least recently used first,
// when a step needs room. Every block operation goes through the KV cache (journaled: a
// tensor-parallel rank's cache follows). Loop thread only.
#include <algorithm>
#include <unordered_map>

#include "serving/serving_loop.h"
#include "serving/serving_loop_state.h"
#include "serving/step_planner.h"
#include "util/error.h"

namespace wc {

namespace {

// Full blocks of a prompt the cache may give: all but its last token (its logits start the reply).
int MaxPrefixBlocks(const std::vector<int>& feed, int block_size) {
  return (static_cast<int>(feed.size()) - 1) / std::max(1, block_size);
}

}  // namespace

std::vector<int> ServingLoop::PeekPrefix(const std::vector<int>& feed) const {
  if (!prefix_) return {};
  const int max_blocks = MaxPrefixBlocks(feed, cache_->block_size());
  if (max_blocks < 1) return {};
  return prefix_->Peek(feed.data(), static_cast<int>(feed.size()), max_blocks);
}

bool ServingLoop::PrefixInFlight(const std::vector<int>& feed, int cached) const {
  const int bs = cache_->block_size();
  const int max_blocks = MaxPrefixBlocks(feed, bs);
  if (!prefix_ || cached >= max_blocks) return false;
  const size_t want = static_cast<size_t>(cached + 1) * bs;  // one more block than the cache has
  for (const Row& r : rows_) {
    if (!r.run || r.run->decoding || !r.tokens_known || r.leader >= 0) continue;
    // The row's prompt: the tokens in its KV, then those it has still to feed.
    if (r.cur_pos / bs > cached)
      continue;  // it has written those blocks (they are indexed, or
                 // the same tokens were already: not this request's)
    const std::vector<int>& rest = r.run->to_feed;
    const size_t total = r.tokens.size() + (rest.size() - r.run->fed);
    if (total < want) continue;
    size_t i = 0;
    for (; i < want && i < r.tokens.size(); ++i)
      if (r.tokens[i] != feed[i]) break;
    if (i < r.tokens.size() && i < want) continue;
    for (; i < want; ++i)
      if (rest[r.run->fed + (i - r.tokens.size())] != feed[i]) break;
    if (i == want) return true;
  }
  return false;
}

int ServingLoop::CommittedBlocks() const {
  if (!cache_->paged()) return 0;
  if (!prefix_) return reserved_blocks_;
  // The overlap changes only with the rows' blocks (the pool's version) and with which rows are
  // beams of a leader (overlap_version_ reset where that changes): rescanned only then.
  if (overlap_version_ != cache_->blocks_version()) {
    overlap_ = SharedRowBlocks();
    overlap_version_ = cache_->blocks_version();
  }
  return reserved_blocks_ - overlap_;
}

int ServingLoop::SharedRowBlocks() const {
  // A beam's row shares its leader's blocks within the leader's reservation: only leaders and
  // single rows are counted.
  int overlap = 0;
  std::unordered_map<int, int> holders;  // block -> rows holding it
  for (int row = 0; row < options_.user_rows; ++row) {
    if (rows_[row].leader >= 0) continue;
    const int n = cache_->user_blocks(row);
    for (int i = 0; i < n; ++i)
      if (++holders[cache_->user_block(row, i * cache_->block_size())] > 1) ++overlap;
  }
  return overlap;
}

int ServingLoop::AdoptPrefix(int row, std::vector<int>& feed) {
  Row& r = rows_[row];
  r.tokens.clear();
  r.tokens_known = true;
  r.indexed_blocks = 0;
  r.index_chain = {};
  const int bs = cache_->block_size();
  const int max_blocks = MaxPrefixBlocks(feed, bs);
  if (!prefix_ || r.cur_pos != 0 || max_blocks < 1) return 0;
  const std::vector<int> blocks =
      prefix_->Match(feed.data(), static_cast<int>(feed.size()), max_blocks, &r.index_chain);
  if (blocks.empty()) return 0;
  cache_->AdoptBlocks(row, blocks);
  const int n = static_cast<int>(blocks.size()) * bs;
  r.cur_pos = n;
  r.tokens.assign(feed.begin(), feed.begin() + n);
  r.indexed_blocks = static_cast<int>(blocks.size());
  feed.erase(feed.begin(), feed.begin() + n);
  return n;
}

void ServingLoop::IndexRow(int row) {
  Row& r = rows_[row];
  if (!prefix_ || !r.tokens_known) return;
  WC_CHECK(static_cast<int>(r.tokens.size()) == r.cur_pos, "row ", row, " knows ", r.tokens.size(),
           " tokens of ", r.cur_pos);
  const int bs = cache_->block_size();
  const int full = r.cur_pos / bs;
  for (int i = r.indexed_blocks; i < full; ++i) {
    const int block = cache_->user_block(row, i * bs);
    if (!prefix_->Insert(r.tokens.data(), i, block, r.index_chain)) continue;
    cache_->RetainBlock(block);
    if (store_ && !store_->Known(r.tokens.data(), i)) {
      std::vector<uint8_t> bytes(static_cast<size_t>(cache_->block_bytes()));
      cache_->ReadBlock(block, bytes.data());
      store_->Save(r.tokens.data(), i, std::move(bytes));
    }
  }
  r.indexed_blocks = std::max(r.indexed_blocks, full);
}

void ServingLoop::LoadStored(const std::vector<int>& feed) {
  if (!store_) return;
  const int max_blocks = MaxPrefixBlocks(feed, cache_->block_size());
  const int n = static_cast<int>(feed.size());
  PrefixCache::Handle chain;
  std::vector<int> run = prefix_->Peek(feed.data(), n, max_blocks, &chain);
  std::vector<uint8_t> bytes;  // [block_bytes]
  for (int i = static_cast<int>(run.size()); i < max_blocks; ++i) {
    bytes.resize(static_cast<size_t>(cache_->block_bytes()));
    if (!store_->Load(feed.data(), i, bytes.data())) return;
    MakeRoom(1, run);
    const int block = cache_->ImportBlock(bytes.data());
    if (block < 0) return;  // the rows hold the whole pool: computed instead
    // The index's reference is the one ImportBlock returned with.
    WC_CHECK(prefix_->Insert(feed.data(), i, block, chain),
             "a mapped-in block was indexed already");
    run.push_back(block);
  }
}

void ServingLoop::MakeRoom(int blocks, const std::vector<int>& keep) {
  while (cache_->free_blocks() < blocks) {
    const int b = prefix_->EvictOne([&](int block) {
      return cache_->block_refs(block) > 1 ||
             std::find(keep.begin(), keep.end(), block) != keep.end();
    });
    if (b < 0) return;
    cache_->ReleaseBlock(b);
  }
}

int ServingLoop::BlocksInUse() const {
  return cache_->row_blocks();
}

void ServingLoop::CheckBlockCounts() {
  // The rescans the running counts replace.
  int used = cache_->n_blocks() - cache_->free_blocks();
  if (prefix_)
    for (int b : prefix_->Blocks())
      if (cache_->block_refs(b) == 1) --used;
  const int committed = !cache_->paged() ? 0 : reserved_blocks_ - (prefix_ ? SharedRowBlocks() : 0);
  WC_CHECK(BlocksInUse() == used && CommittedBlocks() == committed,
           "block counts drifted: ", BlocksInUse(), " in use (a rescan finds ", used, "), ",
           CommittedBlocks(), " committed (a rescan finds ", committed, ")");
}

int ServingLoop::StepBlocks(const std::vector<PlannedChunk>& chunks) const {
  const int bs = cache_->block_size();
  int n = 0;
  auto add = [&](int row, int first, int count) {
    const int have = cache_->user_blocks(row);
    n += std::max(0, BlocksFor(first + count) - have);
    if (first < have * bs && cache_->block_refs(cache_->user_block(row, first)) > 1) ++n;
  };
  for (const PlannedChunk& ch : chunks) {
    const Running& run = *rows_[ch.row].run;
    if (run.beam && run.decoding) {
      for (int i = 0; i < ch.n_tokens; ++i) {
        const int row = run.beam->rows[run.fed + i];
        add(row, rows_[row].cur_pos, 1);
      }
    } else {
      add(ch.row, rows_[ch.row].cur_pos, ch.n_tokens);
    }
  }
  return n;
}

}  // namespace wc
