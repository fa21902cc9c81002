// A draft model proposing for the target (issue 34: `--speculate draft --draft-model DIR`): a
// smaller checkpoint that shares the target's tokenizer runs k greedy steps on its own KV cache
// rows, in the same process, and its tokens are verified by the target in one step.
//
// The draft's row follows the target's row by content, not by a journal: it remembers which
// tokens its KV holds ([0, n) of the row) and, before each proposal, keeps the longest prefix
// that equals the row's history, feeds the rest as one chunk and drafts from there. Rejected
// drafts are thus rolled back when the next proposal starts (their positions are written over; a
// contiguous cache reads only [0, pos]), the target's kept tokens that the draft did not propose
// are fed, and a session's next turn or a new request on the row reuses whatever prefix matches.
//
// The draft proposes its argmax (q one-hot), which is what Sampler::SampleVerify verifies
// exactly: greedy output equals decoding without speculation, sampled output keeps the target's
// distribution and equals it token for token. Deterministic: the draft's kernels are batch- and
// thread-invariant like the target's, and ties go to the lowest id.
#pragma once

#include <memory>
#include <vector>

#include "kvcache/kv_cache.h"
#include "model/decoder_model.h"
#include "serving/proposer.h"

namespace wc {

class DraftModelSource final : public ProposerSource {
 public:
  // draft: a whole model (not tensor parallel), outliving the source. user_rows, ctx: the serving
  // loop's (the draft keeps one contiguous row per user row, ctx positions). kv_dtype: the draft
  // cache's format. n_proposable: proposals are the argmax over ids [0, n_proposable) only (the
  // tokenizer's pieces: rows a padded LM head adds are never proposed); at most the draft's
  // vocab_size.
  DraftModelSource(const DecoderModel& draft, int user_rows, int ctx, KVDType kv_dtype,
                   int n_proposable);
  std::unique_ptr<Proposer> Make(int user_row) override;

  // The draft's vocabulary: a row whose history holds an id at or past it gets no proposals.
  int draft_vocab() const { return draft_.config().vocab_size; }
  // Draft Forward calls and tokens they fed, over the source's life (for figures).
  int64_t forward_calls() const { return forward_calls_; }
  int64_t tokens_fed() const { return tokens_fed_; }

  // The up to k tokens the draft proposes after `history` on `user_row` (what a row's proposer
  // calls); empty if k <= 0 or history is empty. Requires history.size() - 1 + k <= ctx and every
  // id of history below draft_vocab().
  std::vector<int> Draft(int user_row, const std::vector<int>& history, int k);

 private:
  // The argmax of one row of logits over [0, n_proposable_), lowest id on ties.
  int Argmax(const float* logits) const;

  const DecoderModel& draft_;
  KVCache cache_;  // [user_rows] contiguous rows of ctx positions
  int ctx_;
  int n_proposable_;
  std::vector<std::vector<int>> cached_;  // [user_rows][n]: the tokens whose K/V the row holds
  std::vector<float> logits_;             // [1, vocab] scratch
  int64_t forward_calls_ = 0, tokens_fed_ = 0;
};

}  // namespace wc
