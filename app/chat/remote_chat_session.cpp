#include "app/chat/remote_chat_session.h"

#include <chrono>
#include <cstdio>

#include "app/chat/chat_export.h"
#include "app/chat/chat_store.h"
#include "serving/run_options.h"
#include "serving/transcript.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

constexpr char kNotHere[] = "needs the model in this process: not available from a server";

// Whether a failed reply's error says the conversation is too long for the server's context:
// wormchat serve's and OpenAI's "context_length_exceeded", vLLM's "maximum context length",
// llama-server's "exceeds the available context size" - all 400s that name the context.
bool ContextTooSmall(const ChatReply& r) {
  if (r.error.rfind("HTTP 400", 0) != 0) return false;
  return r.error.find("context") != std::string::npos;
}

std::string OneDecimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

uint64_t RemoteChatSession::TurnSeed(uint64_t seed, int position) {
  if (position == 0) return seed;
  // SplitMix64 of the seed advanced `position` steps: independent streams per position.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(position);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (z ^ (z >> 31)) & 0xFFFFFFFFull;
}

RemoteChatSession::RemoteChatSession(std::unique_ptr<ChatClient> client, std::string model,
                                     const ConversationSettings& settings, ChatKeep keep)
    : ChatSession(std::move(keep)), client_(std::move(client)), model_(std::move(model)) {
  if (settings.beams) throw Error(Cat("--beams: beam search ", kNotHere));
  settings.Validate();
  settings_ = settings;
  figures_.kv_known = false;
  figures_.remote_note = "kv, mesh: not from this server";
  figures_.panel_text = Cat("Server ", client_->address().url, "\nmodel ", model_,
                            "\n\nThe mesh panel and KV figures need `wormchat serve`, which sends "
                            "them with each reply; none yet.");
}

RemoteChatSession::~RemoteChatSession() {
  Cancel();
  JoinWorker();
}

void RemoteChatSession::JoinWorker() {
  if (worker_.joinable()) worker_.join();
}

bool RemoteChatSession::busy() const {
  return busy_.load();
}

void RemoteChatSession::Cancel() {
  if (busy_.load()) client_->Cancel();
}

int RemoteChatSession::StreamPositionLocked(size_t i) const {
  int position = 0;
  for (size_t j = i; j > 0 && !turns_[j].reseeded; --j) ++position;
  return position;
}

std::vector<ChatMessage> RemoteChatSession::MessagesLocked() const {
  std::vector<ChatMessage> m;
  const ConversationTurn& now = turns_.back();
  if (!now.settings.system.empty()) m.push_back({ChatMessage::Role::kSystem, now.settings.system});
  for (size_t i = first_in_context_; i + 1 < turns_.size(); ++i) {
    m.push_back({ChatMessage::Role::kUser, turns_[i].user});
    m.push_back({ChatMessage::Role::kAssistant, turns_[i].reply_text});
  }
  m.push_back({ChatMessage::Role::kUser, now.user});
  return m;
}

void RemoteChatSession::Send(const std::string& message,
                             std::function<void(std::string_view)> on_text,
                             std::function<void(const RequestResult&)> on_done) {
  if (busy()) throw Error("a reply is running: Ctrl-C cancels it first");
  if (message.empty()) throw Error("an empty message");
  JoinWorker();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ConversationTurn t;
    t.user = message;
    t.settings = settings_;
    t.reset_before = reset_next_;
    t.reseeded = turns_.empty() || reseed_next_;
    if (reset_next_) first_in_context_ = turns_.size();
    reset_next_ = reseed_next_ = false;
    turns_.push_back(std::move(t));
  }
  Start(std::move(on_text), std::move(on_done));
}

void RemoteChatSession::Retry(bool same_seed, std::function<void(std::string_view)> on_text,
                              std::function<void(const RequestResult&)> on_done) {
  if (busy()) throw Error("a reply is running: Ctrl-C cancels it first");
  std::string message;
  ConversationTurn old;
  uint64_t sent_seed = 0;  // the seed the old reply was sampled with
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (turns_.empty() || turns_.size() - 1 < first_in_context_)
      throw Error("nothing to retry since the conversation began or was reset");
    old = turns_.back();
    sent_seed = TurnSeed(old.settings.seed, StreamPositionLocked(turns_.size() - 1));
  }
  const std::string why = Undo(&message);
  if (!why.empty()) throw Error(why);
  if (!same_seed) {
    // A new stream, seeded from the old reply's seed: recorded in the turn's settings.
    std::lock_guard<std::mutex> lock(mu_);
    settings_.seed = TurnSeed(sent_seed ^ 0x5EED5EED5EEDull, 1);
    reseed_next_ = true;
  }
  try {
    Send(message, std::move(on_text), std::move(on_done));
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    turns_.push_back(old);  // nothing changes when the retry cannot start
    throw;
  }
}

