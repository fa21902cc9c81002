// `wormchat chat --server URL`: the chat (chat_session.h) as a client of `wormchat serve` or any
// OpenAI-compatible server (llama-server, vLLM, ollama's /v1), through app/openai/chat_client.h.
// The conversation lives here, as an OpenAI client keeps it: each reply sends the system prompt
// and every turn in context as messages, and the server's prefix cache (wormchat serve's, reported
// as usage.prompt_tokens_details.cached_tokens) makes only the new turn cost prefill.
//
// What it promises:
//   - Seeds: a chat's random stream is its seed. The first reply after the chat starts or its seed
//     changes sends the seed itself (so it is the reply `wormchat chat --seed S` gives in process
//     to the same first message), and the k-th after it sends SplitMix64(seed, k) cut to 32 bits
//     (llama-server reads seeds as 32-bit). The same chat against the same server and model gives
//     the same replies; /undo and /retry take back the stream position as in process, and /retry
//     with a new seed records it in the turn (`set: seed N` in the kept file).
//   - A conversation too long for the server's context (a 400 about the context) drops its oldest
//     turns one at a time, the system prompt kept, and says so - as the chat in process does.
//   - What needs the engine here (/beams, /set speculate, the mesh panel, /save as a transcript
//     that replays) says it is not available from a server; KV and mesh figures come from
//     `wormchat serve`'s extension object in the stream, or the status bar says they do not.
//   - Kept chats are transcripts with a `server:` header and no token ids: --resume and /open
//     continue them against any server; `transcript replay` refuses them.
//
// Thread safety: as ChatSession's; each reply runs on a thread of its own.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "app/chat/chat_session.h"
#include "app/openai/chat_client.h"

namespace wc {

class RemoteChatSession : public ChatSession {
 public:
  // `client` talks to the server; `model` is the server's id for its model (ChatClient::Model()).
  RemoteChatSession(std::unique_ptr<ChatClient> client, std::string model,
                    const ConversationSettings& settings, ChatKeep keep = {});
  // Cancels a running reply and waits for its thread.
  ~RemoteChatSession() override;

  void Send(const std::string& message, std::function<void(std::string_view)> on_text,
            std::function<void(const RequestResult&)> on_done) override;
  void Retry(bool same_seed, std::function<void(std::string_view)> on_text,
             std::function<void(const RequestResult&)> on_done) override;
  std::string Undo(std::string* message) override;
  bool busy() const override;
  void Cancel() override;
  // /reset and /set temperature|top-k|top-p|seed|max-tokens; /beams and /set speculate* say they
  // are the server's to decide.
  std::string Apply(const ChatCommand& command) override;
  std::string StatsText() const override;
  ChatFigures figures() const override;
  std::vector<ConversationTurn> turns() const override;
  ConversationSettings settings() const override;
  ChatIdentity identity() const override;

  // The chat as its kept file holds it (server header, no ids): /load reads its messages back.
  std::string Save(const std::string& path) const override;
  std::string Export(const std::string& path, bool force) const override;
  // Takes the kept file's turns (it must be a server's chat); nothing to prefill here.
  std::string Resume(const std::function<void(int fed, int total)>& progress) override;
  std::string Open(int n, std::function<void(const RequestResult&)> on_done) override;
  std::string OpenedText(const RequestResult& r) const override;

  // The seed the reply at `position` of a stream seeded `seed` sends (the promise above).
  static uint64_t TurnSeed(uint64_t seed, int position);

 protected:
  Transcript KeptTranscript(const std::vector<ConversationTurn>& finished) const override;

 private:
  // Starts the reply to turns_.back() (already appended) on its thread.
  void Start(std::function<void(std::string_view)> on_text,
             std::function<void(const RequestResult&)> on_done);
  // The reply's thread: streams, drops the oldest turns while the server says the context is too
  // small, records the turn and figures, then on_done.
  void Run(std::function<void(std::string_view)> on_text,
           std::function<void(const RequestResult&)> on_done);
  // The messages for turns_.back(): system, the turns in context before it, its user message.
  std::vector<ChatMessage> MessagesLocked() const;
  // The position of turn i in its random stream (turns since the last that started one).
  int StreamPositionLocked(size_t i) const;
  // Takes `t`'s turns as this chat's (Resume, Open); throws wc::Error for a chat run in process.
  void Restore(const Transcript& t, const std::string& path);
  void JoinWorker();
  // The server's figures as they arrive: kept, and folded once into figures_ (status bar, panel).
  void TakeServerFiguresLocked(const ServerFigures& s);

  std::unique_ptr<ChatClient> client_;
  std::string model_;
  std::thread worker_;
  std::atomic<bool> busy_{false};

  mutable std::mutex mu_;  // everything below: the reply's thread records into it
  ConversationSettings settings_;
  std::vector<ConversationTurn> turns_;
  size_t first_in_context_ = 0;  // turns before it were reset away or dropped
  bool reset_next_ = false;      // /reset since the last Send
  bool reseed_next_ = false;     // a new seed since the last Send
  ChatFigures figures_;
  ServerFigures server_;  // the last figures wormchat serve sent (identity() reads its mesh)
  std::string restored_label_;
  size_t restored_turns_ = 0;
};

}  // namespace wc
