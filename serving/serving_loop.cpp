#include "serving/serving_loop.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>

#include "serving/step_planner.h"
#include "serving/text_stream.h"
#include "util/error.h"

namespace wc {

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kEos:
      return "eos";
    case StopReason::kStopString:
      return "stop";
    case StopReason::kMaxTokens:
      return "length";
    case StopReason::kContextFull:
      return "context";
    case StopReason::kCancelled:
      return "cancelled";
    case StopReason::kError:
      return "error";
  }
  return "?";
}

namespace {

// Streams a request's final text to its observer.
class ObserverSink : public TextSink {
 public:
  explicit ObserverSink(RequestObserver& observer) : observer_(observer) {}
  void Write(std::string_view text) override {
    if (!text.empty()) observer_.OnText(text);
  }

 private:
  RequestObserver& observer_;
};

}  // namespace

struct ServingLoop::Pending {
  RequestId id = 0;
  Request req;
  std::vector<int> ids;  // one-shot: the framed prompt; sessions: framed at admission
  std::string error;     // non-empty: the request is bad and ends at the next step
  double t_submit = 0;
};

struct ServingLoop::Running {
  RequestId id = 0;
  Request req;
  std::unique_ptr<Sampler> own_sampler;  // one-shot requests
  Sampler* sampler = nullptr;            // own_sampler or the session's
  std::unique_ptr<ObserverSink> sink;
  std::unique_ptr<TextStream> stream;
  std::vector<int> to_feed;  // tokens not yet in the KV: the prompt, then each sampled token
  size_t fed = 0;            // of to_feed
  bool decoding = false;     // to_feed holds a sampled token (not the prompt)
  int64_t admit_seq = 0;
  RequestResult result;
};

struct ServingLoop::Session {
  int row = -1;                      // the user row it holds, once admitted
  std::unique_ptr<Sampler> sampler;  // its RNG stream, from the first turn's seed
  std::vector<int> pending;          // tokens of the conversation not fed yet
  bool had_turn = false;
  bool busy = false;  // a request of this session is running
};

struct ServingLoop::Row {
  std::unique_ptr<Running> run;
  SessionId session = 0;    // held by this session (also between its requests)
  int cur_pos = 0;          // tokens in the row's KV
  int reserved_blocks = 0;  // paged: blocks admission promised this row
};