std::string RemoteChatSession::Undo(std::string* message) {
  if (busy()) return "a reply is running: Ctrl-C cancels it first";
  JoinWorker();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (turns_.empty() || turns_.size() - 1 < first_in_context_)
      return "nothing to undo since the conversation began or was reset";
    const ConversationTurn t = turns_.back();
    turns_.pop_back();
    if (message != nullptr) *message = t.user;
    first_in_context_ -= std::min<size_t>(first_in_context_, t.dropped_before);
    if (t.reset_before) {
      reset_next_ = true;
      // the turns before the reset stay out of the context
    }
    if (t.reseeded && !turns_.empty()) reseed_next_ = true;
    figures_.ctx_tokens = 0;
  }
  Autosave();  // the file holds the conversation as shown
  return "";
}

void RemoteChatSession::Start(std::function<void(std::string_view)> on_text,
                              std::function<void(const RequestResult&)> on_done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    figures_.state = ChatFigures::State::kPrefill;
    figures_.prefill_percent = -1;
    figures_.reply_tokens = 0;
    figures_.tokens_per_s = 0;
    figures_.ttft_s = 0;
    figures_.prompt_tokens = figures_.cached_tokens = 0;
    figures_.notice.clear();
  }
  busy_ = true;
  worker_ = std::thread([this, on_text = std::move(on_text), on_done = std::move(on_done)] {
    Run(on_text, on_done);
  });
}

void RemoteChatSession::Run(std::function<void(std::string_view)> on_text,
                            std::function<void(const RequestResult&)> on_done) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  std::vector<ChatMessage> messages;
  ChatRequestOptions options;
  int dropped = 0;
  ChatReply reply;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      messages = MessagesLocked();
      const ConversationTurn& t = turns_.back();
      options.model = model_;
      options.temperature = t.settings.sampling.temperature;
      options.top_p = t.settings.sampling.top_p;
      options.top_k = t.settings.sampling.top_k;
      options.seed = TurnSeed(t.settings.seed, StreamPositionLocked(turns_.size() - 1));
      options.max_tokens = t.settings.max_new_tokens;
    }
    Clock::time_point first{};
    int deltas = 0;
    auto text = [&](std::string_view delta) {
      const Clock::time_point now = Clock::now();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (deltas++ == 0) {
          first = now;
          figures_.state = ChatFigures::State::kGenerating;
          figures_.ttft_s = std::chrono::duration<double>(now - start).count();
        }
        figures_.reply_tokens = deltas;
        const double span = std::chrono::duration<double>(now - first).count();
        if (deltas > 1 && span > 0) figures_.tokens_per_s = (deltas - 1) / span;
      }
      if (on_text) on_text(delta);
    };
    auto server = [&](const ServerFigures& f) {
      std::lock_guard<std::mutex> lock(mu_);
      TakeServerFiguresLocked(f);
    };
    reply = client_->Stream(messages, options, text, server);
    if (!reply.cancelled && deltas == 0 && ContextTooSmall(reply)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (first_in_context_ + 1 < turns_.size()) {  // an older turn to drop
        ++first_in_context_;
        ++dropped;
        continue;
      }
    }
    break;
  }
  RequestResult r;
  r.reason = reply.cancelled                   ? StopReason::kCancelled
             : !reply.error.empty()            ? StopReason::kError
             : reply.finish_reason == "length" ? StopReason::kMaxTokens
                                               : StopReason::kEos;
  r.error = reply.error;
  r.prompt_tokens = static_cast<int>(std::max<int64_t>(0, reply.prompt_tokens));
  r.cached_tokens = static_cast<int>(std::max<int64_t>(0, reply.cached_tokens));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ConversationTurn& t = turns_.back();
    t.reply_text = reply.text;
    t.dropped_before = dropped;
    t.reason = r.reason;
    ChatFigures& f = figures_;
    f.state = ChatFigures::State::kIdle;
    if (reply.completion_tokens >= 0) f.reply_tokens = static_cast<int>(reply.completion_tokens);
    if (reply.t_first_text > 0) {
      f.ttft_s = reply.t_first_text;
      const double decode = reply.t_end - reply.t_first_text;
      if (f.reply_tokens > 1 && decode > 0) f.tokens_per_s = (f.reply_tokens - 1) / decode;
    }
    f.prompt_tokens = r.prompt_tokens;
    f.cached_tokens = r.cached_tokens;
    if (reply.prompt_tokens >= 0)
      f.ctx_tokens =
          static_cast<int>(reply.prompt_tokens + std::max<int64_t>(0, reply.completion_tokens));
    if (dropped > 0)
      f.notice =
          Cat("context full: dropped the ", dropped, " oldest turn", dropped == 1 ? "" : "s");
    if (r.reason == StopReason::kError) {
      // A reply that failed is not a turn: the message can be sent again, as if it never was.
      if (t.reset_before) reset_next_ = true;
      if (t.reseeded && turns_.size() > 1) reseed_next_ = true;
      turns_.pop_back();
      first_in_context_ -= std::min<size_t>(first_in_context_, dropped);
    } else {
      t.finished = true;
    }
  }
  busy_ = false;
  if (on_done) on_done(r);
}

