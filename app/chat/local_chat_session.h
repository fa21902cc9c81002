// What both chat front ends (full-screen and line mode) drive: the model's serving loop, one
// Conversation, the slash commands that change it, and the figures the status bar and /stats show
// (state, speed, time to first token, context and KV fill, the prompt tokens the prefix cache
// gave, emulated mesh time). Replies run on the serving loop's thread; the front end hears them
// through callbacks and stays responsive.
//
// Thread safety: call everything from the front end's thread; the callbacks passed to Send run on
// the loop's thread (keep them short; they may call figures()).
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "app/chat/chat_commands.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "mesh/attention_meter.h"
#include "serving/conversation.h"
#include "serving/transcript.h"

namespace wc {

struct ChatFigures {
  enum class State { kIdle, kPrefill, kGenerating };
  State state = State::kIdle;
  int prefill_percent = 0;  // kPrefill
  int reply_tokens = 0;     // of the current or last reply
  double tokens_per_s = 0;  // decode speed of the current or last reply
  // Speculative decoding (--speculate, /set speculate): tokens per decode step of the current or
  // last reply (1 + the proposals accepted per step; 0: that reply did not speculate, or no step
  // has ended yet), and the last finished reply's proposed and accepted tokens.
  double tokens_per_step = 0;
  int spec_proposed = 0, spec_accepted = 0;
  double ttft_s = 0;  // its time to first token (0 before the first)
  int ctx_tokens = 0, ctx_size = 0;
  // The last reply's prompt (tokens it fed before generating; a later turn's: only what it adds)
  // and, of those, the ones whose K/V came from the prefix cache (whole blocks; 0 during a reply,
  // with the cache off, and on a later turn of a conversation, whose row holds its earlier turns).
  int prompt_tokens = 0, cached_tokens = 0;
  // The loop's prefix cache: on (paged KV and --prefix-cache on), and its totals since the chat
  // started - admissions that took cached blocks, the tokens they took, blocks evicted, blocks it
  // holds now.
  bool prefix_cache = false;
  int64_t prefix_hits = 0, prefix_cached_tokens = 0, prefix_evictions = 0;
  int prefix_blocks = 0;
  // --prefix-cache-dir: blocks mapped in from its files, files written.
  int64_t prefix_disk_loaded = 0, prefix_disk_saved = 0;
  int kv_blocks_used = 0, kv_blocks_total = 0;  // paged (0 when contiguous)
  int64_t kv_bytes_used = 0, kv_bytes_total = 0;
  std::string kv_format;         // e.g. "bf16 paged/64"
  double mesh_us_per_token = 0;  // emulated attention time per token of the last reply
  double model_us_per_token =
      0;  // emulated whole-model decode step at its context (meshmodel/model_estimate.h)
  bool model_us_estimated = false;  // ... an estimate: tt-metal publishes no program of the model
  uint64_t seed = 0;                // the conversation's settings, as figures() reads them
  int beams = 0;                    // 0: sampling
  std::string notice;               // e.g. "dropped 2 oldest turns to fit the context"
  std::string save_warning;         // "" or "not saved: why" (the chat file could not be written)
};

// Where the chat is kept (app/chat/chat_store.h).
struct ChatKeep {
  bool save = true;  // false: --no-save (and after /forget)
  std::string dir;   // the chats directory ("" = DefaultChatsDir())
  std::string file;  // --resume: the saved chat this one continues (and saves on in)
  // RunFingerprint(run, m) when the caller has it already (--resume checks it); "": the session
  // computes it at start if it saves, never mid-chat on the front end's thread.
  std::string fingerprint;
};

class ChatSession {
 public:
  // Starts the serving loop (rows for the widest beam search). `m` must outlive the session.
  ChatSession(const LoadedModel& m, const ModelRunOptions& run, const ConversationSettings& s,
              ChatKeep keep = {});
  ~ChatSession();

  // Sends `message` (throws wc::Error for an empty or over-long message, or while a reply runs).
  // on_text gets the reply's text as it streams; on_done once at the end (cancelled included).
  void Send(const std::string& message, std::function<void(std::string_view)> on_text,
            std::function<void(const RequestResult&)> on_done);
  // /retry: a new reply to the last message in place of the last one (Conversation::Retry:
  // `same_seed` from the same stream position, else the stream's next seed). Throws as Send, and
  // wc::Error when there is nothing to retry.
  void Retry(bool same_seed, std::function<void(std::string_view)> on_text,
             std::function<void(const RequestResult&)> on_done);
  // /undo and /edit: takes the last exchange out of the conversation (Conversation::Undo) and
  // puts its message in `message` (if not null). Returns "" when done, else the line to show
  // (nothing to undo, a reply running).
  std::string Undo(std::string* message);
  bool busy() const { return conversation_->busy(); }
  // Cancels the running reply (it ends with StopReason::kCancelled).
  void Cancel();

  // Runs a command that changes the conversation (/reset, /set, /beams; /set speculate,
  // speculate-k and lookup-ngram change how the next replies decode); returns the line to show.
  // Front-end commands (/help, /quit, /mesh, /stats, /save, /load) are the front end's.
  std::string Apply(const ChatCommand& command);
  // Multi-line /stats text: the last reply, its prompt (reused from the prefix cache and
  // prefilled), the prefix cache's totals or that it is off, context, KV cache, mesh, sampling.
  std::string StatsText() const;
  // /save FILE: writes the conversation so far as a transcript (`wormchat transcript replay
  // FILE`). Returns the line to show: what was saved, or why it could not be.
  std::string Save(const std::string& path) const;
  // /load FILE: appends the user messages of a transcript's turns to `queue`, for the front end to
  // send one after another. Returns the line to show: how many, or why the file cannot be read.
  std::string Load(const std::string& path, std::vector<std::string>& queue) const;
  // /export FILE (force: /export! FILE): the chat as shown - its finished turns, /resets included
  // - with its title (the one it is saved under: /title's, else its first message's), model and
  // settings, in Markdown or JSON by FILE's extension (ExportChat, app/chat/chat_export.h).
  // Returns the line to show: what was exported, or why not.
  std::string Export(const std::string& path, bool force) const;
  ChatFigures figures() const;

