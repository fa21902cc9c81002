// ChatSession's files (chat_session.h): /save, /load and /export, the autosaved chat and its
// title (/title, /forget), the saved chats listed (/chats) and restored (--resume; /open, which
// streams a reply, is in chat_session.cpp).
#include <cerrno>
#include <cstring>
#include <fstream>

#include "app/chat/chat_export.h"
#include "app/chat/chat_session.h"
#include "app/chat/chat_store.h"
#include "app/transcript/run_header.h"
#include "serving/transcript.h"
#include "serving/waiting_observer.h"
#include "util/error.h"

namespace wc {

std::string ChatSession::Save(const std::string& path) const {
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

std::string ChatSession::Load(const std::string& path, std::vector<std::string>& queue) const {
  Transcript t;
  try {
    t = ReadTranscriptFile(path);
  } catch (const Error& e) {
    return Cat("/load: ", e.what());
  }
  for (const ConversationTurn& turn : t.turns) queue.push_back(turn.user);
  return Cat("(replaying ", t.turns.size(), t.turns.size() == 1 ? " turn" : " turns", " of ", path,
             ")");
}

std::string ChatSession::Export(const std::string& path, bool force) const {
  ExportContent c;
  c.model = run_.model_dir.empty() ? "default" : run_.model_dir;  // as a transcript's model line
  for (ConversationTurn& t : conversation_->turns())
    if (t.finished) c.turns.push_back(std::move(t));
  c.settings = c.turns.empty() ? conversation_->settings() : c.turns.front().settings;
  c.speculate_k = run_.speculation.RequestK();
  c.lookup_ngram = run_.speculation.lookup_ngram;
  c.speculate_mode = run_.speculation.mode;
  c.draft_model = run_.speculation.draft_model;
  {
    std::lock_guard<std::mutex> lock(save_mu_);
    c.title = title_;
  }
  if (c.title.empty() && !c.turns.empty()) c.title = ChatTitle(c.turns.front().user);
  return ExportChat(path, force, c);
}

namespace {

// The file a chat started at `start` titled `title` is kept in: ChatFileName's, or - when another
// chat (not `mine`) has it, two started in the same second with the same title - that name with
// -2, -3, ... before ".txt".
std::string FreeChatPath(const std::string& dir, std::time_t start, const std::string& title,
                         const std::string& mine) {
  const std::string base = ChatFileName(start, title);
  const std::string stem = base.substr(0, base.size() - 4);
  std::string path = dir + "/" + base;
  for (int n = 2; path != mine && std::ifstream(path).good(); ++n)
    path = Cat(dir, "/", stem, "-", n, ".txt");
  return path;
}

}  // namespace

std::string ChatSession::chat_file() const {
  std::lock_guard<std::mutex> lock(save_mu_);
  return keep_.save ? save_path_ : std::string();
}

void ChatSession::Autosave() {
  std::lock_guard<std::mutex> lock(save_mu_);
  if (!keep_.save) return;
  std::vector<ConversationTurn> turns;
  for (ConversationTurn& t : conversation_->turns())
    if (t.finished) turns.push_back(std::move(t));
  if (turns.empty() && save_path_.empty()) return;  // nothing said yet
  std::string why;
  try {
    if (title_.empty() && !turns.empty()) title_ = ChatTitle(turns.front().user);
    if (save_path_.empty()) {
      save_path_ = FreeChatPath(keep_.dir, started_, title_, "");
    }
    // The settings of a chat with no turn left (all undone) matter to nobody; settings() is the
    // front end's to read (this may run on the loop's thread).
    const Transcript t =
        MakeTranscript(run_, m_, turns.empty() ? ConversationSettings{} : turns.front().settings,
                       turns, fingerprint_);
    why = WriteFileAtomically(save_path_, WithChatTitle(FormatTranscript(t), title_));
  } catch (const Error& e) {
    why = e.what();
  }
  std::lock_guard<std::mutex> figures_lock(mu_);
  figures_.save_warning = why.empty() ? std::string() : Cat("not saved: ", why);
}

std::string ChatSession::SetTitle(const std::string& title) {
  const std::string clean = ChatTitle(title);
  if (clean.empty()) return "/title needs a title";
  std::string old_path, new_path;
  {
    std::lock_guard<std::mutex> lock(save_mu_);
    title_ = clean;
    if (!keep_.save || save_path_.empty()) return Cat("(title: ", clean, ")");
    old_path = save_path_;
    new_path = save_path_ = FreeChatPath(keep_.dir, started_, clean, old_path);
  }
  Autosave();
  if (!figures().save_warning.empty())
    return Cat("(title: ", clean, "; ", figures().save_warning, ")");
  if (new_path != old_path) std::remove(old_path.c_str());  // the chat lives in its new file
  return Cat("(title: ", clean, "; saved as ", new_path, ")");
}

std::string ChatSession::Forget() {
  std::lock_guard<std::mutex> lock(save_mu_);
  if (!keep_.save) return "(this chat is not being saved)";
  keep_.save = false;
  if (save_path_.empty()) return "(this chat will not be saved)";
  const std::string path = save_path_;
  save_path_.clear();
  if (std::remove(path.c_str()) != 0)
    return Cat("could not delete ", path, ": ", std::strerror(errno), "; nothing more is saved");
  return Cat("(deleted ", path, "; nothing more of this chat is saved)");
}

RequestId ChatSession::RestoreChat(const std::string& path, const std::string& label,
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
  std::lock_guard<std::mutex> lock(save_mu_);
  title_ = ReadChatTitle(text);
  save_path_ = keep_.file = path;
  restored_label_ = label;
  restored_turns_ = t.turns.size();
  keep_.save = !no_save_;
  return id;
}

std::string ChatSession::RestoredText(const RequestResult* r) const {
  int computed = 0, cached = 0;
  if (r != nullptr) {
    computed = r->prompt_tokens - r->cached_tokens;
    cached = r->cached_tokens;
  }
  return Cat("(", restored_label_, ": ", restored_turns_, restored_turns_ == 1 ? " turn" : " turns",
             "; re-prefilled ", computed, " tokens, ", cached, " from the prefix cache)");
}

std::string ChatSession::Resume(const std::function<void(int fed, int total)>& progress) {
  const std::string path = keep_.file;
  const std::string text = ReadTextFile(path, int64_t{64} << 20);
  const Transcript t = ParseTranscript(text, path);
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

std::string ChatSession::OpenedText(const RequestResult& r) const {
  if (r.reason == StopReason::kError) return Cat("/open: re-prefilling failed: ", r.error);
  return RestoredText(&r);
}

std::string ChatSession::ChatsText() const {
  std::string dir = keep_.dir;
  try {
    if (dir.empty()) dir = DefaultChatsDir();
  } catch (const Error& e) {
    return Cat(e.what(), "\n");
  }
  const std::vector<SavedChat> chats = ListChats(dir);
  if (chats.empty()) return Cat("(no saved chats in ", dir, ")\n");
  std::string out;
  const std::string mine = chat_file();
  for (size_t i = 0; i < chats.size(); ++i) {
    const SavedChat& c = chats[i];
    const std::time_t t = static_cast<std::time_t>(c.mtime_ns / 1000000000);
    std::tm tm{};
    localtime_r(&t, &tm);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
    out +=
        Cat(i + 1, ". ", c.title, " | ", c.model, " | ", c.turns, c.turns == 1 ? " turn" : " turns",
            " | ", when, " | ", c.name, c.path == mine ? " (this chat)" : "", "\n");
  }
  return out;
}

}  // namespace wc
