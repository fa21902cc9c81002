#include "serving/conversation.h"

#include <algorithm>

#include "util/error.h"

namespace wc {

// Records the turn, then hands everything on to the front end's observer.
class Conversation::TurnObserver : public RequestObserver {
 public:
  TurnObserver(Conversation& conversation, size_t turn, std::shared_ptr<RequestObserver> next)
      : conversation_(conversation), turn_(turn), next_(std::move(next)) {}
  void OnToken(int token, const float* logits, int vocab) override {
    next_->OnToken(token, logits, vocab);
  }
  void OnText(std::string_view delta) override { next_->OnText(delta); }
  void OnPrefill(int fed, int total, int context) override {
    next_->OnPrefill(fed, total, context);
  }
  void OnFinish(const RequestResult& result) override {
    conversation_.Record(turn_, result);
    next_->OnFinish(result);
  }

 private:
  Conversation& conversation_;
  size_t turn_;
  std::shared_ptr<RequestObserver> next_;
};

Conversation::Conversation(ServingLoop& loop, const DecoderModel& model, const Tokenizer& tokenizer,
                           ChatFormat format, const ConversationSettings& settings)
    : loop_(loop), model_(model), tokenizer_(tokenizer), format_(std::move(format)) {
  format_.CheckUsable();  // a checkpoint chat template wormchat does not know: one line
  state_.settings = settings;
  state_.settings.Validate();
  stream_seed_ = state_.settings.seed;
  session_ = loop_.OpenSession();
}

Conversation::~Conversation() {
  std::unique_lock<std::mutex> lock(mu_);
  if (busy_) {
    const RequestId id = running_;
    lock.unlock();
    loop_.Cancel(id);
    lock.lock();
    idle_.wait(lock, [this] { return !busy_; });
  }
  lock.unlock();
  loop_.CloseSession(session_);
}

std::vector<int> Conversation::SystemIds() const {
  if (state_.settings.system.empty()) return {};
  return format_.EncodeSystem(tokenizer_, state_.settings.system);
}

std::vector<int> Conversation::FrameFrom(size_t first, const std::string& next_user) const {
  const ModelConfig& c = model_.config();
  std::vector<int> ids;
  if (format_.add_bos) ids.push_back(c.bos_token_id);
  const std::vector<int> system = SystemIds();
  ids.insert(ids.end(), system.begin(), system.end());
  for (size_t i = first; i < state_.turns.size(); ++i) {
    const ConversationTurn& t = state_.turns[i];
    const std::vector<int> user = format_.EncodeUserTurn(tokenizer_, t.user, i > first);
    ids.insert(ids.end(), user.begin(), user.end());
    size_t kept = t.reply_ids.size();
    if (kept > 0 && (t.reason == StopReason::kEos || t.reason == StopReason::kStopString)) --kept;
    ids.insert(ids.end(), t.reply_ids.begin(), t.reply_ids.begin() + static_cast<int64_t>(kept));
    if (format_.eos_ends_turn) ids.push_back(c.eos_token_id);
  }
  const std::vector<int> user =
      format_.EncodeUserTurn(tokenizer_, next_user, first < state_.turns.size());
  ids.insert(ids.end(), user.begin(), user.end());
  return OpenWithModelBos(tokenizer_, std::move(ids));
}

RequestId Conversation::Send(const std::string& user, std::shared_ptr<RequestObserver> observer) {
  WC_CHECK(observer != nullptr, "Send needs an observer");
  if (user.find_first_not_of(" \t\r\n") == std::string::npos) throw Error("the message is empty");
  const ModelConfig& c = model_.config();
  const int ctx = loop_.ctx();
  std::unique_lock<std::mutex> lock(mu_);
  if (busy_) throw Error("a reply is still running");
  ConversationTurn turn;
  turn.user = user;
  turn.settings = state_.settings;
  turn.reset_before = state_.reset_next;
  turn.stream_seed_before = stream_seed_;
  turn.reseeded = state_.reseed_next;
  const bool turn_reseeded = state_.reseed_next;
  if (state_.reseed_next) {  // a new RNG stream: a fresh session holding the conversation so far
    lock.unlock();
    loop_.CloseSession(session_);
    lock.lock();
    session_ = loop_.OpenSession();
    session_pos_ = 0;
    stream_seed_ = state_.settings.seed;
  }
  // Continue the session (the last reply's unfed tokens go first, then [eos] + the turn), or
  // start it over with the kept turns framed afresh.
  const bool fresh =
      state_.reset_next || state_.reseed_next || state_.rebuild_next || session_pos_ == 0;
  std::vector<int> ids;
  if (fresh) {
    ids = FrameFrom(state_.first_kept, user);
  } else {
    if (format_.eos_ends_turn) ids.push_back(c.eos_token_id);
    const std::vector<int> t = format_.EncodeUserTurn(tokenizer_, user, /*after_reply=*/true);
    ids.insert(ids.end(), t.begin(), t.end());
  }
  bool restart = fresh && session_pos_ > 0;  // the session holds tokens to forget
  // Room for the reply: up to max_new_tokens, but at most a quarter of the context.
  const int64_t reserve = std::max(1, std::min(state_.settings.max_new_tokens, ctx / 4));
  int64_t total = (fresh ? 0 : session_pos_) + static_cast<int64_t>(ids.size());
  while (total + reserve > ctx && state_.first_kept < state_.turns.size()) {
    ++state_.first_kept;
    ++turn.dropped_before;
    ids = FrameFrom(state_.first_kept, user);
    total = static_cast<int64_t>(ids.size());
    restart = true;
  }
  if (total >= ctx)
    throw Error(Cat("the message is ", total,
                    " tokens with the chat framing, too long for the "
                    "context of ",
                    ctx, " tokens; shorten it"));
  Request r;
  r.prompt_ids = std::move(ids);
  r.chat = true;
  r.sampling = state_.settings.sampling;
  r.seed = state_.settings.seed;
  r.max_new_tokens = state_.settings.max_new_tokens;
  r.beams = state_.settings.beams;
  if (request_options_) request_options_(&r);
  r.session = session_;
  r.reset_session = restart;
  if (!turn_reseeded) r.session_rng = state_.rng_next;
  const size_t index = state_.turns.size();
  r.observer = std::make_shared<TurnObserver>(*this, index, std::move(observer));
  state_.turns.push_back(std::move(turn));
  busy_ = true;
  state_.reset_next = state_.reseed_next = state_.rebuild_next = false;
  state_.rng_next.reset();
  lock.unlock();
  const RequestId id = loop_.Submit(std::move(r));
  lock.lock();
  if (busy_) running_ = id;
  return id;
}

void Conversation::Record(size_t turn, const RequestResult& result) {
  std::lock_guard<std::mutex> lock(mu_);
  if (result.reason == StopReason::kError) {
    // Nothing of it stays: the next turn starts over from the turns before it.
    state_.turns.erase(state_.turns.begin() + static_cast<int64_t>(turn));
    state_.first_kept = std::min(state_.first_kept, state_.turns.size());
    state_.rebuild_next = true;
  } else {
    ConversationTurn& t = state_.turns[turn];
    t.reply_ids = result.tokens;
    t.reply_text = result.text;
    t.reason = result.reason;
    t.finished = true;
    t.rng_before = result.rng_before;
    t.rng_after = result.rng_after;
    session_pos_ = result.session_pos;
  }
  busy_ = false;
  idle_.notify_all();
}

bool Conversation::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

void Conversation::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  WC_CHECK(!busy_, "Reset while a reply runs");
  state_.first_kept =
      state_.turns.size();  // kept in turns() (a transcript records the whole session)
  state_.reset_next = true;
}