ServingLoop::ServingLoop(const FalconModel& model, const Tokenizer* tokenizer,
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

RequestId ServingLoop::Submit(Request request) {
  WC_CHECK(request.observer != nullptr, "a request needs an observer");
  auto p = std::make_unique<Pending>();
  p->t_submit = Now();
  p->req = std::move(request);
  const Request& r = p->req;
  const FalconConfig& c = model_.config();
  try {
    r.sampling.Validate();
    if (r.max_new_tokens < 0)
      throw Error(Cat("max_new_tokens must be >= 0, got ", r.max_new_tokens));
    for (const std::string& s : r.stop)
      if (s.empty()) throw Error("a stop string is empty");
    if (r.prompt_ids.empty() && tokenizer_ == nullptr)
      throw Error("a text prompt needs a tokenizer, and this model has none; send token ids");
    if (r.prompt_ids.empty() && r.prompt_text.empty()) throw Error("the prompt is empty");
    for (int id : r.prompt_ids)
      if (id < 0 || id >= c.vocab_size)
        throw Error(
            Cat("prompt token id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")"));
    if (r.session == 0) {
      p->ids = !r.prompt_ids.empty()
                   ? r.prompt_ids
                   : EncodeTurn(*tokenizer_, chat_format_, r.prompt_text, r.chat,
                                /*first_turn=*/true, c.bos_token_id, c.eos_token_id);
      if (p->ids.empty()) throw Error("the prompt is empty");
      if (static_cast<int>(p->ids.size()) >= options_.ctx)
        throw Error(Cat("the prompt is ", p->ids.size(), " tokens, too long for the context of ",
                        options_.ctx, " tokens (at least one must be left for the reply)"));
    }
    const int64_t most =
        std::min<int64_t>(static_cast<int64_t>(p->ids.size()) + r.max_new_tokens, options_.ctx);
    if (cache_->paged() && BlocksFor(static_cast<int>(most)) > cache_->n_blocks())
      throw Error(Cat("the prompt plus max_new_tokens need ", BlocksFor(static_cast<int>(most)),
                      " KV blocks, more than the whole pool of ", cache_->n_blocks(),
                      "; lower max_new_tokens or raise --kv-blocks"));
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
  wake_.notify_one();
}

ServingStatus ServingLoop::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  ServingStatus s = status_;
  s.queued += static_cast<int>(queue_.size());
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
  }
  wake_.notify_one();
  // From an observer's callback, on the loop's own thread: the loop stops after the callback.
  if (std::this_thread::get_id() == loop_thread_id_) return;
  // Several threads may shut down at once (a drain turned into a cancel): one joins.
  std::lock_guard<std::mutex> join_lock(join_mu_);
  if (thread_.joinable()) thread_.join();
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
      while (!queue_.empty()) {
        waiting_.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
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
    auto busy = [this] {
      for (const Row& r : rows_)
        if (r.run) return true;
      return false;
    };
    wake_.wait(lock, [&] {
      return stopping_ || !queue_.empty() || !cancels_.empty() || !closes_.empty() || busy() ||
             (room_freed_ && !waiting_.empty());
    });
    while (!queue_.empty()) {
      waiting_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    cancels.swap(cancels_);
    closes.swap(closes_);
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
      cache_->ResetUser(row);
      reserved_blocks_ -= rows_[row].reserved_blocks;
      rows_[row] = Row{};
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

  bool any = false;
  for (const Row& r : rows_) any = any || r.run != nullptr;
  if (!any) {
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

void ServingLoop::PickPrompts() {
  room_freed_ = false;
  // Bad requests end now, wherever they are in the queue.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->error.empty()) {
      ++it;
      continue;
    }
    FinishPending(**it, StopReason::kError, (*it)->error, /*rejected=*/true);
    it = waiting_.erase(it);
  }
  // FIFO: the head waits for room, and everything behind it waits too (no starvation).
  while (!waiting_.empty() && Admit(waiting_.front())) waiting_.pop_front();
}

bool ServingLoop::Admit(std::unique_ptr<Pending>& p) {
  const FalconConfig& c = model_.config();
  Request& r = p->req;
  Session* session = nullptr;
  int row = -1;
  if (r.session != 0) {
    bool open;
    {
      std::lock_guard<std::mutex> lock(mu_);
      open = open_sessions_.count(r.session) != 0;
    }
    if (!open) {  // FinishPending takes the lock and calls the observer: not under mu_
      FinishPending(*p, StopReason::kError, Cat("session ", r.session, " was closed"),
                    /*rejected=*/true);
      return true;
    }
    session = &sessions_[r.session];
    if (session->busy) return false;  // its previous request is still running
    row = session->row;
  }
  if (row < 0) {
    for (int i = 0; i < options_.user_rows && row < 0; ++i)
      if (!rows_[i].run && rows_[i].session == 0) row = i;
    if (row < 0) return false;  // every row is busy
  }
  Row& slot = rows_[row];
  const bool reset = session != nullptr && r.reset_session;
  const int cur_pos = reset ? 0 : slot.cur_pos;
  std::vector<int> feed;
  if (session != nullptr) {
    std::vector<int> turn;
    try {
      turn = !r.prompt_ids.empty()
                 ? r.prompt_ids
                 : EncodeTurn(*tokenizer_, chat_format_, r.prompt_text, r.chat,
                              reset || !session->had_turn, c.bos_token_id, c.eos_token_id);
    } catch (const Error& e) {
      FinishPending(*p, StopReason::kError, e.what(), /*rejected=*/true);
      return true;
    }
    if (turn.empty()) {
      FinishPending(*p, StopReason::kError, "the prompt is empty", /*rejected=*/true);
      return true;
    }
    if (!reset) feed = session->pending;
    feed.insert(feed.end(), turn.begin(), turn.end());
    if (cur_pos + static_cast<int64_t>(feed.size()) >= options_.ctx) {
      FinishPending(
          *p, StopReason::kError,
          Cat("the conversation holds ", cur_pos, " tokens and this turn adds ", feed.size(),
              ": more than the context of ", options_.ctx, " tokens allows; reset the session"),
          /*rejected=*/true);
      return true;
    }
  } else {
    feed = p->ids;  // a copy: the request stays queued, prompt and all, if there is no room yet
  }
  const int most = static_cast<int>(std::min<int64_t>(
      cur_pos + static_cast<int64_t>(feed.size()) + r.max_new_tokens, options_.ctx));
  const int need = std::max(BlocksFor(most), reset ? 0 : slot.reserved_blocks);
  if (cache_->paged()) {
    if (need > cache_->n_blocks()) {
      FinishPending(*p, StopReason::kError,
                    Cat("the conversation plus max_new_tokens need ", need,
                        " KV blocks, more than the whole pool of ", cache_->n_blocks()),
                    /*rejected=*/true);
      return true;
    }
    if (reserved_blocks_ - slot.reserved_blocks + need > cache_->n_blocks()) return false;
  }

  // Admitted.
  if (reset) {
    cache_->ResetUser(row);
    slot.cur_pos = 0;
    session->pending.clear();
    session->had_turn = false;
  }
  reserved_blocks_ += need - slot.reserved_blocks;
  slot.reserved_blocks = need;
  auto run = std::make_unique<Running>();
  run->id = p->id;
  run->req = std::move(p->req);
  run->admit_seq = admit_seq_++;
  if (session != nullptr) {
    if (session->sampler == nullptr)
      session->sampler = std::make_unique<Sampler>(run->req.sampling, run->req.seed);
    else
      session->sampler->set_params(run->req.sampling);
    run->sampler = session->sampler.get();
    session->pending.clear();
    session->busy = true;
    session->row = row;
    slot.session = run->req.session;
  } else {
    run->own_sampler = std::make_unique<Sampler>(run->req.sampling, run->req.seed);
    run->sampler = run->own_sampler.get();
  }
  const bool framed = chat_format_.has_value() && run->req.chat;
  std::vector<std::string> stop = run->req.stop;
  if (framed) stop.insert(stop.end(), chat_format_->stop.begin(), chat_format_->stop.end());
  run->sink = std::make_unique<ObserverSink>(*run->req.observer);
  run->stream = std::make_unique<TextStream>(stop, *run->sink, /*trim_leading_space=*/framed);
  run->to_feed = std::move(feed);
  run->result.id = run->id;
  run->result.prompt_tokens = static_cast<int>(run->to_feed.size());
  run->result.user_row = row;
  run->result.t_submit = p->t_submit;
  run->result.t_admit = Now();
  slot.run = std::move(run);
  return true;
}

double ServingLoop::Decode() {
  // prepare_inputs
  std::vector<RowDemand> demands;
  for (int row = 0; row < options_.user_rows; ++row) {
    const Running* run = rows_[row].run.get();
    if (run == nullptr) continue;
    demands.push_back(
        {row, static_cast<int>(run->to_feed.size() - run->fed), run->decoding, run->admit_seq});
  }
  const std::vector<PlannedChunk> plan =
      PlanStep(std::move(demands), options_.max_batch_tokens, rotate_);
  rotate_ = (rotate_ + 1) % options_.user_rows;

  // decode, then switch_tokens / push_outputs / update_users for the rows that got logits.
  double forward_s = 0;
  std::vector<float> logits;  // [rows with logits, vocab_size]
  auto run_chunks = [&](const std::vector<PlannedChunk>& chunks) {
    TokenBatch batch;
    std::vector<int> logit_owner;  // row of each logits row
    for (const PlannedChunk& ch : chunks) {
      const Running& run = *rows_[ch.row].run;
      for (int i = 0; i < ch.n_tokens; ++i) {
        const size_t k = run.fed + i;
        const bool last = k + 1 == run.to_feed.size();
        batch.Add(run.to_feed[k], ch.row, rows_[ch.row].cur_pos + i, last);
        if (last) logit_owner.push_back(ch.row);
      }
    }
    const double t = Now();
    model_.Forward(batch, *cache_, &logits);
    forward_s += Now() - t;
    // The most blocks in use is now, before rows that end in this step free theirs.
    peak_blocks_ = std::max(peak_blocks_, cache_->n_blocks() - cache_->free_blocks());
    for (const PlannedChunk& ch : chunks) {
      rows_[ch.row].cur_pos += ch.n_tokens;
      Running& run = *rows_[ch.row].run;
      run.fed += ch.n_tokens;
      if (!run.decoding) tokens_prefilled_ += ch.n_tokens;
    }
    const int vocab = model_.config().vocab_size;
    for (size_t j = 0; j < logit_owner.size(); ++j)
      SwitchTokens(logit_owner[j], &logits[j * static_cast<size_t>(vocab)]);
  };
  try {
    run_chunks(plan);
  } catch (const Error&) {
    // One request's input broke the forward pass (e.g. its activations overflowed). Rerun each row
    // alone - bit-identical, the kernels being batch-invariant - and end only the rows that fail.
    for (const PlannedChunk& ch : plan) {
      try {
        run_chunks({ch});
      } catch (const Error& e) {
        Finish(ch.row, StopReason::kError, e.what());
      }
    }
  }
  return forward_s;
}

void ServingLoop::SwitchTokens(int row, const float* logits) {
  Row& slot = rows_[row];
  Running& run = *slot.run;
  const FalconConfig& c = model_.config();
  if (static_cast<int>(run.result.tokens.size()) >= run.req.max_new_tokens) {
    Finish(row, StopReason::kMaxTokens);  // max_new_tokens 0: the prompt only
    return;
  }
  int token;
  try {
    token = run.sampler->Sample(logits, c.vocab_size);
  } catch (const Error& e) {
    Finish(row, StopReason::kError, e.what());
    return;
  }
  ++tokens_sampled_;
  if (run.result.tokens.empty()) run.result.t_first_token = Now();
  run.result.tokens.push_back(token);
  run.to_feed.assign(1, token);
  run.fed = 0;
  run.decoding = true;
  run.req.observer->OnToken(token, logits, c.vocab_size);
  if (run.req.stop_at_eos && token == c.eos_token_id) {
    run.to_feed.clear();  // EOS ends the reply; it is not fed
    Finish(row, StopReason::kEos);
    return;
  }
  const std::string_view bytes =
      tokenizer_ != nullptr ? std::string_view(tokenizer_->TokenBytes(token)) : std::string_view();
  if (run.stream->Add(bytes)) {
    run.to_feed.clear();
    Finish(row, StopReason::kStopString);
    return;
  }
  if (slot.cur_pos >= options_.ctx) {
    run.to_feed.clear();
    Finish(row, StopReason::kContextFull);
    return;
  }
  if (static_cast<int>(run.result.tokens.size()) == run.req.max_new_tokens)
    Finish(row, StopReason::kMaxTokens);  // a session feeds the last token with its next turn
}

void ServingLoop::Finish(int row, StopReason reason, std::string error) {
  Row& slot = rows_[row];
  std::unique_ptr<Running> run = std::move(slot.run);
  run->stream->Finish();
  room_freed_ = true;  // a row, KV blocks or a session's turn: what waits may fit now
  RequestResult result = std::move(run->result);
  result.reason = reason;
  result.error = std::move(error);
  result.text = run->stream->emitted();
  result.t_finish = Now();
  if (slot.session != 0) {
    Session& session = sessions_[slot.session];
    session.pending.assign(run->to_feed.begin() + static_cast<int64_t>(run->fed),
                           run->to_feed.end());
    session.had_turn = true;
    session.busy = false;
    const int keep = std::max(BlocksFor(slot.cur_pos), cache_->user_blocks(row));
    reserved_blocks_ += keep - slot.reserved_blocks;
    slot.reserved_blocks = keep;
    result.session_pos = slot.cur_pos + static_cast<int>(session.pending.size());
  } else {
    cache_->ResetUser(row);
    reserved_blocks_ -= slot.reserved_blocks;
    slot = Row{};
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(result.id);
    ++status_.requests_finished;
  }
  run->req.observer->OnFinish(result);
}

void ServingLoop::FinishPending(Pending& p, StopReason reason, std::string error, bool rejected) {
  RequestResult result;
  result.id = p.id;
  result.rejected = rejected;
  result.reason = reason;
  result.error = std::move(error);
  result.t_submit = p.t_submit;
  result.t_finish = Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(p.id);
    ++status_.requests_finished;
  }
  p.req.observer->OnFinish(result);
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
  const int used = cache_->n_blocks() - cache_->free_blocks();
  peak_blocks_ = std::max(peak_blocks_, used);
  std::lock_guard<std::mutex> lock(mu_);
  ServingStatus& s = status_;
  s.queued = static_cast<int>(waiting_.size());
  s.active_rows = s.prefilling_rows = s.session_rows = 0;
  for (const Row& r : rows_) {
    if (r.run) {
      ++s.active_rows;
      if (!r.run->decoding) ++s.prefilling_rows;
    } else if (r.session != 0) {
      ++s.session_rows;
    }
  }
  s.kv_blocks_used = used;
  s.kv_blocks_reserved = reserved_blocks_;
  s.kv_blocks_peak = peak_blocks_;
  s.tokens_per_s = span > 0 ? window_tokens / span : 0;
  if (step_s > 0) ++s.steps;
  s.tokens_sampled = tokens_sampled_;
  s.tokens_prefilled = tokens_prefilled_;
  s.forward_s += forward_s;
  s.step_s += step_s;
}

}  // namespace wc