  // --resume: restores keep.file's turns into the conversation and re-prefills them (blocking);
  // `progress(fed, total)` hears the prefill. Returns the line to show (how many turns, tokens
  // computed and taken from the prefix cache). Throws wc::Error for a file that cannot be read.
  std::string Resume(const std::function<void(int fed, int total)>& progress);
  // /open N: switches to the N-th chat /chats lists (1 = the newest), which continues in its own
  // file. Returns "" when the switch has started: the conversation is then the saved one (its
  // turns() for the front end to show; settings and RNG stream as saved), and its re-prefill
  // runs on the loop with the status bar's prefill figures; `on_done` hears its end on the loop's
  // thread, or has been called already when there is nothing to re-prefill (OpenedText says what
  // was done). Otherwise the line to show, and nothing changed: a reply running, N out of range,
  // this very chat, a file that cannot be read, or one saved with another model or weights (its
  // fingerprint; `wormchat chat --resume NAME --model DIR` continues it). The chat left stays as
  // it was last saved.
  std::string Open(int n, std::function<void(const RequestResult&)> on_done);
  // /copy and /copy code [N]: the last reply, or its N-th code block (ExtractCodeBlocks of
  // app/tui/markdown.h), to the terminal's clipboard by OSC 52 written to `fd`
  // (app/chat/clipboard.h). Returns the line to show: what was sent, or why nothing was.
  std::string Copy(const ChatCommand& command, int fd) const;
  // The line to show when an /open's re-prefill has ended (`r` as on_done heard it).
  std::string OpenedText(const RequestResult& r) const;
  // Writes the conversation as it stands to its chat file (the first save names it); a failure
  // sets the status bar's "not saved: why". The front end calls it when a reply has ended (on its
  // own thread: the serving loop never waits for the disk); /undo calls it itself.
  void Autosave();
  // /title TEXT: the chat's title (and file name, once saved). Returns the line to show.
  std::string SetTitle(const std::string& title);
  // /forget: deletes this chat's file and saves no more of it. Returns the line to show.
  std::string Forget();
  // The chat's file ("" before its first save or with saving off).
  std::string chat_file() const;
  // /chats: the saved chats, newest first, a line each (name, title, model, turns, date).
  std::string ChatsText() const;

  Conversation& conversation() { return *conversation_; }
  const LoadedModel& model() const { return m_; }
  const ModelRunOptions& run_options() const { return run_; }
  // The last attention op the emulated mesh ran (the core-grid panel); safe from any thread.
  LastAttention last_attention() const { return meter_.last(); }

 private:
  class ReplyObserver;
  // Send and Retry: resets the reply's figures, then `submit` starts it with the observer.
  void Start(const std::function<RequestId(std::shared_ptr<RequestObserver>)>& submit,
             std::function<void(std::string_view)> on_text,
             std::function<void(const RequestResult&)> on_done);

  // A fresh conversation with `t`'s turns restored (Conversation::Restore), observed by `o`;
  // returns its request (0: nothing to re-prefill). `label` ("resumed PATH", "opened NAME") names
  // the restore in RestoredText's line.
  RequestId RestoreChat(const std::string& path, const std::string& label, const std::string& text,
                        const Transcript& t, std::shared_ptr<RequestObserver> o);
  // The line a finished restore shows: its label, turns, and tokens re-prefilled (r: its result;
  // null when nothing was re-prefilled).
  std::string RestoredText(const RequestResult* r) const;
  // The figures of a chat with no reply yet: context, KV format and size, prefix cache.
  ChatFigures FreshFigures() const;
  // Has `c`'s replies decode with run_.speculation as it stands at each Send (ApplySpeculation).
  void ApplyRunSpeculation(Conversation& c);

  const LoadedModel& m_;
  ModelRunOptions run_;
  AttentionMeter meter_;  // installed on the model for the session's life; outlives loop_
  std::unique_ptr<ServingLoop> loop_;
  std::unique_ptr<Conversation> conversation_;
  RequestId running_ = 0;

  ChatKeep keep_;
  bool no_save_ = false;        // --no-save: nothing is kept, whatever /open does
  std::string restored_label_;  // the last Resume's or Open's label, and its turns
  size_t restored_turns_ = 0;
  mutable std::mutex save_mu_;  // save_path_, title_, fingerprint_ (Autosave runs on either thread)
  std::string save_path_, title_, fingerprint_;
  std::time_t started_ = 0;

  mutable std::mutex mu_;  // the figures the loop's thread updates
  ChatFigures figures_;    // all but seed and beams, which figures() takes from the settings
  double reply_start_ = 0, first_token_at_ = 0;  // NowS() seconds
  static double NowS();                          // the steady clock, in seconds
  double mesh_us_at_start_ = 0;
  // The running reply speculates; the loop's step and sampled-token counts (ServingStatus) just
  // before its first token: the live tokens per step (-1 before the first token).
  bool speculating_ = false;
  int64_t steps_at_first_ = -1, sampled_at_first_ = 0;
};

}  // namespace wc
