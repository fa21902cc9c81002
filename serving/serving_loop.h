// The serving loop of seed 001 (decode_backend_v1.py, DecodeBackend.run_generate): U user rows over
// one KV cache, a FIFO request queue, and on its own thread, step after step:
//   pick_prompts    admit queued requests into free rows (FIFO, "never evict": only when the KV
//                   blocks for the prompt plus max_new_tokens are free; nothing running is ever
//                   preempted or recomputed)
//   prepare_inputs  one TokenBatch: a token for every decoding row, prompt chunks of prefilling
//                   rows, at most max_batch_tokens (step_planner.h)
//   decode          one DecoderModel::Forward for the whole batch
//   switch_tokens   each row samples from its logits with its own RNG stream
//   push_outputs    text deltas to each request's observer
//   update_users    free the rows of requests that ended (EOS, stop string, max tokens, context
//                   full, cancellation)
//   send_status     queue length, rows, KV blocks, tokens/s (status(), from any thread)
//
// Determinism: a request's tokens and logits depend only on the model, its prompt, sampling
// parameters and seed - never on what else shares the batch, which row it gets, user_rows,
// max_batch_tokens, threads, or the KV layout (every kernel is batch-invariant; see
// kernels/matmul.h).
//
// Thread safety: Submit, Cancel, OpenSession, CloseSession, status and Shutdown may be called from
// any thread, including from an observer's callbacks.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "kvcache/kv_cache.h"
#include "kvcache/prefix_cache.h"
#include "kvcache/prefix_store.h"
#include "model/chat/chat_format.h"
#include "model/decoder_model.h"
#include "serving/request.h"
#include "tokenizer/tokenizer.h"

namespace wc {

// Paged KV blocks of this many tokens: the loop's default layout (TensorRT-LLM's default too).
constexpr int kServingBlockSize = 64;

struct PlannedChunk;  // step_planner.h

struct ServingOptions {
  int user_rows = 32;          // --user-rows: requests running at once
  int max_batch_tokens = 256;  // --max-batch-tokens: tokens per forward call (>= 1)
  int threads = 0;             // OpenMP threads of the loop's thread (0 = all cores)
  int ctx = 0;                 // positions per user row (0 = the model's max_position_embeddings)
  // Format and scales; block_size 0 = contiguous, else paged (the default: kServingBlockSize).
  KVCacheOptions kv = [] {
    KVCacheOptions o;
    o.block_size = kServingBlockSize;
    return o;
  }();
  // --prefix-cache: keep full KV blocks after their request and hand them to any request whose
  // tokens start the same way (paged KV only; kvcache/prefix_cache.h).
  bool prefix_cache = true;
  // --prefix-cache-dir: also write full blocks to files there and map them in on later runs
  // (kvcache/prefix_store.h); empty: memory only. Needs the prefix cache (paged KV).
  std::string prefix_cache_dir;
  int64_t prefix_cache_dir_max_bytes = int64_t{1024} << 20;  // --prefix-cache-dir-max-mb
  // What, beside the KV layout the loop adds itself, decides a block's bytes: the model's
  // fingerprint, weight spec, kernels and build (app/model_loader.cpp's PrefixCacheKey).
  std::string prefix_cache_key;
  // Where the persisted cache's warnings go (a damaged file, a failed write); empty: stderr.
  std::function<void(const std::string&)> prefix_cache_warn;
  // Tests: after every step, compare the loop's running block counts (in use, committed) with a
  // rescan of the pool, the index and every row's blocks; a difference fails the loop (every
  // request ends with kError naming both counts).
  bool check_block_counts = false;
};

struct ServingStatus {
  int queued = 0;           // submitted, not yet admitted
  int active_rows = 0;      // rows running a request
  int prefilling_rows = 0;  // of those, still feeding their prompt
  int session_rows = 0;     // rows held by open sessions between requests
  int user_rows = 0;
  // Paged KV (all 0 when contiguous): pool size, blocks the running requests and idle sessions
  // hold now (the prefix cache's unused blocks not counted: prefix_blocks below), blocks promised
  // to them (admission's measure), and the most ever in use.
  int kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_reserved = 0, kv_blocks_peak = 0;
  double tokens_per_s = 0;  // sampled tokens per second over the last ~2 s
  int64_t steps = 0;
  int64_t tokens_sampled = 0, tokens_prefilled = 0;
  int64_t requests_finished = 0;
  double forward_s = 0;  // time inside DecoderModel::Forward
  double step_s = 0;     // time of whole steps (forward plus the loop's own work)
  // The prefix cache (all 0 when off): admissions that took cached blocks, the prompt tokens they
  // took, blocks evicted, blocks it holds now.
  int64_t prefix_hits = 0, prefix_cached_tokens = 0, prefix_evictions = 0;
  int prefix_blocks = 0;
  // --prefix-cache-dir (all 0 without): blocks mapped in from files, files written, damaged or
  // foreign files ignored, files deleted by the size cap.
  int64_t prefix_disk_loaded = 0, prefix_disk_saved = 0, prefix_disk_ignored = 0,
          prefix_disk_evicted = 0;
};

enum class ShutdownMode { kDrain, kCancel };

class ServingLoop {
 public:
  // Starts the loop's thread. `model`, `tokenizer` (may be null: then requests need prompt_ids)
  // and `chat_format` must outlive the loop. Throws wc::Error naming the flag for bad options
  // (--user-rows, --max-batch-tokens, --ctx, the KV options).
  ServingLoop(const DecoderModel& model, const Tokenizer* tokenizer,
              std::optional<ChatFormat> chat_format, const ServingOptions& options);
  // Shutdown(kCancel) if not shut down yet.
  ~ServingLoop();
  ServingLoop(const ServingLoop&) = delete;
  ServingLoop& operator=(const ServingLoop&) = delete;

