#include "app/transcript/conversation_runner.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "app/speculation.h"
#include "serving/waiting_observer.h"
#include "util/error.h"

namespace wc {
namespace {

// Waits for the reply; cancels it once `cancel_after` tokens came (if >= 0). The request id is
// known only after Send returns, so a cancel due before that is made by Arm().
class ReplyObserver : public WaitingObserver {
 public:
  ReplyObserver(ServingLoop& loop, int cancel_after) : loop_(loop), cancel_after_(cancel_after) {}
  void OnToken(int token, const float* logits, int vocab) override {
    WaitingObserver::OnToken(token, logits, vocab);
    std::lock_guard<std::mutex> lock(mu_);
    if (cancel_after_ >= 0 && ++tokens_ >= cancel_after_ && id_ != 0) loop_.Cancel(id_);
  }
  void Arm(RequestId id) {
    std::lock_guard<std::mutex> lock(mu_);
    id_ = id;
    if (cancel_after_ >= 0 && tokens_ >= cancel_after_) loop_.Cancel(id_);
  }

 private:
  ServingLoop& loop_;
  const int cancel_after_;
  std::mutex mu_;
  RequestId id_ = 0;
  int tokens_ = 0;
};

}  // namespace

int UserRowsFor(const ConversationSettings& initial, const std::vector<ConversationTurn>& turns) {
  int rows = initial.beams ? initial.beams->num_beams : 1;
  for (const ConversationTurn& t : turns)
    if (t.settings.beams) rows = std::max(rows, t.settings.beams->num_beams);
  return rows;
}

ConversationRunner::ConversationRunner(const ModelRunOptions& run,
                                       const ConversationSettings& settings, int user_rows)
    : model_(LoadModel(run, /*need_tokenizer=*/true)) {
  const ChatFormat format = model_.chat_format.value_or(ChatFormat{});
  loop_ = std::make_unique<ServingLoop>(*model_.model, model_.tokenizer.get(), format,
                                        ServingOptionsFor(run, model_, std::max(1, user_rows)));
  conversation_ =
      std::make_unique<Conversation>(*loop_, *model_.model, *model_.tokenizer, format, settings);
  SpeculationOptions speculation = run.speculation;
  LoadDraftModel(speculation, run, model_, std::max(1, user_rows));
  conversation_->set_request_options(
      [s = std::move(speculation)](Request* r) { ApplySpeculation(s, r); });
}

ConversationRunner::~ConversationRunner() {
  conversation_.reset();  // before the loop it runs on
  if (loop_) loop_->Shutdown(ShutdownMode::kCancel);
}

ConversationTurn ConversationRunner::Say(const std::string& user, int cancel_after) {
  auto observer = std::make_shared<ReplyObserver>(*loop_, cancel_after);
  observer->Arm(conversation_->Send(user, observer));
  const RequestResult& result = observer->Wait();
  if (result.reason == StopReason::kError) throw Error(result.error);
  prompt_tokens_ += result.prompt_tokens;
  cached_tokens_ += result.cached_tokens;
  spec_proposed_ += result.spec_proposed;
  spec_accepted_ += result.spec_accepted;
  return conversation_->turns().back();
}

ConversationTurn ConversationRunner::Replay(const ConversationTurn& expected) {
  if (expected.reset_before) conversation_->Reset();
  if (!(expected.settings == conversation_->settings()))
    conversation_->set_settings(expected.settings);
  const bool cancelled = expected.reason == StopReason::kCancelled;
  return Say(expected.user, cancelled ? static_cast<int>(expected.reply_ids.size()) : -1);
}

}  // namespace wc