void Conversation::set_settings(const ConversationSettings& settings) {
  settings.Validate();
  std::lock_guard<std::mutex> lock(mu_);
  // A new stream only if the seed differs from the running stream's (setting it back and forth
  // between two replies changes nothing, as a transcript's net `set:` lines say).
  state_.reseed_next = settings.seed != stream_seed_;
  if (settings.system != state_.settings.system) state_.rebuild_next = true;  // the framing changed
  state_.settings = settings;
}

void Conversation::set_request_options(std::function<void(Request*)> apply) {
  std::lock_guard<std::mutex> lock(mu_);
  request_options_ = std::move(apply);
}

std::vector<ConversationTurn> Conversation::turns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_.turns;
}

int Conversation::session_pos() const {
  std::lock_guard<std::mutex> lock(mu_);
  return session_pos_;
}

ConversationTurn Conversation::UndoLocked() {
  if (busy_) throw Error("a reply is running: wait for it or cancel it first");
  if (state_.turns.empty() || state_.first_kept >= state_.turns.size() || state_.reset_next)
    throw Error("nothing to undo in this conversation");
  ConversationTurn t = std::move(state_.turns.back());
  state_.turns.pop_back();
  // The context as it was before the turn was sent: the turns it dropped to make room come back,
  // a /reset before it is pending again.
  state_.first_kept -= std::min<size_t>(state_.first_kept, static_cast<size_t>(t.dropped_before));
  if (t.reset_before) {
    state_.first_kept = state_.turns.size();
    state_.reset_next = true;
  }
  state_.rebuild_next = true;
  // The stream goes back to where it stood before the turn: the turn's own start, or - when the
  // turn began a new stream - the old stream after the turn before (fresh if there was none).
  stream_seed_ = t.stream_seed_before;
  if (!t.reseeded) {
    state_.rng_next = t.rng_before;
  } else if (!state_.turns.empty()) {
    state_.rng_next = state_.turns.back().rng_after;
  } else {
    state_.rng_next = Rng(stream_seed_).state();
  }
  state_.reseed_next = state_.settings.seed != stream_seed_;
  return t;
}

