#include "serving/serving_loop.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "serving/proposer.h"
#include "serving/serving_loop_state.h"
#include "serving/step_planner.h"
#include "util/error.h"

namespace wc {

ServingLoop::ServingLoop(const DecoderModel& model, const Tokenizer* tokenizer,
                         std::optional<ChatFormat> chat_format, const ServingOptions& options)
    : model_(model),
      tokenizer_(tokenizer),
      chat_format_(std::move(chat_format)),
      options_(options),
      t0_(std::chrono::steady_clock::now()) {
  if (options_.user_rows < 1 || options_.user_rows > 4096)
    throw Error(Cat("--user-rows must be in [1, 4096], got ", options_.user_rows));
  if (options_.max_batch_tokens < 1)
    throw Error(Cat("--max-batch-tokens must be >= 1, got ", options_.max_batch_tokens));
  if (options_.threads < 0)
    throw Error(Cat("--threads must be >= 0 (0 = all cores), got ", options_.threads));
  if (options_.ctx < 0) throw Error(Cat("--ctx must be >= 0, got ", options_.ctx));
  if (options_.ctx == 0) options_.ctx = model.config().max_position_embeddings;
  cache_ =
      std::make_unique<KVCache>(model.CacheShape(options_.user_rows, options_.ctx), options_.kv);
  if (options_.prefix_cache && cache_->paged())
    prefix_ = std::make_unique<PrefixCache>(cache_->block_size());
  if (!options_.prefix_cache_dir.empty()) {
    if (!options_.prefix_cache)
      throw Error("--prefix-cache-dir keeps the prefix cache's blocks; it needs --prefix-cache on");
    if (!cache_->paged())
      throw Error("--prefix-cache-dir needs the paged KV cache (--kv-block-size > 0)");
    if (options_.kv.journal)
      throw Error(
          "--prefix-cache-dir is not supported with --tensor-parallel (each rank holds only its "
          "KV heads of a block)");
    PrefixStoreOptions so;
    so.dir = options_.prefix_cache_dir;
    so.max_bytes = options_.prefix_cache_dir_max_bytes;
    so.block_size = cache_->block_size();
    so.block_bytes = cache_->block_bytes();
    so.warn = options_.prefix_cache_warn;
    // The KV layout, beside the caller's model identity: format, scales, block shape.
    const KVCacheShape& sh = cache_->shape();
    so.key = Cat(options_.prefix_cache_key, "\nkv ", KVDTypeName(cache_->dtype()), " scale ",
                 ScaleModeName(options_.kv.scale), " block ", cache_->block_size(), " layers ",
                 sh.n_layers, " kv_heads ", sh.n_kv_heads, " head_dim ", sh.head_dim);
    if (options_.kv.scale == ScaleMode::kTensor && HasScale(cache_->dtype())) {
      so.key += "\ntensor_scales";
      for (float f : options_.kv.tensor_scales) {
        char buf[12];
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        std::snprintf(buf, sizeof buf, " %08x", bits);
        so.key += buf;
      }
    }
    store_ = std::make_unique<PrefixStore>(std::move(so));
  }
  rows_.resize(options_.user_rows);
  status_.user_rows = options_.user_rows;
  status_.kv_blocks_total = cache_->n_blocks();
  thread_ = std::thread([this] { Run(); });
  loop_thread_id_ = thread_.get_id();
}

ServingLoop::~ServingLoop() {
  Shutdown(ShutdownMode::kCancel);
}

double ServingLoop::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

int ServingLoop::BlocksFor(int n_tokens) const {
  if (!cache_->paged()) return 0;
  return (n_tokens + cache_->block_size() - 1) / cache_->block_size();
}

int ServingLoop::BlocksNeeded(int prefix, int max_new, int beams) const {
  if (!cache_->paged()) return 0;
  const int gen = static_cast<int>(std::clamp<int64_t>(max_new, 0, options_.ctx - prefix));
  // The prefix's full blocks are shared; each beam owns the rest: a copy of the prefix's partly
  // filled block (copy-on-write) and the blocks of its generated tokens.
  const int bs = cache_->block_size();
  return prefix / bs + beams * BlocksFor(prefix % bs + gen);
}

bool ServingLoop::RowFree(int row) const {
  const Row& r = rows_[row];
  return !r.run && r.session == 0 && r.leader < 0;
}

std::vector<int> ServingLoop::CheckRequest(const Request& r) const {
  const ModelConfig& c = model_.config();
  if (r.beams) {  // sampling parameters are ignored
    r.beams->Validate();
    if (r.beams->num_beams > options_.user_rows)
      throw Error(Cat("beam search with ", r.beams->num_beams,
                      " beams needs that many user rows; the loop has ", options_.user_rows,
                      " (raise --user-rows)"));
    if (r.beams->num_beams > options_.max_batch_tokens)
      throw Error(Cat("beam search with ", r.beams->num_beams, " beams",
                      " needs that many tokens per forward call; --max-batch-tokens is ",
                      options_.max_batch_tokens));
  } else {
    r.sampling.Validate();
  }
  if (r.max_new_tokens < 0) throw Error(Cat("max_new_tokens must be >= 0, got ", r.max_new_tokens));
  if (r.speculate_k != 0) {  // 0: off
    run_option::kSpeculateK.Check(r.speculate_k, "--speculate-k");
    run_option::kLookupNgram.Check(r.lookup_ngram, "--lookup-ngram");
  }
  for (const std::string& s : r.stop)
    if (s.empty()) throw Error("a stop string is empty");
  if (r.prompt_ids.empty() && tokenizer_ == nullptr)
    throw Error("a text prompt needs a tokenizer, and this model has none; send token ids");
  if (r.prompt_ids.empty() && r.prompt_text.empty()) throw Error("the prompt is empty");
  for (int id : r.prompt_ids)
    if (id < 0 || id >= c.vocab_size)
      throw Error(
          Cat("prompt token id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")"));
  std::vector<int> ids;
  if (r.session == 0) {
    ids = !r.prompt_ids.empty() ? r.prompt_ids
                                : EncodeTurn(*tokenizer_, chat_format_, r.prompt_text, r.chat,
                                             /*first_turn=*/true, c.bos_token_id, c.eos_token_id);
    if (ids.empty()) throw Error("the prompt is empty");
    if (static_cast<int>(ids.size()) >= options_.ctx)
      throw Error(Cat("the prompt is ", ids.size(), " tokens, too long for the context of ",
                      options_.ctx, " tokens (at least one must be left for the reply)"));
  }
  const int need = BlocksNeeded(static_cast<int>(ids.size()), r.max_new_tokens,
                                r.beams ? r.beams->num_beams : 1);
  if (cache_->paged() && need > cache_->n_blocks())
    throw Error(Cat("the prompt plus max_new_tokens", r.beams ? " for every beam" : "", " need ",
                    need, " KV blocks, more than the whole pool of ", cache_->n_blocks(),
                    "; lower max_new_tokens or raise --kv-blocks"));
  return ids;
}

RequestId ServingLoop::Submit(Request request) {
  WC_CHECK(request.observer != nullptr, "a request needs an observer");
  auto p = std::make_unique<Pending>();
  p->t_submit = Now();
  p->req = std::move(request);
  const Request& r = p->req;
  try {
    p->ids = CheckRequest(r);
  } catch (const Error& e) {
    p->error = e.what();
  }
  std::unique_lock<std::mutex> lock(mu_);
  p->id = next_id_++;
  const RequestId id = p->id;
  if (p->error.empty() && r.session != 0 && open_sessions_.count(r.session) == 0)
    p->error = Cat("session ", r.session, " is not open");
  if (stopping_) {
    lock.unlock();
    RequestResult result;
    result.id = id;
    result.reason = StopReason::kError;
    result.error = "the serving loop is shut down";
    result.t_submit = result.t_finish = p->t_submit;
    p->req.observer->OnFinish(result);
    return id;
  }
  live_.insert(id);
  queue_.push_back(std::move(p));
  lock.unlock();
  wake_.notify_one();
  return id;
}

bool ServingLoop::Cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (live_.count(id) == 0) return false;
  cancels_.insert(id);
  interrupt_ = true;
  wake_.notify_one();
  return true;
}

SessionId ServingLoop::OpenSession() {
  std::lock_guard<std::mutex> lock(mu_);
  const SessionId id = next_session_++;
  open_sessions_.insert(id);
  return id;
}

void ServingLoop::CloseSession(SessionId id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_sessions_.erase(id) == 0) return;
  closes_.insert(id);
  interrupt_ = true;
  wake_.notify_one();
}

