// What both chat front ends (full-screen and line mode) drive: one conversation, the slash commands
// that change it, its kept file, and the figures the status bar and /stats show. Two kinds run it:
//   - LocalChatSession (local_chat_session.h): the model's serving loop in this process;
//   - RemoteChatSession (remote_chat_session.h): `wormchat chat --server URL`, a client of
//     `wormchat serve` or any OpenAI-compatible server, keeping the conversation here.
// Replies run on another thread (the loop's, or the client's); the front end hears them through
// callbacks and stays responsive.
//
// Kept chats are this class's own (the same for both kinds): one file per chat under the chats
// directory (chat_store.h), written after every reply (Autosave), named by /title, deleted by
// /forget, listed by /chats. What goes in the file is the kind's (KeptTranscript).
//
// Thread safety: call everything from the front end's thread; the callbacks passed to Send run on
// the reply's thread (keep them short; they may call figures()). Autosave may run on either.
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "app/chat/chat_commands.h"
#include "mesh/attention_meter.h"
#include "serving/conversation.h"
#include "serving/transcript.h"

namespace wc {

struct ChatFigures {
  enum class State { kIdle, kPrefill, kGenerating };
  State state = State::kIdle;
  int prefill_percent = 0;  // kPrefill (-1: unknown - a server says nothing until the first token)
  int reply_tokens = 0;     // of the current or last reply
  double tokens_per_s = 0;  // decode speed of the current or last reply
  // Speculative decoding (--speculate, /set speculate): tokens per decode step of the current or
  // last reply (1 + the proposals accepted per step; 0: that reply did not speculate, or no step
  // has ended yet), and the last finished reply's proposed and accepted tokens.
  double tokens_per_step = 0;
  int spec_proposed = 0, spec_accepted = 0;
  double ttft_s = 0;                 // its time to first token (0 before the first)
  int ctx_tokens = 0, ctx_size = 0;  // ctx_size 0: unknown (a server that does not say)
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
  bool kv_known = true;  // false: a server that sends no KV figures (the fields below are 0)
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
  // A chat with a server: what it cannot show ("" in process, or when the server sends its
  // figures), e.g. "KV and mesh figures: not available from this server".
  std::string remote_note;
  // A chat with a server: the side panel's text in place of the mesh and KV cache (the server's
  // figures, or that it sends none); "" in process.
  std::string panel_text;
};

// What the title bar and line mode's banner say the chat runs on.
struct ChatIdentity {
  std::string model;      // the model's name: its directory's last component, or the server's id
  std::string detail;     // line mode's banner after the name: "(4 layers, hidden 256, ...)"
  int64_t n_params = -1;  // -1: unknown
  std::string dtype;      // weight dtype ("" unknown)
  std::string kv_format;  // "bf16 paged/64" ("" unknown)
  std::string mesh;       // the --mesh preset ("" unknown)
  bool flash = true;      // attention through the emulated mesh (else the reference: no panel)
  int ctx = 0;            // the context (0: unknown)
  bool ids = false;       // --ids: messages and replies are token ids
  std::string server;     // "" in process; else the server's URL
};

// Where the chat is kept (app/chat/chat_store.h).
struct ChatKeep {
  bool save = true;  // false: --no-save (and after /forget)
  std::string dir;   // the chats directory ("" = DefaultChatsDir())
  std::string file;  // --resume: the saved chat this one continues (and saves on in)
  // RunFingerprint(run, m) when the caller has it already (--resume checks it); "": the session
  // computes it at start if it saves, never mid-chat on the front end's thread. In process only.
  std::string fingerprint;
};

class ChatSession {
 public:
  virtual ~ChatSession() = default;
  ChatSession(const ChatSession&) = delete;
  ChatSession& operator=(const ChatSession&) = delete;

  // ---- replies

  // Sends `message` (throws wc::Error for an empty or over-long message, or while a reply runs).
  // on_text gets the reply's text as it streams; on_done once at the end (cancelled included;
  // kError with `error` for a failure).
  virtual void Send(const std::string& message, std::function<void(std::string_view)> on_text,
                    std::function<void(const RequestResult&)> on_done) = 0;
  // /retry: a new reply to the last message in place of the last one: `same_seed` from the same
  // random stream position, else a new stream. Throws as Send, and wc::Error when there is
  // nothing to retry.
  virtual void Retry(bool same_seed, std::function<void(std::string_view)> on_text,
                     std::function<void(const RequestResult&)> on_done) = 0;
  // /undo and /edit: takes the last exchange out of the conversation and puts its message in
  // `message` (if not null). Returns "" when done, else the line to show (nothing to undo, a
  // reply running).
  virtual std::string Undo(std::string* message) = 0;
  virtual bool busy() const = 0;
  // Cancels the running reply (it ends with StopReason::kCancelled).
  virtual void Cancel() = 0;
  // Runs a command that changes the conversation (/reset, /set, /beams); returns the line to
  // show. Front-end commands (/help, /quit, /mesh, /stats, /save, /load) are the front end's.
  virtual std::string Apply(const ChatCommand& command) = 0;

