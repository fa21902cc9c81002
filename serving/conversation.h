// A chat conversation on the serving loop: what `wormchat chat` (TUI and line mode), its /save and
// /load, and `wormchat transcript record|replay` all run, so a recorded conversation replays token
// for token. It owns one loop session and the turns so far (user text, reply ids and text, the
// settings each turn ran with), frames each new user message with the model's chat format, and
// when the context would overflow drops the oldest turns (the system prompt stays) and re-prefills
// the rest instead of wiping the conversation.
//
// Tokens depend only on the model, the loop's KV settings, and the sequence of Send / Reset /
// settings changes: the session's RNG stream starts from the seed of the first turn after a Reset
// or a seed change and continues across turns.
//
// Thread safety: call Send, Reset, set_settings and the accessors from one thread (the front
// end's); the observer passed to Send hears the reply on the loop's thread, and the turn is
// recorded before its OnFinish.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "model/chat/chat_format.h"
#include "model/decoder_model.h"
#include "serving/beam_search.h"
#include "serving/request.h"
#include "serving/sampler.h"
#include "serving/serving_loop.h"
#include "tokenizer/tokenizer.h"

namespace wc {

struct ConversationSettings {
  SamplingParams sampling;
  uint64_t seed = 0;
  int max_new_tokens = kDefaultMaxNewTokens;  // >= 1
  std::optional<BeamParams> beams;            // set: replies by beam search
  std::string system;                         // system prompt ("" = none); needs a chat format
  bool operator==(const ConversationSettings& o) const;
  // Throws wc::Error naming the setting out of range (serving/run_options.h's bounds, and
  // max_new_tokens >= 1: a reply has a token at least).
  void Validate() const;
};

struct ConversationTurn {
  std::string user;
  ConversationSettings settings;  // what this turn ran with
  // What happened before it was fed: the conversation was reset (/reset), or its oldest turns
  // were dropped to make room (that many), and the session started over (re-prefilled).
  bool reset_before = false;
  int dropped_before = 0;
  // The reply (filled when it ends): ids as generated (a final EOS included), text as streamed.
  std::vector<int> reply_ids;
  std::string reply_text;
  StopReason reason = StopReason::kMaxTokens;
  bool finished = false;
  // The session's RNG stream position before the reply sampled and after it (not written to a
  // transcript: replaying the turns reproduces them).
  Rng::State rng_before{}, rng_after{};
  // The conversation's stream seed before this turn was sent, and whether this turn started a new
  // stream (its settings' seed differed): what Undo restores.
  uint64_t stream_seed_before = 0;
  bool reseeded = false;
};

class Conversation {
 public:
  // `loop`, `model` and `tokenizer` must outlive the conversation; `format` should be the one the
  // loop frames with (its stop strings apply). Throws wc::Error naming the flag for bad settings.
  // Destroying it cancels a running reply and waits for it to end.
  Conversation(ServingLoop& loop, const DecoderModel& model, const Tokenizer& tokenizer,
               ChatFormat format, const ConversationSettings& settings);
  ~Conversation();
  Conversation(const Conversation&) = delete;
  Conversation& operator=(const Conversation&) = delete;

  // Starts the reply to `user` (non-empty) on the loop and returns its request id; `observer`
  // hears it (its OnFinish comes after the turn is recorded). Throws wc::Error (nothing sent) for
  // an empty message, one too long for the context even alone, or a reply still running.
  RequestId Send(const std::string& user, std::shared_ptr<RequestObserver> observer);
  // Whether a reply is running (Send'ed, OnFinish not yet delivered).
  bool busy() const;
  // The next Send starts a new conversation: the turns so far leave the context (turns() still
  // lists them; the next one is marked reset_before). Same settings, and the session's RNG stream
  // goes on, as the chat's /reset always did.
  void Reset();