ServingStatus ServingLoop::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  ServingStatus s = status_;
  s.queued += static_cast<int>(queue_.size());
  if (store_) {  // live: its writer thread counts files as they land
    const PrefixStoreStats d = store_->stats();
    s.prefix_disk_loaded = d.loaded;
    s.prefix_disk_saved = d.saved;
    s.prefix_disk_ignored = d.ignored;
    s.prefix_disk_evicted = d.evicted;
  }
  return s;
}

void ServingLoop::Shutdown(ShutdownMode mode) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      stopping_ = true;
      stop_mode_ = mode;
    } else if (mode == ShutdownMode::kCancel) {
      stop_mode_ = mode;  // a drain in progress may be turned into a cancel
    }
    if (mode == ShutdownMode::kCancel) interrupt_ = true;
  }
  wake_.notify_one();
  // From an observer's callback, on the loop's own thread: the loop stops after the callback.
  if (std::this_thread::get_id() == loop_thread_id_) return;
  // Several threads may shut down at once (a drain turned into a cancel): one joins.
  std::lock_guard<std::mutex> join_lock(join_mu_);
  if (thread_.joinable()) thread_.join();
  if (store_) store_->Flush();  // every block written, and counted in status()
}

void ServingLoop::Run() {
  if (options_.threads > 0) omp_set_num_threads(options_.threads);
  try {
    while (Step()) {
    }
  } catch (const std::exception& e) {
    // Not a request's fault (those end with kError inside Step): end everything and stop.
    const std::string what = Cat("the serving loop failed: ", e.what());
    std::fprintf(stderr, "wormchat: %s\n", what.c_str());
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      TakeQueue();
    }
    for (int row = 0; row < options_.user_rows; ++row)
      if (rows_[row].run) Finish(row, StopReason::kError, what);
    for (auto& p : waiting_) FinishPending(*p, StopReason::kError, what);
    waiting_.clear();
  }
}