ConversationTurn Conversation::Undo() {
  std::lock_guard<std::mutex> lock(mu_);
  return UndoLocked();
}

RequestId Conversation::Retry(bool same_seed, std::shared_ptr<RequestObserver> observer) {
  std::unique_lock<std::mutex> lock(mu_);
  const State saved = state_;
  const ConversationTurn t = UndoLocked();
  if (!same_seed) {
    // The next seed of the stream: its first draw after the old reply.
    Rng next(0);
    next.set_state(t.rng_after);
    state_.settings.seed = next.Next();
    state_.reseed_next = true;
    state_.rng_next.reset();
  }
  lock.unlock();
  try {
    return Send(t.user, std::move(observer));
  } catch (...) {
    lock.lock();  // Send changed nothing: put the turn back
    state_ = saved;
    throw;
  }
}

RequestId Conversation::Restore(const std::vector<ConversationTurn>& turns,
                                std::shared_ptr<RequestObserver> observer) {
  WC_CHECK(observer != nullptr, "Restore needs an observer");
  std::unique_lock<std::mutex> lock(mu_);
  if (busy_ || !state_.turns.empty())
    throw Error("only a conversation with no turns can be resumed");
  if (turns.empty()) return 0;
  // The stream: from the initial seed, a new one at each turn whose seed differs, one draw per
  // token sampled at a temperature above 0 (beam turns draw none).
  uint64_t seed = stream_seed_;
  uint64_t draws = 0;
  size_t first_kept = 0;
  for (size_t i = 0; i < turns.size(); ++i) {
    const ConversationTurn& t = turns[i];
    if (!t.finished) throw Error(Cat("turn ", i + 1, " has no reply"));
    t.settings.Validate();
    if (t.settings.seed != seed) {
      seed = t.settings.seed;
      draws = 0;
    }
    if (!t.settings.beams && t.settings.sampling.temperature > 0) draws += t.reply_ids.size();
    if (t.reset_before) first_kept = i;
    first_kept += static_cast<size_t>(t.dropped_before);
  }
  Rng rng(seed);
  for (uint64_t d = 0; d < draws; ++d) rng.Next();
  state_.turns = turns;
  state_.first_kept = std::min(first_kept, state_.turns.size());
  state_.settings = state_.turns.back().settings;
  stream_seed_ = seed;
  state_.reset_next = state_.reseed_next = state_.rebuild_next = false;
  state_.rng_next.reset();
  // What a session holds after the last turn: the kept turns framed, each reply in full (its last
  // token too, which the live session would feed with the next turn - the same K/V either way).
  std::vector<int> ids = FrameFrom(state_.first_kept, "");
  const std::vector<int> empty_turn =
      format_.EncodeUserTurn(tokenizer_, "", state_.first_kept < state_.turns.size());
  ids.resize(ids.size() - empty_turn.size());
  if (format_.eos_ends_turn && state_.first_kept < state_.turns.size())
    ids.pop_back();  // the next Send's
  if (state_.first_kept >= state_.turns.size() || ids.empty()) {
    // Nothing in context (a reset after the last turn is not recorded; the turns after a reset
    // are): the next Send starts the stream's session afresh.
    session_pos_ = 0;
    state_.rng_next = rng.state();
    return 0;
  }
  Request r;
  r.prompt_ids = std::move(ids);
  r.chat = true;
  r.sampling = state_.settings.sampling;
  r.seed = seed;
  r.max_new_tokens = 0;  // the prompt only
  r.beams.reset();
  r.session = session_;
  r.reset_session = true;
  r.session_rng = rng.state();
  // Recorded like a turn's end: the session's length, nothing else.
  class Prefilled : public RequestObserver {
   public:
    Prefilled(Conversation& c, std::shared_ptr<RequestObserver> next)
        : c_(c), next_(std::move(next)) {}
    void OnPrefill(int fed, int total, int context) override {
      next_->OnPrefill(fed, total, context);
    }
    void OnFinish(const RequestResult& result) override {
      {
        std::lock_guard<std::mutex> lock(c_.mu_);
        if (result.reason == StopReason::kError || result.reason == StopReason::kCancelled) {
          c_.state_.rebuild_next = true;  // the next Send re-prefills
          c_.state_.rng_next = result.rng_before;
        } else {
          c_.session_pos_ = result.session_pos;
        }
        c_.busy_ = false;
        c_.idle_.notify_all();
      }
      next_->OnFinish(result);
    }

   private:
    Conversation& c_;
    std::shared_ptr<RequestObserver> next_;
  };
  r.observer = std::make_shared<Prefilled>(*this, std::move(observer));
  busy_ = true;
  lock.unlock();
  const RequestId id = loop_.Submit(std::move(r));
  lock.lock();
  if (busy_) running_ = id;
  return id;
}

}  // namespace wc
