// LocalChatSession's files (local_chat_session.h): /save and /export, what its kept file holds,
// and restoring a saved chat (--resume; /open, which streams a re-prefill, is in
// local_chat_session.cpp).
#include <cerrno>
#include <cstring>
#include <fstream>

#include "app/chat/chat_export.h"
#include "app/chat/chat_store.h"
#include "app/chat/local_chat_session.h"
#include "app/transcript/run_header.h"
#include "serving/transcript.h"
#include "serving/waiting_observer.h"
#include "util/error.h"

namespace wc {

std::string LocalChatSession::Save(const std::string& path) const {
  try {
    SaveConversation(path, run_, m_, *conversation_);
  } catch (const Error& e) {
    return Cat("/save: ", e.what());
  }
  int n = 0;
  for (const ConversationTurn& t : conversation_->turns()) n += t.finished;
  return Cat("(saved ", n, " turn", n == 1 ? "" : "s", " to ", path,
             "; check it with: wormchat transcript replay ", path, ")");
}

Transcript LocalChatSession::KeptTranscript(const std::vector<ConversationTurn>& finished) const {
  std::lock_guard<std::mutex> lock(fingerprint_mu_);
  // The settings of a chat with no turn left (all undone) matter to nobody; settings() is the
  // front end's to read (this may run on the loop's thread).
  return MakeTranscript(run_, m_,
                        finished.empty() ? ConversationSettings{} : finished.front().settings,
                        finished, fingerprint_);
}

std::string LocalChatSession::Export(const std::string& path, bool force) const {
  ExportContent c;
  c.model = run_.model_dir.empty() ? "default" : run_.model_dir;  // as a transcript's model line
  for (ConversationTurn& t : conversation_->turns())
    if (t.finished) c.turns.push_back(std::move(t));
  c.settings = c.turns.empty() ? conversation_->settings() : c.turns.front().settings;
  c.speculate_k = run_.speculation.RequestK();
  c.lookup_ngram = run_.speculation.lookup_ngram;
  c.speculate_mode = run_.speculation.mode;
  c.draft_model = run_.speculation.draft_model;
  c.title = title();
  if (c.title.empty() && !c.turns.empty()) c.title = ChatTitle(c.turns.front().user);
  return ExportChat(path, force, c);
}

RequestId LocalChatSession::RestoreChat(const std::string& path, const std::string& label,
                                        const std::string& text, const Transcript& t,
                                        std::shared_ptr<RequestObserver> o) {
  // Into a fresh conversation from the saved chat's settings (Restore derives the RNG stream
  // from them, as --resume does), which replaces the current one only once it has taken the
  // turns: a chat that cannot be restored changes nothing.
  auto restored = std::make_unique<Conversation>(*loop_, *m_.model, *m_.tokenizer,
                                                 m_.chat_format.value_or(ChatFormat{}), t.settings);
  ApplyRunSpeculation(*restored);
  const RequestId id = restored->Restore(t.turns, std::move(o));
  conversation_ = std::move(restored);
  ContinueIn(path, text);
  restored_label_ = label;
  restored_turns_ = t.turns.size();
  return id;
}

std::string LocalChatSession::RestoredText(const RequestResult* r) const {
  int computed = 0, cached = 0;
  if (r != nullptr) {
    computed = r->prompt_tokens - r->cached_tokens;
    cached = r->cached_tokens;
  }
  return Cat("(", restored_label_, ": ", restored_turns_, restored_turns_ == 1 ? " turn" : " turns",
             "; re-prefilled ", computed, " tokens, ", cached, " from the prefix cache)");
}

std::string LocalChatSession::Resume(const std::function<void(int fed, int total)>& progress) {
  const std::string path = keep().file;
  const std::string text = ReadTextFile(path, int64_t{64} << 20);
  const Transcript t = ParseTranscript(text, path);
  if (!t.server.empty())
    throw Error(Cat("--resume: ", path, " was a chat with the server ", t.server,
                    ": continue it with --server ", t.server));
  class Progress : public WaitingObserver {
   public:
    explicit Progress(const std::function<void(int, int)>& f) : f_(f) {}
    void OnPrefill(int fed, int total, int context) override {
      WaitingObserver::OnPrefill(fed, total, context);
      if (f_) f_(fed, total);
    }

   private:
    std::function<void(int, int)> f_;
  };
  auto observer = std::make_shared<Progress>(progress);
  const RequestId id = RestoreChat(path, Cat("resumed ", path), text, t, observer);
  if (id == 0) return RestoredText(nullptr);
  const RequestResult& r = observer->Wait();
  if (r.reason == StopReason::kError) throw Error(Cat(path, ": resuming failed: ", r.error));
  {
    std::lock_guard<std::mutex> lock(mu_);
    figures_.ctx_tokens = r.session_pos;
  }
  return RestoredText(&r);
}

std::string LocalChatSession::OpenedText(const RequestResult& r) const {
  if (r.reason == StopReason::kError) return Cat("/open: re-prefilling failed: ", r.error);
  return RestoredText(&r);
}

}  // namespace wc
