// The chat with the model in this process (chat_session.h): the model's serving loop, one
// Conversation, the slash commands that change it (/set speculate included), and the figures the
// status bar and /stats show (state, speed, time to first token, context and KV fill, the prompt
// tokens the prefix cache gave, emulated mesh time). Replies run on the serving loop's thread.
//
// Thread safety: as ChatSession's.
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
#include "app/chat/chat_session.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "mesh/attention_meter.h"
#include "serving/conversation.h"
#include "serving/transcript.h"

namespace wc {

class LocalChatSession : public ChatSession {
 public:
  // Starts the serving loop (rows for the widest beam search). `m` must outlive the session.
  LocalChatSession(const LoadedModel& m, const ModelRunOptions& run, const ConversationSettings& s,
                   ChatKeep keep = {});
  ~LocalChatSession() override;

  void Send(const std::string& message, std::function<void(std::string_view)> on_text,
            std::function<void(const RequestResult&)> on_done) override;
  // Conversation::Retry: `same_seed` from the same stream position, else the stream's next seed.
  void Retry(bool same_seed, std::function<void(std::string_view)> on_text,
             std::function<void(const RequestResult&)> on_done) override;
  // Conversation::Undo.
  std::string Undo(std::string* message) override;
  bool busy() const override { return conversation_->busy(); }
  void Cancel() override;
  // /reset, /set (speculate, speculate-k and lookup-ngram change how the next replies decode),
  // /beams.
  std::string Apply(const ChatCommand& command) override;
  // The last reply, its prompt (reused from the prefix cache and prefilled), the prefix cache's
  // totals or that it is off, context, KV cache, mesh, sampling, speculation.
  std::string StatsText() const override;
  ChatFigures figures() const override;
  std::vector<ConversationTurn> turns() const override { return conversation_->turns(); }
  ConversationSettings settings() const override { return conversation_->settings(); }
  ChatIdentity identity() const override;
  LastAttention last_attention() const override { return meter_.last(); }

  // /save FILE: a transcript (`wormchat transcript replay FILE` checks it).
  std::string Save(const std::string& path) const override;
  // With its model and settings, and the speculation the chat decodes with.
  std::string Export(const std::string& path, bool force) const override;
  // Re-prefills the restored turns (Conversation::Restore); the line says how many turns, tokens
  // computed and taken from the prefix cache. Throws wc::Error for a file that cannot be read, or
  // one kept from a chat with a server.
  std::string Resume(const std::function<void(int fed, int total)>& progress) override;
  // The saved conversation (settings and RNG stream as saved) is re-prefilled on the loop with
  // the status bar's prefill figures. Refused: a chat saved with another model or weights (its
  // fingerprint; `wormchat chat --resume NAME --model DIR` continues it) or with a server.
  std::string Open(int n, std::function<void(const RequestResult&)> on_done) override;
  std::string OpenedText(const RequestResult& r) const override;

  Conversation& conversation() { return *conversation_; }
  const LoadedModel& model() const { return m_; }
  const ModelRunOptions& run_options() const { return run_; }

 protected:
  Transcript KeptTranscript(const std::vector<ConversationTurn>& finished) const override;

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

  std::string restored_label_;  // the last Resume's or Open's label, and its turns
  size_t restored_turns_ = 0;
  mutable std::mutex fingerprint_mu_;  // fingerprint_ (Autosave runs on either thread)
  std::string fingerprint_;

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
