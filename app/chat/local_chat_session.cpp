#include "app/chat/local_chat_session.h"

#include "meshmodel/model_estimate.h"

#include <chrono>
#include <cstdio>
#include <cstring>

#include "app/chat/chat_store.h"
#include "app/chat/clipboard.h"
#include "app/speculation.h"
#include "app/transcript/run_header.h"
#include "app/tui/markdown.h"
#include "serving/transcript.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

// "1 hit", "2 hits".
std::string Count(int64_t n, const char* noun) {
  return Cat(n, " ", noun, n == 1 ? "" : "s");
}

}  // namespace

double LocalChatSession::NowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Streams the reply to the front end and keeps the figures.
class LocalChatSession::ReplyObserver : public RequestObserver {
 public:
  ReplyObserver(LocalChatSession& s, std::function<void(std::string_view)> on_text,
                std::function<void(const RequestResult&)> on_done)
      : s_(s), on_text_(std::move(on_text)), on_done_(std::move(on_done)) {}
  void OnPrefill(int fed, int total, int context) override {
    std::lock_guard<std::mutex> lock(s_.mu_);
    s_.figures_.state = ChatFigures::State::kPrefill;
    s_.figures_.prefill_percent = total > 0 ? static_cast<int>(100LL * fed / total) : 100;
    s_.figures_.ctx_tokens = context;
    prompt_end_ = context;
  }
  void OnToken(int, const float*, int) override {
    const double now = NowS();
    // The loop's counts as its last step left them (status() is allowed in a callback).
    const ServingStatus st = s_.loop_->status();
    std::lock_guard<std::mutex> lock(s_.mu_);
    ChatFigures& f = s_.figures_;
    if (f.state != ChatFigures::State::kGenerating) {
      f.state = ChatFigures::State::kGenerating;
      s_.steps_at_first_ = st.steps;
      s_.sampled_at_first_ = st.tokens_sampled;
      s_.first_token_at_ = now;
      f.ttft_s = now - s_.reply_start_;
    }
    ++f.reply_tokens;
    f.ctx_tokens = prompt_end_ + f.reply_tokens - 1;  // the newest token is fed with the next step
    const double span = now - s_.first_token_at_;
    if (f.reply_tokens > 1 && span > 0) f.tokens_per_s = (f.reply_tokens - 1) / span;
  }
  void OnText(std::string_view delta) override {
    if (on_text_) on_text_(delta);
  }
  void OnFinish(const RequestResult& r) override {
    const double model_us = WholeModelUsPerToken(*s_.m_.model, s_.m_.kv.dtype, s_.run_.mesh, 1,
                                                 std::max(1, r.session_pos));
    {
      std::lock_guard<std::mutex> lock(s_.mu_);
      ChatFigures& f = s_.figures_;
      f.state = ChatFigures::State::kIdle;
      f.model_us_estimated = WholeModelIsEstimate(s_.m_.model->config());
      f.reply_tokens = static_cast<int>(r.tokens.size());
      if (r.t_first_token > 0) {
        f.ttft_s = r.t_first_token - r.t_admit + (r.t_admit - r.t_submit);
        const double decode = r.t_finish - r.t_first_token;
        if (r.tokens.size() > 1 && decode > 0) f.tokens_per_s = (r.tokens.size() - 1) / decode;
      }
      const double us = s_.meter_.totals().emulated_us - s_.mesh_us_at_start_;
      const int fed = r.prompt_tokens + static_cast<int>(r.tokens.size());
      f.mesh_us_per_token = fed > 0 ? us / fed : 0;
      f.ctx_tokens = r.session_pos;
      f.model_us_per_token = model_us;
      f.prompt_tokens = r.prompt_tokens;
      f.cached_tokens = r.cached_tokens;
      f.spec_proposed = r.spec_proposed;
      f.spec_accepted = r.spec_accepted;
      // Each step that sampled gave one token plus the proposals it accepted.
      const int steps = static_cast<int>(r.tokens.size()) - r.spec_accepted;
      f.tokens_per_step =
          s_.speculating_ && steps > 0 ? static_cast<double>(r.tokens.size()) / steps : 0;
      s_.steps_at_first_ = -1;
    }
    if (on_done_) on_done_(r);
  }

 private:
  LocalChatSession& s_;
  std::function<void(std::string_view)> on_text_;
  std::function<void(const RequestResult&)> on_done_;
  int prompt_end_ = 0;  // tokens in the row's context once the prompt is in
};