bool ServingLoop::Step() {
  std::set<RequestId> cancels;
  std::set<SessionId> closes;
  bool stopping = false;
  ShutdownMode mode = ShutdownMode::kDrain;
  {
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait(lock, [&] {
      return stopping_ || !queue_.empty() || !cancels_.empty() || !closes_.empty() ||
             AnyRunning() || (room_freed_ && !waiting_.empty());
    });
    TakeQueue();
    cancels.swap(cancels_);
    closes.swap(closes_);
    interrupt_ = false;
    stopping = stopping_;
    mode = stop_mode_;
  }
  const double t_step = Now();

  if (stopping && mode == ShutdownMode::kCancel) {
    for (int row = 0; row < options_.user_rows; ++row)
      if (rows_[row].run) Finish(row, StopReason::kCancelled);
    for (auto& p : waiting_) FinishPending(*p, StopReason::kCancelled, {});
    waiting_.clear();
    UpdateStatus(0, 0, 0);
    return false;
  }

  // Closed sessions give their rows back; their running request is cancelled.
  for (SessionId s : closes) {
    auto it = sessions_.find(s);
    if (it == sessions_.end()) continue;
    const int row = it->second.row;
    if (row >= 0) {
      if (rows_[row].run) Finish(row, StopReason::kCancelled);
      ReleaseRow(row);
    }
    sessions_.erase(it);
  }
  // Cancellations, queued or running.
  for (RequestId id : cancels) {
    for (int row = 0; row < options_.user_rows; ++row)
      if (rows_[row].run && rows_[row].run->id == id) Finish(row, StopReason::kCancelled);
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
      if ((*it)->id == id) {
        FinishPending(**it, StopReason::kCancelled, {});
        waiting_.erase(it);
        break;
      }
  }
  PickPrompts();

  if (!AnyRunning()) {
    if (stopping) {  // draining, and what still waits can never get room (idle sessions hold it)
      for (auto& p : waiting_)
        FinishPending(*p, StopReason::kError,
                      "the serving loop shut down before there was room for this request");
      waiting_.clear();
    }
    UpdateStatus(0, 0, 0);
    return !stopping;
  }
  const int64_t sampled_before = tokens_sampled_;
  const double forward_s = Decode();
  UpdateStatus(Now() - t_step, forward_s, tokens_sampled_ - sampled_before);
  return true;
}