std::string RemoteChatSession::Apply(const ChatCommand& c) {
  std::lock_guard<std::mutex> lock(mu_);
  switch (c.kind) {
    case ChatCommand::Kind::kReset:
      if (busy()) return "a reply is running: Ctrl-C cancels it first";
      reset_next_ = true;
      figures_.ctx_tokens = 0;
      return "(new conversation)";
    case ChatCommand::Kind::kSet: {
      if (c.name == "speculate" || c.name == "speculate-k" || c.name == "lookup-ngram")
        return Cat("/set ", c.name,
                   ": how replies decode is the server's to decide (`wormchat "
                   "serve --speculate`); not available from here");
      ConversationSettings s = settings_;
      const std::string line = ApplySampling(c, &s);
      if (c.name == "seed") reseed_next_ = true;
      s.Validate();
      settings_ = s;
      return line;
    }
    case ChatCommand::Kind::kBeams:
      return Cat("/beams: beam search ", kNotHere);
    default:
      WC_CHECK(false, "not a conversation command");
  }
  return {};
}

void RemoteChatSession::TakeServerFiguresLocked(const ServerFigures& s) {
  server_ = s;
  if (!s.present) return;
  ChatFigures& f = figures_;
  f.kv_known = true;
  f.kv_blocks_used = s.kv_blocks_used;
  f.kv_blocks_total = s.kv_blocks_total;
  f.kv_bytes_used = s.kv_bytes_used;
  f.kv_bytes_total = s.kv_bytes_total;
  f.kv_format = s.kv_format;
  f.ctx_size = s.ctx_size;
  f.mesh_us_per_token = s.mesh_us_per_token;
  f.model_us_per_token = s.model_us_per_token;
  f.model_us_estimated = s.model_us_estimated;
  f.remote_note.clear();
  f.panel_text = Cat(
      "Server ", client_->address().url, "\nmodel ", model_, "\nrows busy ", s.rows_busy, " of ",
      s.user_rows, ", queue ", s.queue_length, "\n\nKV cache (the server's pool): ", s.kv_format,
      ", ", s.kv_blocks_used, " of ", s.kv_blocks_total, " blocks\n", "mesh ", s.mesh,
      ": whole model ", OneDecimal(s.model_us_per_token), " us per token",
      s.model_us_estimated ? " (an estimate: no device figure checks this layout)" : "",
      "\n\nThe core-grid panel needs the model in this process.");
}

ChatFigures RemoteChatSession::figures() const {
  const std::string warning = save_warning();
  std::lock_guard<std::mutex> lock(mu_);
  ChatFigures f = figures_;
  f.save_warning = warning;
  f.seed = settings_.seed;
  return f;
}

std::vector<ConversationTurn> RemoteChatSession::turns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return turns_;
}

ConversationSettings RemoteChatSession::settings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return settings_;
}

ChatIdentity RemoteChatSession::identity() const {
  ChatIdentity id;
  id.model = model_;
  id.detail = Cat(model_, " at ", client_->address().url);
  id.server = client_->address().url;
  id.flash = false;
  std::lock_guard<std::mutex> lock(mu_);
  id.kv_format = server_.kv_format;
  id.mesh = server_.mesh;
  id.ctx = server_.ctx_size;
  return id;
}

std::string RemoteChatSession::StatsText() const {
  const ChatFigures f = figures();
  const ConversationSettings s = settings();
  return Cat(
      "server: ", client_->address().url, ", model ", model_, "\n", "last reply: ", f.reply_tokens,
      " tokens, ", OneDecimal(f.tokens_per_s), " tok/s, first token after ",
      static_cast<int>(f.ttft_s * 1000), " ms (as this client saw them)\n",
      "prompt: ", f.prompt_tokens, " tokens, ", f.cached_tokens,
      " reused from the server's prefix cache\n", "context: ", f.ctx_tokens,
      f.ctx_size > 0 ? Cat(" of ", f.ctx_size) : std::string(), " tokens\n",
      f.kv_known ? Cat("KV cache (the server's): ", f.kv_format, ", ", f.kv_blocks_used, " of ",
                       f.kv_blocks_total, " blocks (", f.kv_bytes_used >> 10, " of ",
                       f.kv_bytes_total >> 10, " KiB)\nmesh: whole model ",
                       OneDecimal(f.model_us_per_token), " us per token\n")
                 : std::string("KV cache, mesh: not available from this server (wormchat serve "
                               "sends them)\n"),
      "sampling: temperature ", s.sampling.temperature, ", top-k ", s.sampling.top_k, ", top-p ",
      s.sampling.top_p, ", max-tokens ", s.max_new_tokens, ", seed ", s.seed, "\n");
}