  // ---- what the front end shows

  // Multi-line /stats text.
  virtual std::string StatsText() const = 0;
  virtual ChatFigures figures() const = 0;
  // Every turn since the chat began, /resets included (a copy).
  virtual std::vector<ConversationTurn> turns() const = 0;
  virtual ConversationSettings settings() const = 0;
  virtual ChatIdentity identity() const = 0;
  // The last attention op the emulated mesh ran (the core-grid panel); safe from any thread.
  // Invalid when there is none here (a server's chat).
  virtual LastAttention last_attention() const { return {}; }

  // ---- files

  // /save FILE: writes the conversation so far as a transcript. Returns the line to show.
  virtual std::string Save(const std::string& path) const = 0;
  // /load FILE: appends the user messages of a transcript's turns to `queue`, for the front end to
  // send one after another. Returns the line to show: how many, or why the file cannot be read.
  std::string Load(const std::string& path, std::vector<std::string>& queue) const;
  // /export FILE (force: /export! FILE): the chat as shown, in Markdown or JSON by FILE's
  // extension (ExportChat, app/chat/chat_export.h). Returns the line to show.
  virtual std::string Export(const std::string& path, bool force) const = 0;
  // /copy and /copy code [N]: the last reply, or its N-th code block (ExtractCodeBlocks of
  // app/tui/markdown.h), to the terminal's clipboard by OSC 52 written to `fd`
  // (app/chat/clipboard.h). Returns the line to show: what was sent, or why nothing was.
  std::string Copy(const ChatCommand& command, int fd) const;
  // --resume: restores the kept file's turns (ChatKeep::file) and makes them the context
  // (blocking; `progress(fed, total)` hears a re-prefill). Returns the line to show. Throws
  // wc::Error for a file that cannot be read or continued here.
  virtual std::string Resume(const std::function<void(int fed, int total)>& progress) = 0;
  // /open N: switches to the N-th chat /chats lists (1 = the newest), which continues in its own
  // file. Returns "" when the switch has started: turns() are then the saved chat's, and
  // `on_done` hears the end of its restore (maybe already called). Otherwise the line to show,
  // and nothing changed (a reply running, N out of range, this very chat, a file that cannot be
  // read or continued here).
  virtual std::string Open(int n, std::function<void(const RequestResult&)> on_done) = 0;
  // The line to show when an /open's restore has ended (`r` as on_done heard it).
  virtual std::string OpenedText(const RequestResult& r) const = 0;

  // Writes the conversation as it stands to its chat file (the first save names it); a failure
  // sets the status bar's "not saved: why". The front end calls it when a reply has ended (on its
  // own thread: the reply's thread never waits for the disk); /undo calls it itself.
  void Autosave();
  // /title TEXT: the chat's title (and file name, once saved). Returns the line to show.
  std::string SetTitle(const std::string& title);
  // /forget: deletes this chat's file and saves no more of it. Returns the line to show.
  std::string Forget();
  // The chat's file ("" before its first save or with saving off).
  std::string chat_file() const;
  // /chats: the saved chats, newest first, a line each (name, title, model, turns, date).
  std::string ChatsText() const;

 protected:
  explicit ChatSession(ChatKeep keep);

  // /set temperature|top-k|top-p|seed|max-tokens (values checked by the command's parser against
  // the run options' declaration) applied to `s`; returns the line to show.
  static std::string ApplySampling(const ChatCommand& c, ConversationSettings* s);
  // The kept file's transcript of `finished` turns (all finished; maybe none), for Autosave.
  virtual Transcript KeptTranscript(const std::vector<ConversationTurn>& finished) const = 0;
  // "" or "not saved: why", for figures().
  std::string save_warning() const;
  // The chats directory (ChatKeep::dir, else DefaultChatsDir(); throws wc::Error if none).
  std::string chats_dir() const;
  // The saved chat /open N names: its path, name, text and transcript, or the line to show.
  struct OpenedFile {
    std::string path, name, text;
    Transcript transcript;
  };
  std::string FindOpen(int n, OpenedFile* out) const;
  // The chat goes on in `path` (a restored chat's file) with the title its text has; saving as
  // --no-save says.
  void ContinueIn(const std::string& path, const std::string& text);
  const ChatKeep& keep() const { return keep_; }
  // The chat's title (/title's, else its first message's once saved; "" before).
  std::string title() const;

 private:
  ChatKeep keep_;
  bool no_save_ = false;        // --no-save: nothing is kept, whatever /open does
  mutable std::mutex save_mu_;  // keep_, save_path_, title_, save_warning_
  std::string save_path_, title_, save_warning_;
  std::time_t started_ = 0;
};

}  // namespace wc
