// A beam request's steps in the serving loop (issue 13). Its W beams live in W user rows; the
// prompt is prefilled once, in the leader row, and after every step the rows are reordered to
// follow the search (KVCache::ReorderUsers): paged, a beam's row takes its parent's KV blocks by
// reference, and the first write into a shared, partly filled block copies that block alone;
// contiguous, the row takes its parent's cache indirection and reads the K/V where it lies.
#include <algorithm>

#include "serving/serving_loop.h"
#include "serving/serving_loop_state.h"
#include "util/error.h"

namespace wc {
namespace {

class NullSink : public TextSink {
 public:
  void Write(std::string_view) override {}
};

}  // namespace

bool ServingLoop::CompletesStop(const BeamRun& beam, const std::vector<int>& tokens,
                                int token) const {
  if (beam.stop.empty() || tokenizer_ == nullptr) return false;
  NullSink sink;
  TextStream stream(beam.stop, sink, /*trim_leading_space=*/false);
  for (int t : tokens) stream.Add(tokenizer_->TokenBytes(t));  // none of them completed one
  return stream.Add(tokenizer_->TokenBytes(token));
}

std::string ServingLoop::HypothesisText(const BeamRun& beam, const std::vector<int>& tokens,
                                        bool drop_last) const {
  if (tokenizer_ == nullptr) return {};
  StringSink sink;
  TextStream stream(beam.stop, sink, beam.trim_leading_space);
  const size_t n = drop_last && !tokens.empty() ? tokens.size() - 1 : tokens.size();
  for (size_t i = 0; i < n; ++i)
    if (stream.Add(tokenizer_->TokenBytes(tokens[i]))) break;
  stream.Finish();
  return stream.emitted();
}

void ServingLoop::BeamStep(int leader, const float* logits, int n_live) {
  Running& run = *rows_[leader].run;
  BeamRun& beam = *run.beam;
  const ModelConfig& c = model_.config();
  const int cur_pos = rows_[leader].cur_pos;  // every live beam's
  if (!beam.prefilled) {
    beam.prefilled = true;
    beam.prompt_end = cur_pos;
  }
  // What the beams hold now, after this step's writes and before the reorder drops any.
  const int64_t held =
      cache_->HeldBytes(std::vector<int>(beam.rows.begin(), beam.rows.begin() + n_live), cur_pos);
  beam.kv_bytes_peak = std::max(beam.kv_bytes_peak, held);

  if (beam.steps >= run.req.max_new_tokens) {  // max_new_tokens 0: the prompt only
    FinishBeams(leader);
    return;
  }
  auto ends = [&](int b, int token) {
    if (run.req.stop_at_eos && c.EndsGeneration(token)) return true;
    return CompletesStop(beam, beam.search.live_tokens(b), token);
  };
  BeamSearch::Step step;
  try {
    step = beam.search.Advance(logits, c.vocab_size, ends);
  } catch (const Error& e) {
    Finish(leader, StopReason::kError, e.what());
    return;
  }
  ++beam.steps;
  tokens_sampled_ += n_live;
  if (run.result.t_first_token == 0) run.result.t_first_token = Now();
  if (beam.search.done()) {
    FinishBeams(leader);
    return;
  }
  if (beam.steps == run.req.max_new_tokens || cur_pos >= options_.ctx) {
    beam.context_full = beam.steps < run.req.max_new_tokens;
    beam.search.Finalize();  // the live beams' new tokens are never fed
    FinishBeams(leader);
    return;
  }
  // Live beam i moves to rows[i], taking its parent's KV of positions [0, cur_pos); rows no beam
  // lives in any more are emptied.
  const int n_next = static_cast<int>(step.parents.size());
  std::vector<int> users(beam.rows.begin(), beam.rows.begin() + std::max(n_live, n_next));
  std::vector<int> parents(users.size(), -1);
  for (int i = 0; i < n_next; ++i) parents[i] = beam.rows[step.parents[i]];
  cache_->ReorderUsers(users, parents, cur_pos);
  for (size_t i = 0; i < users.size(); ++i)
    rows_[users[i]].cur_pos = static_cast<int>(i) < n_next ? cur_pos : 0;
  run.to_feed = step.tokens;
  run.fed = 0;
  run.decoding = true;
}

void ServingLoop::FinishBeams(int leader) {
  Running& run = *rows_[leader].run;
  BeamRun& beam = *run.beam;
  const ModelConfig& c = model_.config();
  if (!beam.search.done()) beam.search.Finalize();
  for (BeamHypothesis& h : beam.search.Best()) {
    BeamSequence seq;
    const bool eos =
        h.ended && run.req.stop_at_eos && !h.tokens.empty() && c.EndsGeneration(h.tokens.back());
    seq.reason = eos                 ? StopReason::kEos
                 : h.ended           ? StopReason::kStopString
                 : beam.context_full ? StopReason::kContextFull
                                     : StopReason::kMaxTokens;
    seq.text = HypothesisText(beam, h.tokens, /*drop_last=*/eos);
    seq.score = h.score;
    seq.tokens = std::move(h.tokens);
    run.result.sequences.push_back(std::move(seq));
  }
  if (run.result.sequences.empty()) run.result.sequences.emplace_back();  // max_new_tokens 0
  const BeamSequence& best = run.result.sequences.front();
  run.result.tokens = best.tokens;
  run.result.text = best.text;
  if (!best.text.empty()) run.req.observer->OnText(best.text);
  Finish(leader, best.reason);
}

void ServingLoop::ReleaseBeams(int leader) {
  Running& run = *rows_[leader].run;
  const BeamRun& beam = *run.beam;
  for (size_t i = 1; i < beam.rows.size(); ++i) {
    cache_->ResetUser(beam.rows[i]);
    rows_[beam.rows[i]] = Row{};
    overlap_version_ = -1;  // CommittedBlocks counts the row again
  }
  run.result.kv_bytes_peak = beam.kv_bytes_peak;
  if (beam.prefilled) {  // the leader keeps the conversation up to the prompt (sessions)
    cache_->ReorderUsers({leader}, {leader}, beam.prompt_end);
    rows_[leader].cur_pos = beam.prompt_end;
  }
}

}  // namespace wc