Transcript RemoteChatSession::KeptTranscript(const std::vector<ConversationTurn>& finished) const {
  Transcript t;
  t.version = WORMCHAT_VERSION;
  t.model = model_;
  t.server = client_->address().url;
  t.turns = finished;
  t.settings = finished.empty() ? settings() : finished.front().settings;
  return t;
}

std::string RemoteChatSession::Save(const std::string& path) const {
  std::vector<ConversationTurn> finished;
  for (ConversationTurn& t : turns())
    if (t.finished) finished.push_back(std::move(t));
  try {
    WriteTranscriptFile(path, KeptTranscript(finished));
  } catch (const Error& e) {
    return Cat("/save: ", e.what());
  }
  return Cat("(saved ", finished.size(), finished.size() == 1 ? " turn" : " turns", " to ", path,
             ": a chat with a server has no token ids, so it does not replay; /load ", path,
             " sends its messages again)");
}

std::string RemoteChatSession::Export(const std::string& path, bool force) const {
  ExportContent c;
  c.model = model_;
  for (ConversationTurn& t : turns())
    if (t.finished) c.turns.push_back(std::move(t));
  c.settings = c.turns.empty() ? settings() : c.turns.front().settings;
  c.title = title();
  if (c.title.empty() && !c.turns.empty()) c.title = ChatTitle(c.turns.front().user);
  return ExportChat(path, force, c);
}

void RemoteChatSession::Restore(const Transcript& t, const std::string& path) {
  if (t.server.empty())
    throw Error(Cat(path,
                    ": a chat run with the model in this process (its token ids are the "
                    "model's): continue it without --server"));
  std::lock_guard<std::mutex> lock(mu_);
  turns_ = t.turns;
  first_in_context_ = 0;
  for (size_t i = 0; i < turns_.size(); ++i) {
    ConversationTurn& turn = turns_[i];
    turn.finished = true;
    turn.reseeded = i == 0 || turn.settings.seed != turns_[i - 1].settings.seed;
    if (turn.reset_before) first_in_context_ = i;
    first_in_context_ += std::min<size_t>(turn.dropped_before, i - first_in_context_);
  }
  settings_ = turns_.empty() ? t.settings : turns_.back().settings;
  reset_next_ = reseed_next_ = false;
  figures_.ctx_tokens = 0;
  restored_turns_ = turns_.size();
}

std::string RemoteChatSession::Resume(const std::function<void(int, int)>&) {
  const std::string path = keep().file;
  const std::string text = ReadTextFile(path, int64_t{64} << 20);
  const Transcript t = ParseTranscript(text, path);
  try {
    Restore(t, path);
  } catch (const Error& e) {
    throw Error(Cat("--resume: ", e.what()));
  }
  ContinueIn(path, text);
  return Cat("(resumed ", path, ": ", restored_turns_, restored_turns_ == 1 ? " turn" : " turns",
             "; the server's prefix cache takes them on the next reply)");
}

std::string RemoteChatSession::Open(int n, std::function<void(const RequestResult&)> on_done) {
  if (busy()) return "a reply is running: Ctrl-C cancels it first";
  OpenedFile file;
  if (std::string why = FindOpen(n, &file); !why.empty()) return why;
  if (file.transcript.server.empty())
    return Cat("/open: ", file.name,
               " was a chat with the model in this process: continue it with `wormchat chat "
               "--resume ",
               file.name, "`");
  JoinWorker();
  Autosave();  // the chat left is on disk as shown
  try {
    Restore(file.transcript, file.path);
  } catch (const Error& e) {
    return Cat("/open: ", e.what());
  }
  ContinueIn(file.path, file.text);
  restored_label_ = Cat("opened ", file.name);
  if (on_done) on_done(RequestResult{});
  return "";
}

std::string RemoteChatSession::OpenedText(const RequestResult&) const {
  return Cat("(", restored_label_, ": ", restored_turns_, restored_turns_ == 1 ? " turn" : " turns",
             ")");
}

}  // namespace wc
