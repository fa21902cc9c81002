// Runs a conversation for `wormchat transcript`: the model loaded from ModelRunOptions, a serving
// loop, and one Conversation (serving/conversation.h) - exactly what the chat runs, so a recorded
// conversation replays token for token.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/model_loader.h"
#include "app/model_options.h"
#include "serving/conversation.h"
#include "serving/serving_loop.h"
#include "serving/transcript.h"

namespace wc {

class ConversationRunner {
 public:
  // Loads the model of `run` and starts a loop of `user_rows` rows (the widest beam search the
  // conversation will run, at least 1) and a conversation with `settings`, its replies decoded
  // with run.speculation (ApplySpeculation). Throws wc::Error from
  // LoadModel / the loop / Conversation for bad options.
  ConversationRunner(const ModelRunOptions& run, const ConversationSettings& settings,
                     int user_rows);
  ~ConversationRunner();

  const LoadedModel& model() const { return model_; }
  Conversation& conversation() { return *conversation_; }

  // Sends `user` and waits for the reply; returns the recorded turn. cancel_after >= 0 cancels the
  // reply once that many tokens came (a recorded Ctrl-C: the loop ends it at the next step).
  // Throws wc::Error if the conversation refuses the message or the reply fails.
  ConversationTurn Say(const std::string& user, int cancel_after = -1);

  // Replays `expected`'s inputs: a reset and settings changes as recorded, then its user message
  // (cancelled where it was cancelled). Returns the new turn.
  ConversationTurn Replay(const ConversationTurn& expected);

  // Prompt tokens the replies so far fed (the user turns, their framing, the previous reply's last
  // token) and how many of them the prefix cache gave (not prefilled).
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t cached_tokens() const { return cached_tokens_; }
  // Speculative decoding over the replies so far: tokens proposed, and of those accepted.
  int64_t spec_proposed() const { return spec_proposed_; }
  int64_t spec_accepted() const { return spec_accepted_; }

 private:
  LoadedModel model_;
  std::unique_ptr<ServingLoop> loop_;
  std::unique_ptr<Conversation> conversation_;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0;
  int64_t spec_proposed_ = 0, spec_accepted_ = 0;
};

// The widest beam search among `initial` and `turns`' settings (1 for sampling): the user rows a
// replay needs.
int UserRowsFor(const ConversationSettings& initial, const std::vector<ConversationTurn>& turns);

}  // namespace wc
