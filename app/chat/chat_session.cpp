// ChatSession's own part (chat_session.h): what both kinds share - the kept file (Autosave,
// /title, /forget, /chats, finding what /open opens), /load and /copy.
#include "app/chat/chat_session.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "app/chat/chat_store.h"
#include "app/chat/clipboard.h"
#include "app/tui/markdown.h"
#include "serving/transcript.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
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

ChatSession::ChatSession(ChatKeep keep) : keep_(std::move(keep)), started_(std::time(nullptr)) {
  no_save_ = !keep_.save;
  if (keep_.save && keep_.dir.empty()) keep_.dir = DefaultChatsDir();
  if (!keep_.file.empty()) save_path_ = keep_.file;
}

std::string ChatSession::ApplySampling(const ChatCommand& c, ConversationSettings* s) {
  if (c.name == "temperature") {
    s->sampling.temperature = static_cast<float>(c.value);
  } else if (c.name == "top-k") {
    s->sampling.top_k = static_cast<int>(c.value);
  } else if (c.name == "top-p") {
    s->sampling.top_p = static_cast<float>(c.value);
  } else if (c.name == "seed") {
    s->seed = std::stoull(c.path);
  } else if (c.name == "max-tokens") {
    s->max_new_tokens = static_cast<int>(c.value);
  }
  return Cat("(", c.name, " ", c.name == "seed" ? c.path : Cat(c.value),
             c.name == "seed" ? ": a new random stream from the next reply" : "", ")");
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

std::string ChatSession::Copy(const ChatCommand& c, int fd) const {
  std::string reply;
  for (const ConversationTurn& t : turns())
    if (t.finished) reply = t.reply_text;
  if (reply.empty()) return "not copied: there is no reply yet";
  if (c.name != "code") return CopyToTerminal(reply, "the last reply", fd);
  const std::vector<tui::CodeBlock> blocks = tui::ExtractCodeBlocks(reply);
  const int n = static_cast<int>(c.value);
  if (blocks.empty()) return "not copied: the last reply has no code block";
  if (n < 1 || n > static_cast<int>(blocks.size()))
    return Cat("not copied: the last reply has ", blocks.size(),
               blocks.size() == 1 ? " code block" : " code blocks", " (/copy code 1-",
               blocks.size(), ")");
  const tui::CodeBlock& b = blocks[n - 1];
  return CopyToTerminal(
      b.code, Cat("code block ", n, b.language.empty() ? "" : " (" + b.language + ")"), fd);
}

std::string ChatSession::chat_file() const {
  std::lock_guard<std::mutex> lock(save_mu_);
  return keep_.save ? save_path_ : std::string();
}

std::string ChatSession::title() const {
  std::lock_guard<std::mutex> lock(save_mu_);
  return title_;
}

std::string ChatSession::save_warning() const {
  std::lock_guard<std::mutex> lock(save_mu_);
  return save_warning_;
}

std::string ChatSession::chats_dir() const {
  std::lock_guard<std::mutex> lock(save_mu_);
  return keep_.dir.empty() ? DefaultChatsDir() : keep_.dir;
}

void ChatSession::Autosave() {
  std::lock_guard<std::mutex> lock(save_mu_);
  if (!keep_.save) return;
  std::vector<ConversationTurn> finished;
  for (ConversationTurn& t : turns())
    if (t.finished) finished.push_back(std::move(t));
  if (finished.empty() && save_path_.empty()) return;  // nothing said yet
  std::string why;
  try {
    if (title_.empty() && !finished.empty()) title_ = ChatTitle(finished.front().user);
    if (save_path_.empty()) save_path_ = FreeChatPath(keep_.dir, started_, title_, "");
    why = WriteFileAtomically(save_path_,
                              WithChatTitle(FormatTranscript(KeptTranscript(finished)), title_));
  } catch (const Error& e) {
    why = e.what();
  }
  save_warning_ = why.empty() ? std::string() : Cat("not saved: ", why);
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
  const std::string warning = save_warning();
  if (!warning.empty()) return Cat("(title: ", clean, "; ", warning, ")");
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

std::string ChatSession::ChatsText() const {
  std::string dir;
  try {
    dir = chats_dir();
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

std::string ChatSession::FindOpen(int n, OpenedFile* out) const {
  try {
    const std::string dir = chats_dir();
    const std::vector<SavedChat> chats = ListChats(dir);
    if (n < 1 || n > static_cast<int>(chats.size()))
      return chats.empty() ? Cat("/open: no saved chats in ", dir)
                           : Cat("/open: N must be 1-", chats.size(), " (/chats lists them)");
    out->path = chats[n - 1].path;
    out->name = chats[n - 1].name;  // /open names the chat as /chats lists it
    if (out->path == chat_file()) return Cat("(", out->name, " is this chat)");
    out->text = ReadTextFile(out->path, int64_t{64} << 20);
    out->transcript = ParseTranscript(out->text, out->path);
  } catch (const Error& e) {
    return Cat("/open: ", e.what());
  }
  return "";
}

void ChatSession::ContinueIn(const std::string& path, const std::string& text) {
  std::lock_guard<std::mutex> lock(save_mu_);
  title_ = ReadChatTitle(text);
  save_path_ = keep_.file = path;
  keep_.save = !no_save_;
}

}  // namespace wc
