#include "dist/thread_group.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "util/error.h"

namespace wc {
namespace {

// What the ranks share: each collective publishes every rank's buffers, then waits at a barrier
// for all to arrive, copies, and waits again so no buffer is reused while another rank reads it.
struct Group {
  explicit Group(int n) : ranks(n), in(static_cast<size_t>(n)) {}
  const int ranks;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  int64_t generation = 0;
  std::vector<const void*> in;  // [ranks]: each rank's input of the current collective

  // Blocks until every rank has called it (for the same collective), or throws after `timeout_s`.
  // Returns false on timeout (the caller throws).
  bool Meet(int rank, double timeout_s) {
    std::unique_lock<std::mutex> lock(mu);
    const int64_t gen = generation;
    if (++arrived == ranks) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return true;
    }
    (void)rank;
    return cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                       [&] { return generation != gen; });
  }
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->ranks; }
  int local_size() const override { return group_->ranks; }
  std::string Describe() const override { return Cat("threads, ", group_->ranks, " ranks"); }

  void Broadcast(void* data, size_t bytes, int root) override {
    WC_CHECK(root >= 0 && root < size(), "broadcast root ", root);
    Publish(data);
    Meet("broadcast");
    if (rank_ != root && bytes > 0) std::memcpy(data, group_->in[static_cast<size_t>(root)], bytes);
    Meet("broadcast");
  }
  void AllGather(const void* in, size_t bytes, void* out) override {
    Publish(in);
    Meet("all-gather");
    // Another rank's output may be this rank's input (in place): read inputs into a copy first.
    std::vector<char> all(bytes * static_cast<size_t>(size()));  // [ranks, bytes]
    for (int r = 0; r < size(); ++r)
      if (bytes > 0)
        std::memcpy(&all[bytes * static_cast<size_t>(r)], group_->in[static_cast<size_t>(r)],
                    bytes);
    Meet("all-gather");
    if (!all.empty()) std::memcpy(out, all.data(), all.size());
  }
  void Barrier() override { Meet("barrier"); }
  [[noreturn]] void Abort(int code) override { std::exit(code); }

 private:
  void Meet(const char* what) {
    if (group_->Meet(rank_, timeout_seconds())) return;
    MarkBroken();
    throw Error(Cat("rank ", rank_, " of ", size(), ": ", what, " timed out after ",
                    static_cast<int>(timeout_seconds()),
                    " s waiting for the other ranks (one of them died or stopped answering)"));
  }
  void Publish(const void* in) {
    std::lock_guard<std::mutex> lock(group_->mu);
    group_->in[static_cast<size_t>(rank_)] = in;
  }
  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> MakeThreadGroup(int ranks) {
  WC_CHECK(ranks >= 1, "a thread group of ", ranks, " ranks");
  auto group = std::make_shared<Group>(ranks);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < ranks; ++r) out.push_back(std::make_unique<ThreadCommunicator>(group, r));
  return out;
}

}  // namespace wc