LocalChatSession::LocalChatSession(const LoadedModel& m, const ModelRunOptions& run,
                                   const ConversationSettings& s, ChatKeep keep)
    : ChatSession(std::move(keep)), m_(m), run_(run) {
  fingerprint_ = this->keep().fingerprint;
  if (this->keep().save && fingerprint_.empty()) fingerprint_ = RunFingerprint(run_, m_);
  const ChatFormat format = m.chat_format.value_or(ChatFormat{});
  // Rows for the widest beam search (a paged pool's pages are touched only when used).
  ServingOptions so = ServingOptionsFor(run, m, kMaxBeams);
  // A damaged --prefix-cache-dir file or a failed write: a notice under the reply, not a line
  // written over the screen (from the loop's or the store's writer thread).
  so.prefix_cache_warn = [this](const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    figures_.notice = figures_.notice.empty() ? message : Cat(figures_.notice, "; ", message);
  };
  loop_ = std::make_unique<ServingLoop>(*m.model, m.tokenizer.get(), format, so);
  conversation_ = std::make_unique<Conversation>(*loop_, *m.model, *m.tokenizer, format, s);
  ApplyRunSpeculation(*conversation_);
  figures_ = FreshFigures();
  m.model->set_flash_decode_observer(&meter_);  // before the first Forward (Send)
}

void LocalChatSession::ApplyRunSpeculation(Conversation& c) {
  // Send runs on the front end's thread, as /set does: run_ is read there only.
  c.set_request_options([this](Request* r) { ApplySpeculation(run_.speculation, r); });
}

ChatFigures LocalChatSession::FreshFigures() const {
  ChatFigures f;
  f.ctx_size = loop_->ctx();
  f.kv_format = Cat(KVDTypeName(m_.kv.dtype),
                    m_.kv.block_size > 0 ? Cat(" paged/", m_.kv.block_size) : " contiguous");
  f.kv_bytes_total = loop_->kv_bytes();
  f.prefix_cache = loop_->options().prefix_cache && loop_->options().kv.block_size > 0;
  return f;
}

