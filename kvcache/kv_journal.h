// A KV cache's row and block operations (reset, share, reorder, adopt, retain, release) as a log
// another cache can replay: how a tensor-parallel rank's cache (its KV heads) follows rank 0's,
// whose serving loop decides them. The positions' K/V themselves are written by each rank's own
// forward pass (KVCache::Write), in the same order on every rank, so the caches' block tables stay
// equal.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace wc {

struct KVCacheOp {
  enum class Kind : uint8_t { kReset, kShare, kReorder, kAdopt, kRetain, kRelease, kTruncate };
  Kind kind = Kind::kReset;
  int user = 0;      // kReset, kTruncate: the row; kShare, kAdopt: the destination row
  int src = 0;       // kShare: the source row; kRetain, kRelease: the block
  int n_tokens = 0;  // kShare, kReorder, kTruncate
  std::vector<int> users, parents;  // kReorder; kAdopt: users holds the blocks
};

// Filled by a KVCache made with KVCacheOptions::journal (from whichever thread mutates it), read by
// the thread that runs the forward pass.
class KVJournal {
 public:
  explicit KVJournal(uint64_t id) : id_(id) {}
  // Unique in the process, never reused: tells caches apart.
  uint64_t id() const { return id_; }
  void Record(KVCacheOp op) {
    std::lock_guard<std::mutex> lock(mu_);
    ops_.push_back(std::move(op));
  }
  // The operations since the last Take, in order.
  std::vector<KVCacheOp> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<KVCacheOp> out;
    out.swap(ops_);
    return out;
  }
  // Set by the cache's destructor.
  void MarkDestroyed() {
    std::lock_guard<std::mutex> lock(mu_);
    destroyed_ = true;
  }
  bool destroyed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return destroyed_;
  }

 private:
  const uint64_t id_;
  mutable std::mutex mu_;
  std::vector<KVCacheOp> ops_;
  bool destroyed_ = false;
};

}  // namespace wc