bool ServingLoop::ForwardInterrupted(const std::vector<PlannedChunk>& chunks) const {
  if (!interrupt_.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ && stop_mode_ == ShutdownMode::kCancel) return true;
  for (const PlannedChunk& ch : chunks) {
    const Row& row = rows_[ch.row];
    if (cancels_.count(row.run->id) != 0 || (row.session != 0 && closes_.count(row.session) != 0))
      return true;
  }
  return false;
}

bool ServingLoop::AnyRunning() const {
  for (const Row& r : rows_)
    if (r.run) return true;
  return false;
}

void ServingLoop::TakeQueue() {
  // Still queued, and counted so until the step's UpdateStatus: status() adds queue_'s size to
  // status_.queued, and a request moved from one to the other must not vanish from the count in
  // between (an HTTP front end admits against it: --max-queue).
  status_.queued += static_cast<int>(queue_.size());
  while (!queue_.empty()) {
    waiting_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

void ServingLoop::ReleaseRow(int row) {
  cache_->ResetUser(row);
  reserved_blocks_ -= rows_[row].reserved_blocks;
  if (rows_[row].leader >= 0) overlap_version_ = -1;
  rows_[row] = Row{};
}

void ServingLoop::UpdateStatus(double step_s, double forward_s, int64_t sampled) {
  const double now = Now();
  if (step_s > 0) {
    rate_window_.emplace_back(now - step_s, sampled);
    while (rate_window_.size() > 1 && rate_window_.front().first < now - 2.0)
      rate_window_.pop_front();
  }
  int64_t window_tokens = 0;
  for (const auto& w : rate_window_) window_tokens += w.second;
  const double span = rate_window_.empty() ? 0 : now - rate_window_.front().first;
  if (options_.check_block_counts) CheckBlockCounts();
  const int used = BlocksInUse();
  const int committed = CommittedBlocks();
  std::lock_guard<std::mutex> lock(mu_);
  ServingStatus& s = status_;
  s.queued = static_cast<int>(waiting_.size());
  s.active_rows = s.prefilling_rows = s.session_rows = 0;
  for (const Row& r : rows_) {
    if (r.run) {
      ++s.active_rows;
      if (!r.run->decoding) ++s.prefilling_rows;
    } else if (r.leader >= 0) {
      ++s.active_rows;  // a beam of a beam request
    } else if (r.session != 0) {
      ++s.session_rows;
    }
  }
  s.kv_blocks_used = used;
  s.kv_blocks_reserved = committed;
  s.kv_blocks_peak = peak_blocks_;
  s.tokens_per_s = span > 0 ? window_tokens / span : 0;
  if (step_s > 0) ++s.steps;
  s.tokens_sampled = tokens_sampled_;
  s.tokens_prefilled = tokens_prefilled_;
  if (prefix_) {
    const PrefixCacheStats& p = prefix_->stats();
    s.prefix_hits = p.hits;
    s.prefix_cached_tokens = p.cached_tokens;
    s.prefix_evictions = p.evictions;
    s.prefix_blocks = p.blocks;
  }

  s.forward_s += forward_s;
  s.step_s += step_s;
}

}  // namespace wc