ChatIdentity LocalChatSession::identity() const {
  ChatIdentity id;
  std::string dir = m_.dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  id.model = dir.substr(dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/') + 1);
  const ModelConfig& c = m_.model->config();
  id.detail = Cat(m_.dir, " (", c.n_layers, " layers, hidden ", c.hidden_size, ", ", c.n_head,
                  " heads / ", c.n_kv_heads, " KV heads)");
  id.n_params = c.n_params();
  id.dtype = DTypeName(m_.model->weights().embeddings.dtype);
  id.kv_format = figures().kv_format;
  id.mesh = run_.mesh;
  id.flash = run_.attention == "flash";
  id.ctx = m_.ctx;
  id.ids = run_.ids;
  return id;
}

LocalChatSession::~LocalChatSession() {
  conversation_.reset();  // cancels a running reply and waits for it
  loop_->Shutdown(ShutdownMode::kCancel);
  loop_.reset();  // its last writes may warn into figures_: while mu_ lives
  m_.model->set_flash_decode_observer(nullptr);
}

void LocalChatSession::Send(const std::string& message,
                            std::function<void(std::string_view)> on_text,
                            std::function<void(const RequestResult&)> on_done) {
  Start([&](std::shared_ptr<RequestObserver> o) { return conversation_->Send(message, o); },
        std::move(on_text), std::move(on_done));
}

void LocalChatSession::Retry(bool same_seed, std::function<void(std::string_view)> on_text,
                             std::function<void(const RequestResult&)> on_done) {
  Start([&](std::shared_ptr<RequestObserver> o) { return conversation_->Retry(same_seed, o); },
        std::move(on_text), std::move(on_done));
}

std::string LocalChatSession::Undo(std::string* message) {
  if (busy()) return "a reply is running: Ctrl-C cancels it first";
  try {
    const ConversationTurn t = conversation_->Undo();
    if (message != nullptr) *message = t.user;
    {
      std::lock_guard<std::mutex> lock(mu_);
      figures_.ctx_tokens = conversation_->session_pos();
    }
    Autosave();  // the file holds the conversation as shown
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

void LocalChatSession::Start(
    const std::function<RequestId(std::shared_ptr<RequestObserver>)>& submit,
    std::function<void(std::string_view)> on_text,
    std::function<void(const RequestResult&)> on_done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    figures_.state = ChatFigures::State::kPrefill;
    figures_.prefill_percent = 0;
    figures_.reply_tokens = 0;
    figures_.tokens_per_s = 0;
    figures_.tokens_per_step = 0;
    figures_.ttft_s = 0;
    figures_.prompt_tokens = 0;
    figures_.cached_tokens = 0;
    figures_.notice.clear();
    reply_start_ = NowS();
    mesh_us_at_start_ = meter_.totals().emulated_us;
    speculating_ = run_.speculation.RequestK() > 0 && !conversation_->settings().beams;
    steps_at_first_ = -1;
  }
  try {
    running_ =
        submit(std::make_shared<ReplyObserver>(*this, std::move(on_text), std::move(on_done)));
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    figures_.state = ChatFigures::State::kIdle;
    throw;
  }
  const std::vector<ConversationTurn> turns = conversation_->turns();
  if (!turns.empty() && turns.back().dropped_before > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    const int n = turns.back().dropped_before;
    figures_.notice = Cat("context full: dropped the ", n, " oldest turn", n == 1 ? "" : "s");
  }
}

void LocalChatSession::Cancel() {
  if (running_ != 0) loop_->Cancel(running_);
}

std::string LocalChatSession::Apply(const ChatCommand& c) {
  ConversationSettings s = conversation_->settings();
  switch (c.kind) {
    case ChatCommand::Kind::kReset: {
      if (busy()) return "a reply is running: Ctrl-C cancels it first";
      conversation_->Reset();
      std::lock_guard<std::mutex> lock(mu_);
      figures_.ctx_tokens = 0;
      return "(new conversation)";
    }
    case ChatCommand::Kind::kSet:
      if (c.name == "speculate" || c.name == "speculate-k" || c.name == "lookup-ngram") {
        // How the next replies decode (the run's option, saved in the chat's header), not which
        // tokens: the conversation's settings do not change.
        SpeculationOptions& spec = run_.speculation;
        if (c.name == "speculate" && c.path == "draft" && !spec.source)
          return "(no draft model: start the chat with --draft-model DIR to speculate with one)";
        if (c.name == "speculate") spec.mode = c.path;
        spec.given = true;  // asked for now: beam search notes that it does not speculate
        if (c.name == "speculate-k") spec.k = static_cast<int>(c.value);
        if (c.name == "lookup-ngram") spec.lookup_ngram = static_cast<int>(c.value);
        return Cat("(", c.name, " ", c.name == "speculate" ? c.path : Cat(c.value),
                   spec.RequestK() > 0 && s.beams ? "; beam search does not speculate" : "", ")");
      }
      {
        const std::string line = ApplySampling(c, &s);
        conversation_->set_settings(s);
        return line;
      }
    case ChatCommand::Kind::kBeams: {
      const int w = static_cast<int>(c.value);
      if (w == 0) {
        s.beams.reset();
      } else {
        BeamParams b;
        b.num_beams = w;
        s.beams = b;
      }
      conversation_->set_settings(s);
      return w == 0 ? "(sampling)"
                    : Cat("(beam search with ", w, " beam", w == 1 ? "" : "s",
                          ": replies show the best hypothesis",
                          run_.speculation.given && run_.speculation.RequestK() > 0
                              ? "; beam search does not speculate"
                              : "",
                          ")");
    }
    default:
      WC_CHECK(false, "not a conversation command");
  }
  return {};
}

ChatFigures LocalChatSession::figures() const {
  const ServingStatus st = loop_->status();
  const std::string warning = save_warning();
  std::lock_guard<std::mutex> lock(mu_);
  ChatFigures f = figures_;
  f.save_warning = warning;
  const ConversationSettings& s = conversation_->settings();
  f.seed = s.seed;
  f.beams = s.beams ? s.beams->num_beams : 0;
  f.kv_blocks_used = st.kv_blocks_used;
  f.kv_blocks_total = st.kv_blocks_total;
  f.prefix_hits = st.prefix_hits;
  f.prefix_cached_tokens = st.prefix_cached_tokens;
  f.prefix_evictions = st.prefix_evictions;
  f.prefix_blocks = st.prefix_blocks;
  f.prefix_disk_loaded = st.prefix_disk_loaded;
  f.prefix_disk_saved = st.prefix_disk_saved;
  // A speculating reply's steps so far (exact at the end: OnFinish's figure replaces it).
  if (speculating_ && steps_at_first_ >= 0 && st.steps > steps_at_first_)
    f.tokens_per_step = static_cast<double>(st.tokens_sampled - sampled_at_first_) /
                        static_cast<double>(st.steps - steps_at_first_);
  if (st.kv_blocks_total > 0) {  // paged: the blocks in use
    f.kv_bytes_used = f.kv_bytes_total / st.kv_blocks_total * st.kv_blocks_used;
  } else {  // contiguous: the conversation's positions of its row
    const int64_t slots = static_cast<int64_t>(loop_->user_rows()) * f.ctx_size;
    f.kv_bytes_used = slots > 0 ? f.kv_bytes_total / slots * f.ctx_tokens : 0;
  }
  return f;
}

std::string LocalChatSession::StatsText() const {
  const ChatFigures f = figures();
  const ConversationSettings& s = conversation_->settings();
  const std::string cache =
      !f.prefix_cache
          ? (run_.prefix_cache == "off" ? "off (--prefix-cache off)" : "off (contiguous KV)")
          : Cat(Count(f.prefix_hits, "hit"), ", ", Count(f.prefix_cached_tokens, "token"),
                " reused, ", Count(f.prefix_evictions, "eviction"), ", ",
                Count(f.prefix_blocks, "block"), " held",
                run_.prefix_cache_dir.empty()
                    ? std::string()
                    : Cat("; ", run_.prefix_cache_dir, ": ", Count(f.prefix_disk_loaded, "block"),
                          " mapped in, ", Count(f.prefix_disk_saved, "file"), " written"));
  return Cat(
      "last reply: ", f.reply_tokens, " tokens, ", static_cast<int>(f.tokens_per_s * 10) / 10.0,
      " tok/s, first token after ", static_cast<int>(f.ttft_s * 1000), " ms\n",
      "prompt: ", Count(f.prompt_tokens, "token"), ", ", f.cached_tokens,
      " reused from the prefix cache, ", f.prompt_tokens - f.cached_tokens, " prefilled\n",
      "prefix cache: ", cache, "\n", "context: ", f.ctx_tokens, " of ", f.ctx_size, " tokens\n",
      "KV cache: ", f.kv_format, ", ", f.kv_blocks_used, " of ", f.kv_blocks_total, " blocks (",
      f.kv_bytes_used >> 10, " of ", f.kv_bytes_total >> 10, " KiB)\n", "mesh: ", run_.mesh, ", ",
      static_cast<int>(f.mesh_us_per_token * 10) / 10.0,
      " us emulated attention per token; whole model ",
      static_cast<int>(f.model_us_per_token * 10) / 10.0, " us per token (",
      WholeModelGraph(m_.model->config()), ")\n", "sampling: temperature ", s.sampling.temperature,
      ", top-k ", s.sampling.top_k, ", top-p ", s.sampling.top_p, ", max-tokens ", s.max_new_tokens,
      ", seed ", s.seed, s.beams ? Cat(", beams ", s.beams->num_beams) : std::string(), "\n",
      "speculation: ", DescribeSpeculation(run_.speculation),
      run_.speculation.RequestK() > 0 && s.beams ? " (not with beam search)" : "",
      f.spec_proposed > 0 || f.tokens_per_step > 0
          ? Cat("; last reply: ", f.spec_accepted, "/", f.spec_proposed,
                " proposed tokens accepted, ", static_cast<int>(f.tokens_per_step * 100) / 100.0,
                " tokens per step")
          : std::string(),
      "\n");
}

std::string LocalChatSession::Open(int n, std::function<void(const RequestResult&)> on_done) {
  if (busy()) return "a reply is running: Ctrl-C cancels it first";
  OpenedFile file;
  if (std::string why = FindOpen(n, &file); !why.empty()) return why;
  const Transcript& t = file.transcript;
  const std::string& path = file.path;
  const std::string& name = file.name;
  const std::string& text = file.text;
  if (!t.server.empty())
    return Cat("/open: ", name, " was a chat with the server ", t.server,
               ": continue it with `wormchat chat --server ", t.server, " --resume ", name, "`");
  {
    std::lock_guard<std::mutex> lock(fingerprint_mu_);
    if (fingerprint_.empty()) fingerprint_ = RunFingerprint(run_, m_);
    if (t.fingerprint != fingerprint_)
      return Cat("/open: ", name,
                 " was saved with another model or weights: continue it with `wormchat chat "
                 "--resume ",
                 name, " --model DIR`");
  }
  Autosave();  // the chat left is on disk as shown (it normally is already)
  {
    std::lock_guard<std::mutex> lock(mu_);
    figures_ = FreshFigures();
    figures_.state = ChatFigures::State::kPrefill;
    reply_start_ = NowS();
    mesh_us_at_start_ = meter_.totals().emulated_us;
  }
  auto observer = std::make_shared<ReplyObserver>(*this, nullptr, on_done);
  RequestId id = 0;
  try {
    id = RestoreChat(path, Cat("opened ", name), text, t, observer);
  } catch (const Error& e) {
    std::lock_guard<std::mutex> lock(mu_);
    figures_.state = ChatFigures::State::kIdle;
    return Cat("/open: ", path, ": ", e.what());
  }
  if (id == 0) {  // nothing to re-prefill: no callback comes
    {
      std::lock_guard<std::mutex> lock(mu_);
      figures_.state = ChatFigures::State::kIdle;
    }
    if (on_done) on_done(RequestResult{});
  }
  return "";
}

}  // namespace wc