  // /undo: takes the last exchange out of the conversation (turns() no longer lists it) and out of
  // the context. The next Send re-prefills the turns before it (the prefix cache gives all but
  // about a block of them) and samples from the RNG stream where the removed reply began, so the
  // conversation goes on exactly as if it had never been - a transcript of turns() replays.
  // Returns the removed turn. Throws wc::Error if a reply runs or there is no exchange since the
  // last Reset.
  ConversationTurn Undo();
  // /retry: Undo, then Send of the same user message. `same_seed`: from the same stream position
  // (the same reply unless the settings changed since); else from a new stream, seeded with the
  // next draw of the stream after the old reply - the turn records that seed (settings().seed from
  // then on), so a transcript replays it. Throws as Undo and Send (nothing changes then).
  RequestId Retry(bool same_seed, std::shared_ptr<RequestObserver> observer);

  // Resuming a saved conversation (a transcript's turns, replies as recorded): takes `turns` as
  // this conversation's (it must have none yet) and re-prefills the ones in context - after the
  // last reset, less those dropped - with a prompt-only request heard by `observer` (OnPrefill for
  // progress; the prefix cache makes it take about one block). The RNG stream goes on where the
  // turns left it (one draw per token sampled at a temperature above 0, from the seed the last
  // stream began with), and the settings are the last turn's: the next Send replies exactly as
  // the original conversation's next turn would have. Returns the request id (0 when nothing is in
  // context). Throws wc::Error if turns exist already or a turn is unfinished.
  RequestId Restore(const std::vector<ConversationTurn>& turns,
                    std::shared_ptr<RequestObserver> observer);

  const ConversationSettings& settings() const { return state_.settings; }
  // Applies from the next Send. A new seed starts a new RNG stream then (the conversation so far
  // is re-prefilled into a fresh session). Throws wc::Error naming the setting if a value is bad.
  void set_settings(const ConversationSettings& settings);
  // Called on each reply's Request just before Send submits it: the front end's way of decoding
  // that never changes the tokens (speculative decoding: app/model_options.h ApplySpeculation).
  // Not a setting - turns do not record it. Empty (the default): nothing.
  void set_request_options(std::function<void(Request*)> apply);

  // Every turn since the conversation began, /resets and dropped turns included (a copy: the
  // last one may be finishing on the loop's thread).
  std::vector<ConversationTurn> turns() const;
  // Tokens the conversation holds in the KV cache now (after the last finished turn).
  int session_pos() const;
  int ctx() const { return loop_.ctx(); }

  // The ids that frame turns [first, turns.size()) followed by `next_user`, as a fresh session
  // would hold them: [bos] + system + per turn (its user turn, the reply tokens its session fed -
  // all but an ending EOS or stop token - and [eos]) + the new user turn.
  std::vector<int> FrameFrom(size_t first, const std::string& next_user) const;

 private:
  class TurnObserver;
  void Record(size_t turn, const RequestResult& result);
  std::vector<int> SystemIds() const;

  ServingLoop& loop_;
  const DecoderModel& model_;
  const Tokenizer& tokenizer_;
  ChatFormat format_;
  SessionId session_ = 0;
  std::function<void(Request*)> request_options_;  // set_request_options
  uint64_t stream_seed_ = 0;                       // the seed the session's RNG stream started from

  // What Undo and Retry change (beside stream_seed_, which Undo sets and a failed Retry leaves),
  // in one piece: a Retry whose Send fails puts it back with one assignment.
  struct State {
    ConversationSettings settings;
    std::vector<ConversationTurn> turns;
    size_t first_kept = 0;      // turns before this were dropped from the KV (context trimming)
    bool reset_next = false;    // /reset since the last Send
    bool reseed_next = false;   // a new seed since the last Send
    bool rebuild_next = false;  // a reply failed or was undone: re-prefill the kept turns afresh
    // Undo: the stream position the next Send samples from, unless a new seed starts a new
    // stream.
    std::optional<Rng::State> rng_next;
  };

  mutable std::mutex mu_;  // guards what the loop's thread records: state_.turns, session_pos_,
                           // busy_
  std::condition_variable idle_;
  RequestId running_ = 0;
  State state_;
  int session_pos_ = 0;
  bool busy_ = false;
  // Undo's work, under mu_.
  ConversationTurn UndoLocked();
};

}  // namespace wc
