// How the ranks of a tensor-parallel group run one model together, as seed 001's host drives its
// chips: rank 0 runs the command (tokenizer, sampling, front end, serving loop) and, before each
// forward pass, broadcasts a step: the token batch, the KV cache it runs on (shape and options, so
// a rank makes its own cache of its KV heads the first time it sees one) and the row operations
// (kvcache/kv_journal.h) rank 0's loop did to that cache since the last step. The other ranks
// follow: replay the operations, run the same DecoderModel::Forward, whose partial sums meet rank
// 0's in every layer. Rank 0 ends the group with StopFollowers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "kvcache/kv_cache.h"

namespace wc {

class DecoderModel;
struct TokenBatch;
class Communicator;

// Rank 0's side (DecoderModel owns one when it is rank 0 of a group).
class TensorParallelLeader {
 public:
  explicit TensorParallelLeader(Communicator& group) : group_(group) {}
  // Broadcasts the step `batch` on `cache` (made with KVCacheOptions::journal). Called by
  // DecoderModel::Forward, from one thread at a time.
  void Announce(const TokenBatch& batch, const KVCache& cache);
  // Tells the followers to return from FollowSteps. Idempotent.
  void Stop();

 private:
  Communicator& group_;
  std::mutex mu_;
  bool stopped_ = false;
  std::map<uint64_t, std::shared_ptr<KVJournal>> caches_;  // id -> journal of caches seen
};

// A follower rank's loop (rank != 0 of model.options().tensor_group): runs every step rank 0
// announces, in its own caches, until rank 0 stops it. Throws wc::Error if a step cannot be
// decoded or a collective fails; a forward pass's error (every rank's at once, rank 0 reports it)
// does not end the loop. `after_step` (tests: comparing this rank's cache with rank 0's), if set,
// is called on this thread after each step's forward pass with the cache the step ran on.
void FollowSteps(const DecoderModel& model,
                 const std::function<void(const KVCache&)>& after_step = nullptr);

}  // namespace wc
