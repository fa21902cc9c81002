#include "serving/draft_proposer.h"

#include <algorithm>

#include "util/error.h"

namespace wc {
namespace {

// One request's view of its row in the source: the history, drafted from on demand.
class DraftProposer final : public Proposer {
 public:
  DraftProposer(DraftModelSource& source, int user_row) : source_(source), user_row_(user_row) {}
  void Reset(const std::vector<int>& history) override {
    history_.clear();
    foreign_ = false;
    for (int token : history) Append(token);
  }
  void Append(int token) override {
    history_.push_back(token);
    foreign_ = foreign_ || token >= source_.draft_vocab();
  }
  std::vector<int> Propose(int k) override {
    if (foreign_) return {};
    return source_.Draft(user_row_, history_, k);
  }

 private:
  DraftModelSource& source_;
  int user_row_;
  std::vector<int> history_;  // [size] the row's tokens: earlier turns, the prompt, kept tokens
  // The history holds an id the draft's vocabulary lacks (a target whose padded LM head produced
  // one): the draft cannot read on, and the row decodes without proposals from then on.
  bool foreign_ = false;
};

}  // namespace

DraftModelSource::DraftModelSource(const DecoderModel& draft, int user_rows, int ctx,
                                   KVDType kv_dtype, int n_proposable)
    : draft_(draft),
      cache_(draft.CacheShape(user_rows, ctx), kv_dtype),
      ctx_(ctx),
      n_proposable_(std::min(n_proposable, draft.config().vocab_size)),
      cached_(user_rows) {
  WC_CHECK(draft.split().whole(), "a draft model runs whole, not tensor parallel");
  WC_CHECK(n_proposable_ > 0, "a draft model needs a vocabulary");
}

std::unique_ptr<Proposer> DraftModelSource::Make(int user_row) {
  WC_CHECK(user_row >= 0 && user_row < static_cast<int>(cached_.size()), "draft row ", user_row);
  return std::make_unique<DraftProposer>(*this, user_row);
}

int DraftModelSource::Argmax(const float* logits) const {
  return static_cast<int>(std::max_element(logits, logits + n_proposable_) - logits);
}

std::vector<int> DraftModelSource::Draft(int user_row, const std::vector<int>& history, int k) {
  std::vector<int> out;
  if (k <= 0 || history.empty()) return out;
  const size_t size = history.size();
  WC_CHECK(size - 1 + static_cast<size_t>(k) <= static_cast<size_t>(ctx_), "draft of ", k,
           " tokens after ", size, " overruns the context of ", ctx_);
  std::vector<int>& cached = cached_[user_row];
  // Keep the longest prefix the row's KV shares with the history, short of its last token (whose
  // logits are the first draft's).
  size_t keep = 0;
  const size_t limit = std::min(cached.size(), size - 1);
  while (keep < limit && cached[keep] == history[keep]) ++keep;
  cached.resize(keep);
  TokenBatch batch;
  for (size_t pos = keep; pos < size; ++pos)
    batch.Add(history[pos], user_row, static_cast<int>(pos), pos + 1 == size);
  for (int step = 0;; ++step) {
    draft_.Forward(batch, cache_, &logits_);
    ++forward_calls_;
    tokens_fed_ += static_cast<int64_t>(batch.size());
    cached.insert(cached.end(), batch.tokens.begin(), batch.tokens.end());
    const int token = Argmax(logits_.data());
    out.push_back(token);
    if (step + 1 == k) break;
    batch = TokenBatch();
    batch.Add(token, user_row, static_cast<int>(cached.size()), true);
  }
  return out;
}

}  // namespace wc
