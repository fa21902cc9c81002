// The prefix cache persisted across runs (--prefix-cache-dir): full KV blocks written to files
// under a directory, found again by the exact tokens they hold and everything before them, so a
// later run maps them in instead of prefilling (a nightly batch or a transcript suite pays for its
// shared system prompt once per machine).
//
// One file per block, named <key>-<chain>.kvb: `key` a hash of everything that decides a block's
// bytes (the caller's key text: model fingerprint, weight spec, kernels, KV format, block size,
// scales), `chain` a hash of the block's tokens and all before it. A file holds
//   magic "WCKVBLK1", u64 key hash, u32 key length, the key text, u32 block size, u32 token count
//   n, i32 tokens [n] (the whole prefix up to the block's end), u64 payload bytes, the payload
//   (KVCache::ReadBlock's bytes), u64 XXH3-64 of everything before it
// so a load compares the key text and every token, not just hashes, and checks the size and the
// checksum: a torn, damaged or foreign file is ignored with a one-line warning (its tokens are
// computed again, and the new block replaces it) - never trusted, never a crash.
//
// Writes run on the store's own thread (the serving loop hands over a copy of the bytes and goes
// on): a temporary file in the directory, fsync, rename over the final name, fsync of the
// directory - a reader sees a whole file or none. After each write the directory is kept under its
// size cap by deleting the files least recently written or loaded (a load touches its file's
// mtime). Files of other keys share the directory and the cap.
//
// Thread safety: Load and Save from one thread (the loop's); the writer thread is internal.
// Destruction writes everything queued, then joins.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace wc {

struct PrefixStoreOptions {
  std::string dir;          // created, with its parents, if missing
  int64_t max_bytes = 0;    // the directory's cap (every .kvb file in it), >= 1
  std::string key;          // what decides a block's bytes (compared exactly on load)
  int block_size = 0;       // tokens per block
  int64_t block_bytes = 0;  // payload bytes per block (KVCache::block_bytes())
  // Where warnings go (one line each, no newline); default: stderr, "wormchat: warning: ...".
  std::function<void(const std::string&)> warn;
};

struct PrefixStoreStats {
  int64_t loaded = 0;   // blocks read back
  int64_t saved = 0;    // files written
  int64_t ignored = 0;  // damaged or foreign files ignored
  int64_t evicted = 0;  // files deleted by the size cap
  int64_t failed = 0;   // writes that failed (disk full, ...): warned, the run goes on
};

class PrefixStore {
 public:
  // Creates the directory, checks that a file can be written in it, and removes temporary files a
  // crashed writer left. Throws wc::Error naming --prefix-cache-dir and the problem.
  explicit PrefixStore(PrefixStoreOptions options);
  ~PrefixStore();
  PrefixStore(const PrefixStore&) = delete;
  PrefixStore& operator=(const PrefixStore&) = delete;

  // Block `index` of a sequence `tokens` ((index + 1) * block_size of them) into `out`
  // [block_bytes]: true when its file exists and checks out; false when there is none, or it is
  // damaged or foreign (warned once per file).
  bool Load(const int* tokens, int index, uint8_t* out);
  // Queues block `index` of `tokens` for writing, with its bytes [block_bytes], unless this store
  // has written or loaded that file already.
  void Save(const int* tokens, int index, std::vector<uint8_t> bytes);
  // Whether this store has written (or queued) or loaded block `index` of `tokens`: Save would do
  // nothing.
  bool Known(const int* tokens, int index) const {
    return known_.count(PathOf(tokens, index)) != 0;
  }
  // Waits until every queued write is done (tests, and the end of a run).
  void Flush();

  PrefixStoreStats stats() const;
  const std::string& dir() const { return options_.dir; }
  // The file that holds block `index` of `tokens`.
  std::string PathOf(const int* tokens, int index) const;

 private:
  struct Job {
    std::string path;
    std::vector<int> tokens;  // [(index + 1) * block_size]
    std::vector<uint8_t> bytes;
  };
  void Writer();
  void Write(const Job& job);
  // Deletes the oldest .kvb files until the directory holds at most max_bytes.
  void Trim();
  void Warn(const std::string& message);

  PrefixStoreOptions options_;
  uint64_t key_hash_ = 0;
  std::set<std::string> known_;   // files written or loaded by this store (loop thread)
  std::set<std::string> warned_;  // files warned about (loop thread)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool busy_ = false;  // the writer holds a job
  bool stop_ = false;
  PrefixStoreStats stats_;
  int64_t dir_bytes_ = -1;  // the directory's .kvb bytes as last counted (-1: count again)
  std::thread writer_;
};

}  // namespace wc