  // Queues a request and returns its id. Never throws for a bad request: it ends with kError and a
  // one-line message (empty prompt, prompt too long for the context, out-of-range sampling values,
  // max_new_tokens that can never fit the KV pool, unknown or busy session, ...) and the loop goes
  // on. After Shutdown the request ends at once, on the calling thread, with kError.
  RequestId Submit(Request request);
  // What Submit checks before it queues a request, on the calling thread: throws wc::Error with
  // the one line the request would end with (kError, rejected), else returns its framed prompt
  // ids (empty for a session's turn, framed when it runs). Front ends that must answer before the
  // request runs (an HTTP status) call it first; the session check is left to Submit.
  std::vector<int> CheckRequest(const Request& request) const;
  // Cancels a queued or running request at the next step (it ends with kCancelled and the tokens
  // it has). Returns false if the id is unknown or already finished.
  bool Cancel(RequestId id);

  // A conversation that keeps its user row and KV across requests (Request::session).
  SessionId OpenSession();
  // Frees the session's row and blocks at the next step, cancelling its running request if any.
  void CloseSession(SessionId id);

  ServingStatus status() const;
  const ServingOptions& options() const { return options_; }
  // Bytes of the KV cache's storage (the paged pool, or every row's full context).
  int64_t kv_bytes() const { return cache_->storage_bytes(); }
  int ctx() const { return options_.ctx; }
  // The loop's KV cache, read-only, for tests that compare its rows and blocks. Read it only while
  // the loop cannot change it: after Shutdown, or while nothing runs or waits (after the last
  // request's OnFinish, before the next Submit).
  const KVCache& cache() const { return *cache_; }
  int user_rows() const { return options_.user_rows; }

  // kDrain: runs everything already submitted to the end; kCancel: cancels it. Then joins the
  // loop's thread and waits for --prefix-cache-dir's queued writes. Later Submits fail.
  // Idempotent.
  void Shutdown(ShutdownMode mode);

 private:
  struct Pending;  // a submitted request, before admission
  struct Running;  // a request in a user row
  struct Session;
  struct Row;
  struct BeamRun;

  void Run();
  // One step; returns false when the loop should stop.
  bool Step();
  void PickPrompts();
  enum class Admission {
    kDone,        // admitted, or ended (a bad request)
    kNoRoom,      // no row or KV blocks yet: it and everything behind it wait
    kPrefixSoon,  // a running row is prefilling blocks of its prompt: it waits for them
  };
  Admission Admit(std::unique_ptr<Pending>& p);
  // prepare_inputs, decode, then switch_tokens for the rows that got logits. Returns the seconds
  // spent in Forward.
  double Decode();
  // A row's logits after a step: one set (the row's last fed token), or 1 + proposed sets after a
  // speculative verify chunk ([n_logits, vocab]); samples, verifies, rolls back rejected
  // positions and proposes the next chunk.
  void SwitchTokens(int row, const float* logits, int n_logits);
  // Puts the next proposals after the row's sampled token in to_feed (speculating requests).
  void Propose(int row);
  // A beam request's step (serving_loop_beams.cpp) over logits [n_live, vocab] of its live beams:
  // advances the search, reorders the beams' rows, or ends the request.
  void BeamStep(int leader, const float* logits, int n_live);
  // Ends a beam request that ran to its end: its best hypotheses become the result.
  void FinishBeams(int leader);
  // Whether appending `token` to a beam's tokens completes one of its stop strings.
  bool CompletesStop(const BeamRun& beam, const std::vector<int>& tokens, int token) const;
  // A hypothesis's text, cut before its stop string.
  std::string HypothesisText(const BeamRun& beam, const std::vector<int>& tokens,
                             bool drop_last) const;
  // Frees a beam request's other rows; a session's leader row keeps only the prompt.
  void ReleaseBeams(int leader);
  // KV blocks a request needs: `prefix` tokens (conversation and prompt) shared, then max_new
  // tokens for each of `beams` beams (clipped to the context).
  int BlocksNeeded(int prefix, int max_new, int beams) const;
  bool RowFree(int row) const;
  void Finish(int row, StopReason reason, std::string error = {});
  // rejected: the request itself was bad (RequestResult::rejected).
  void FinishPending(Pending& p, StopReason reason, std::string error, bool rejected = false);
  void UpdateStatus(double step_s, double forward_s, int64_t sampled);
  // Whether a cancel, close or Shutdown(kCancel) arrived since the step began that ends a request
  // of `chunks` (the running forward pass) or its session: polled by the forward pass, so that
  // Ctrl-C stops a long prefill within milliseconds. Loop thread only.
  bool ForwardInterrupted(const std::vector<PlannedChunk>& chunks) const;
  bool AnyRunning() const;
  // Moves everything submitted into waiting_ (caller holds mu_).
  void TakeQueue();
  // Gives a row's KV blocks and reservation back and leaves the row free.
  void ReleaseRow(int row);
  // The prefix cache (serving_loop_prefix.cpp). At admission into an empty row: takes the
  // longest cached run of full blocks of `feed` - all but its last token at most, so the request's
  // first logits are computed - into the row and drops those tokens from `feed`; returns the
  // tokens taken.
  int AdoptPrefix(int row, std::vector<int>& feed);
  // The full blocks of `feed` an admission into an empty row would take from the cache (all but
  // its last token at most), without taking them.
  std::vector<int> PeekPrefix(const std::vector<int>& feed) const;
  // --prefix-cache-dir: maps into the cache the stored blocks of `feed` past those it holds (as
  // many as the pool has room for without evicting blocks rows hold).
  void LoadStored(const std::vector<int>& feed);
  // Whether a running row is still prefilling a prompt whose first full blocks match `feed`'s
  // beyond the `cached` blocks the cache holds now (within all but its last token): then the
  // request waits for those blocks rather than computing them again.
  bool PrefixInFlight(const std::vector<int>& feed, int cached) const;
  // Blocks admission has promised: every row's reservation, less the blocks two rows' tables
  // share (a block taken from the cache by one row and held by another counts once). The overlap
  // is rescanned only when the rows' blocks or beams changed since the last call.
  int CommittedBlocks() const;
  // The blocks two rows' tables share (beams of a leader not counted), by a scan of every row.
  int SharedRowBlocks() const;
  // ServingOptions::check_block_counts: compares BlocksInUse and CommittedBlocks with rescans;
  // throws wc::Error if they differ (the loop fails: every request ends with kError).
  void CheckBlockCounts();
  // After a step: the row's newly full blocks go into the index.
  void IndexRow(int row);
  // Before a step: evicts unused cached blocks until the pool has the `blocks` the step may
  // allocate (or nothing is left to evict).
  // `keep`: blocks not to evict (a run being mapped in).
  void MakeRoom(int blocks, const std::vector<int>& keep = {});
  // Paged KV blocks the rows (requests, sessions) hold: the pool's taken blocks less those only the
  // prefix cache holds (the pool's running count, KVCache::row_blocks).
  int BlocksInUse() const;
  // Blocks the step's chunks may allocate: new blocks past each row's table and a copy of a
  // shared block written into.
  int StepBlocks(const std::vector<PlannedChunk>& chunks) const;
  int BlocksFor(int n_tokens) const;
  double Now() const;

  const DecoderModel& model_;
  const Tokenizer* tokenizer_;
  std::optional<ChatFormat> chat_format_;
  ServingOptions options_;
  std::unique_ptr<KVCache> cache_;
  std::unique_ptr<PrefixCache> prefix_;  // paged KV with options_.prefix_cache, else null
  std::unique_ptr<PrefixStore> store_;   // prefix_ with options_.prefix_cache_dir, else null
  std::chrono::steady_clock::time_point t0_;

  // Shared with other threads, under mu_.
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Pending>> queue_;
  std::set<RequestId> live_;     // submitted and not finished
  std::set<RequestId> cancels_;  // to cancel at the next step
  std::set<SessionId> closes_;   // sessions to close at the next step
  // Set with every cancel, close and Shutdown(kCancel), cleared when the loop takes them: a
  // cheap first test for the forward pass's interrupt (ForwardInterrupted).
  std::atomic<bool> interrupt_{false};
  std::set<SessionId> open_sessions_;
  RequestId next_id_ = 1;
  SessionId next_session_ = 1;
  bool stopping_ = false;
  ShutdownMode stop_mode_ = ShutdownMode::kDrain;
  ServingStatus status_;

  // The loop thread's own state.
  std::vector<Row> rows_;                         // [user_rows]
  std::map<SessionId, Session> sessions_;         // sessions seen by the loop
  std::deque<std::unique_ptr<Pending>> waiting_;  // taken from queue_, FIFO, not yet admitted
  int64_t admit_seq_ = 0;
  bool room_freed_ = false;  // a request ended since the last PickPrompts
  int rotate_ = 0;
  int reserved_blocks_ = 0;
  // CommittedBlocks' overlap (SharedRowBlocks) as of the pool's blocks_version overlap_version_;
  // -1: rescan (also set where a row becomes or stops being a beam of a leader).
  mutable int overlap_ = 0;
  mutable int64_t overlap_version_ = -1;
  int peak_blocks_ = 0;
  int64_t tokens_sampled_ = 0, tokens_prefilled_ = 0;
  std::deque<std::pair<double, int64_t>> rate_window_;  // (time, tokens sampled) per step

  std::thread thread_;
  std::thread::id loop_thread_id_;  // thread_'s id (thread_ itself changes when it is joined)
  std::mutex join_mu_;              // serializes joining thread_
};

}  // namespace wc
