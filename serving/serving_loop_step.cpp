// The work of one serving-loop step: pick_prompts (PickPrompts, Admit), prepare_inputs and decode
// (Decode), switch_tokens and push_outputs (SwitchTokens), update_users (Finish, FinishPending).
#include <algorithm>

#include "serving/serving_loop.h"
#include "serving/serving_loop_state.h"
#include "serving/step_planner.h"
#include "util/error.h"

namespace wc {

void ServingLoop::PickPrompts() {
  room_freed_ = false;
  // Bad requests end now, wherever they are in the queue.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->error.empty()) {
      ++it;
      continue;
    }
    FinishPending(**it, StopReason::kError, (*it)->error, /*rejected=*/true);
    it = waiting_.erase(it);
  }
  // FIFO: the head waits for room, and everything behind it waits too (no starvation). A request
  // whose prompt's blocks a running row is prefilling waits for them without holding up the
  // others (it is admitted as soon as they are in the cache).
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const Admission a = Admit(*it);
    if (a == Admission::kNoRoom) break;
    if (a == Admission::kPrefixSoon) {
      ++it;
      continue;
    }
    it = waiting_.erase(it);
  }
}

ServingLoop::Admission ServingLoop::Admit(std::unique_ptr<Pending>& p) {
  const ModelConfig& c = model_.config();
  Request& r = p->req;
  Session* session = nullptr;
  int row = -1;
  if (r.session != 0) {
    bool open;
    {
      std::lock_guard<std::mutex> lock(mu_);
      open = open_sessions_.count(r.session) != 0;
    }
    if (!open) {  // FinishPending takes the lock and calls the observer: not under mu_
      FinishPending(*p, StopReason::kError, Cat("session ", r.session, " was closed"),
                    /*rejected=*/true);
      return Admission::kDone;
    }
    session = &sessions_[r.session];
    if (session->busy) return Admission::kNoRoom;  // its previous request is still running
    row = session->row;
  }
  if (row < 0) {
    for (int i = 0; i < options_.user_rows && row < 0; ++i)
      if (RowFree(i)) row = i;
    if (row < 0) return Admission::kNoRoom;  // every row is busy
  }
  // A beam request's other beams take free rows too.
  std::vector<int> beam_rows{row};
  if (r.beams) {
    for (int i = 0;
         i < options_.user_rows && static_cast<int>(beam_rows.size()) < r.beams->num_beams; ++i)
      if (i != row && RowFree(i)) beam_rows.push_back(i);
    if (static_cast<int>(beam_rows.size()) < r.beams->num_beams) return Admission::kNoRoom;
  }
  Row& slot = rows_[row];
  const bool reset = session != nullptr && r.reset_session;
  const int cur_pos = reset ? 0 : slot.cur_pos;
  std::vector<int> feed;
  if (session != nullptr) {
    std::vector<int> turn;
    try {
      turn = !r.prompt_ids.empty()
                 ? r.prompt_ids
                 : EncodeTurn(*tokenizer_, chat_format_, r.prompt_text, r.chat,
                              reset || !session->had_turn, c.bos_token_id, c.eos_token_id);
    } catch (const Error& e) {
      FinishPending(*p, StopReason::kError, e.what(), /*rejected=*/true);
      return Admission::kDone;
    }
    if (turn.empty()) {
      FinishPending(*p, StopReason::kError, "the prompt is empty", /*rejected=*/true);
      return Admission::kDone;
    }
    if (!reset) feed = session->pending;
    feed.insert(feed.end(), turn.begin(), turn.end());
    if (cur_pos + static_cast<int64_t>(feed.size()) >= options_.ctx) {
      FinishPending(
          *p, StopReason::kError,
          Cat("the conversation holds ", cur_pos, " tokens and this turn adds ", feed.size(),
              ": more than the context of ", options_.ctx, " tokens allows; reset the session"),
          /*rejected=*/true);
      return Admission::kDone;
    }
  } else {
    feed = p->ids;  // a copy: the request stays queued, prompt and all, if there is no room yet
  }
  const int need = std::max(BlocksNeeded(cur_pos + static_cast<int>(feed.size()), r.max_new_tokens,
                                         r.beams ? r.beams->num_beams : 1),
                            reset ? 0 : slot.reserved_blocks);
  if (cache_->paged()) {
    if (need > cache_->n_blocks()) {
      FinishPending(*p, StopReason::kError,
                    Cat("the conversation plus max_new_tokens need ", need,
                        " KV blocks, more than the whole pool of ", cache_->n_blocks()),
                    /*rejected=*/true);
      return Admission::kDone;
    }
    // Blocks it would take from the cache that a row holds already cost nothing new (those only
    // the cache holds are counted: taking them keeps them from eviction).
    int shared = 0;
    if (cur_pos == 0 && prefix_) {
      LoadStored(feed);
      const std::vector<int> cached = PeekPrefix(feed);
      if (PrefixInFlight(feed, static_cast<int>(cached.size()))) return Admission::kPrefixSoon;
      for (int b : cached)
        if (cache_->block_refs(b) > 1) ++shared;
    }
    if (CommittedBlocks() - slot.reserved_blocks + need - shared > cache_->n_blocks())
      return Admission::kNoRoom;
  }

  // Admitted.
  if (reset) {
    cache_->ResetUser(row);
    slot.cur_pos = 0;
    slot.tokens.clear();
    slot.tokens_known = true;
    slot.indexed_blocks = 0;
    slot.index_chain = {};
    session->pending.clear();
    session->had_turn = false;
  }
  const int prompt_tokens = static_cast<int>(feed.size());
  const int cached_tokens = slot.cur_pos == 0 ? AdoptPrefix(row, feed) : 0;
  reserved_blocks_ += need - slot.reserved_blocks;
  slot.reserved_blocks = need;
  auto run = std::make_unique<Running>();
  run->id = p->id;
  run->req = std::move(p->req);
  run->admit_seq = admit_seq_++;
  const bool framed = chat_format_.has_value() && run->req.chat;
  std::vector<std::string> stop = run->req.stop;
  if (framed) stop.insert(stop.end(), chat_format_->stop.begin(), chat_format_->stop.end());
  if (run->req.beams) {
    run->beam = std::make_unique<BeamRun>(*run->req.beams);
    run->beam->rows = beam_rows;
    run->beam->stop = stop;
    run->beam->trim_leading_space = framed;
    for (size_t i = 1; i < beam_rows.size(); ++i) rows_[beam_rows[i]].leader = row;
    overlap_version_ = -1;  // CommittedBlocks leaves the beams' rows out
  }
  if (session != nullptr) {
    if (session->sampler == nullptr)  // a beam request's sampling parameters are not checked
      session->sampler = std::make_unique<Sampler>(run->beam ? SamplingParams{} : run->req.sampling,
                                                   run->req.seed);
    else if (!run->beam)
      session->sampler->set_params(run->req.sampling);
    run->sampler = session->sampler.get();
    if (run->req.session_rng) session->sampler->set_rng_state(*run->req.session_rng);
    run->result.rng_before = session->sampler->rng_state();
    session->pending.clear();
    session->busy = true;
    session->row = row;
    slot.session = run->req.session;
  } else if (!run->beam) {
    run->own_sampler = std::make_unique<Sampler>(run->req.sampling, run->req.seed);
    run->sampler = run->own_sampler.get();
  }
  run->sink = std::make_unique<ObserverSink>(*run->req.observer);
  run->stream = std::make_unique<TextStream>(stop, *run->sink, /*trim_leading_space=*/framed);
  run->to_feed = std::move(feed);
  if (run->req.speculate_k > 0 && !run->beam) {
    // Lookup over the row's tokens: a session's earlier turns (the row's KV), then this prompt.
    std::vector<int> history = slot.tokens_known ? slot.tokens : std::vector<int>();
    history.insert(history.end(), run->to_feed.begin(), run->to_feed.end());
    if (run->req.proposer_source)
      run->proposer = run->req.proposer_source->Make(row);
    else
      run->proposer = std::make_unique<PromptLookupProposer>(run->req.lookup_ngram);
    run->proposer->Reset(history);
    run->adapt_k = std::make_unique<AdaptiveK>(run->req.speculate_k);
  }
  run->result.id = run->id;
  run->result.prompt_tokens = prompt_tokens;
  run->result.cached_tokens = cached_tokens;
  run->result.user_row = row;
  run->result.t_submit = p->t_submit;
  run->result.t_admit = Now();
  slot.run = std::move(run);
  return Admission::kDone;
}

double ServingLoop::Decode() {
  // prepare_inputs
  std::vector<RowDemand> demands;
  for (int row = 0; row < options_.user_rows; ++row) {
    const Running* run = rows_[row].run.get();
    if (run == nullptr) continue;
    demands.push_back(
        {row, static_cast<int>(run->to_feed.size() - run->fed), run->decoding, run->admit_seq});
  }
  const std::vector<PlannedChunk> plan =
      PlanStep(std::move(demands), options_.max_batch_tokens, rotate_);
  rotate_ = (rotate_ + 1) % options_.user_rows;

  // decode, then switch_tokens / push_outputs / update_users for the rows that got logits.
  double forward_s = 0;
  std::vector<float> logits;  // [rows with logits, vocab_size]
  auto run_chunks = [&](const std::vector<PlannedChunk>& chunks) {
    TokenBatch batch;
    struct Owner {
      int row;       // the request's row (a beam request's leader)
      int n_logits;  // 1, or a beam request's live beams
    };
    std::vector<Owner> logit_owners;  // in the order of the logits rows
    for (const PlannedChunk& ch : chunks) {
      const Running& run = *rows_[ch.row].run;
      if (run.beam && run.decoding) {  // one token for each live beam, in the beam's own row
        for (int i = 0; i < ch.n_tokens; ++i) {
          const int row = run.beam->rows[run.fed + i];
          batch.Add(run.to_feed[run.fed + i], row, rows_[row].cur_pos, /*want_logits=*/true);
        }
        logit_owners.push_back({ch.row, ch.n_tokens});
        continue;
      }
      // A speculating row's verify chunk - its sampled token and the proposals after it - wants
      // logits at every position; otherwise only the last token fed does.
      const bool verify = run.decoding && run.proposed > 0;
      for (int i = 0; i < ch.n_tokens; ++i) {
        const size_t k = run.fed + i;
        const bool last = k + 1 == run.to_feed.size();
        batch.Add(run.to_feed[k], ch.row, rows_[ch.row].cur_pos + i, last || verify);
        if (last) logit_owners.push_back({ch.row, verify ? ch.n_tokens : 1});
      }
    }
    if (prefix_) MakeRoom(StepBlocks(chunks));
    const double t = Now();
    const bool ran =
        model_.Forward(batch, *cache_, &logits, [&] { return ForwardInterrupted(chunks); });
    forward_s += Now() - t;
    // Interrupted by a cancel of one of its requests: nothing of the step counts (no row moves
    // on; the K/V written so far is overwritten when the same positions are fed again). The next
    // step ends the cancelled requests and runs the others' tokens again, bit-identically.
    if (!ran) return false;
    // The most blocks in use is now, before rows that end in this step free theirs.
    peak_blocks_ = std::max(peak_blocks_, BlocksInUse());
    for (const PlannedChunk& ch : chunks) {
      Running& run = *rows_[ch.row].run;
      if (run.beam && run.decoding) {
        for (int i = 0; i < ch.n_tokens; ++i) {
          Row& beam_row = rows_[run.beam->rows[run.fed + i]];
          ++beam_row.cur_pos;
          beam_row.tokens_known = false;  // beams reorder their rows' KV
        }
      } else {
        Row& slot = rows_[ch.row];
        slot.cur_pos += ch.n_tokens;
        if (slot.tokens_known)
          slot.tokens.insert(slot.tokens.end(), run.to_feed.begin() + run.fed,
                             run.to_feed.begin() + run.fed + ch.n_tokens);
        if (!run.decoding) tokens_prefilled_ += ch.n_tokens;
      }
      run.fed += ch.n_tokens;
    }
    // A verify chunk's row is indexed once its rejected positions are rolled back (SwitchTokens).
    if (prefix_)
      for (const PlannedChunk& ch : chunks)
        if (!(rows_[ch.row].run->decoding && rows_[ch.row].run->proposed > 0)) IndexRow(ch.row);
    for (const PlannedChunk& ch : chunks) {
      const Running& run = *rows_[ch.row].run;
      if (!run.decoding)
        run.req.observer->OnPrefill(static_cast<int>(run.fed), static_cast<int>(run.to_feed.size()),
                                    rows_[ch.row].cur_pos);
    }
    const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
    size_t j = 0;
    for (const Owner& o : logit_owners) {
      if (rows_[o.row].run->beam)
        BeamStep(o.row, &logits[j * vocab], o.n_logits);
      else
        SwitchTokens(o.row, &logits[j * vocab], o.n_logits);
      j += o.n_logits;
    }
    return true;
  };
  try {
    if (!run_chunks(plan)) return forward_s;
  } catch (const Error&) {
    // One request's input broke the forward pass (e.g. its activations overflowed). Rerun each row
    // alone - bit-identical, the kernels being batch-invariant - and end only the rows that fail.
    for (const PlannedChunk& ch : plan) {
      try {
        if (!run_chunks({ch})) return forward_s;
      } catch (const Error& e) {
        Finish(ch.row, StopReason::kError, e.what());
      }
    }
  }
  return forward_s;
}

void ServingLoop::SwitchTokens(int row, const float* logits, int n_logits) {
  Row& slot = rows_[row];
  Running& run = *slot.run;
  const ModelConfig& c = model_.config();
  const size_t vocab = static_cast<size_t>(c.vocab_size);
  // A verify chunk fed [token, p1..p_proposed] at positions chunk_start.. (logits i follow position
  // chunk_start + i). Position i decides token i: if it confirms p(i+1), the next position's logits
  // are the ones one-token decoding would have computed, and so on; the first token that differs
  // (or the one after the last proposal) is the row's next token to feed.
  const int proposed = n_logits - 1;
  const std::vector<int> proposals(run.to_feed.end() - proposed, run.to_feed.end());
  const int chunk_start = slot.cur_pos - n_logits;
  bool settled = proposed == 0;
  int accepted = 0;  // proposals confirmed, once settled
  // The row as one-token decoding would have left it at position i: positions past the token and
  // the i proposals confirmed before it are rolled back (their K/V is overwritten when fed again;
  // paged blocks past them go back to the pool).
  auto settle = [&](int i) {
    if (settled) return;
    settled = true;
    const int keep = chunk_start + 1 + i;
    if (keep < slot.cur_pos) {
      slot.cur_pos = keep;
      if (slot.tokens_known) slot.tokens.resize(static_cast<size_t>(keep));
      cache_->TruncateUser(row, keep);
    }
    accepted = i;
    run.result.spec_accepted += i;
    if (prefix_) IndexRow(row);
  };
  run.result.spec_proposed += proposed;
  for (int i = 0; i <= proposed; ++i) {
    const float* l = logits + static_cast<size_t>(i) * vocab;
    if (static_cast<int>(run.result.tokens.size()) >= run.req.max_new_tokens) {
      settle(i);
      Finish(row, StopReason::kMaxTokens);  // max_new_tokens 0: the prompt only
      return;
    }
    int token;
    bool confirmed = false;
    try {
      token = i < proposed ? run.sampler->SampleVerify(l, c.vocab_size, proposals[i], &confirmed)
                           : run.sampler->Sample(l, c.vocab_size);
    } catch (const Error& e) {
      settle(i);
      Finish(row, StopReason::kError, e.what());
      return;
    }
    ++tokens_sampled_;
    if (run.result.tokens.empty()) run.result.t_first_token = Now();
    run.result.tokens.push_back(token);
    if (run.proposer) run.proposer->Append(token);
    run.to_feed.assign(1, token);
    run.fed = 0;
    run.decoding = true;
    run.proposed = 0;
    run.req.observer->OnToken(token, l, c.vocab_size);
    const int cur_pos = chunk_start + 1 + i;  // one-token decoding's, the token not yet fed
    auto end = [&](StopReason reason, bool feed_token) {
      if (!feed_token) run.to_feed.clear();  // EOS or a stop string ends the reply; not fed
      settle(i);
      Finish(row, reason);
    };
    if (run.req.stop_at_eos && c.EndsGeneration(token)) return end(StopReason::kEos, false);
    const std::string_view bytes = tokenizer_ != nullptr
                                       ? std::string_view(tokenizer_->TokenBytes(token))
                                       : std::string_view();
    if (run.stream->Add(bytes)) return end(StopReason::kStopString, false);
    if (cur_pos >= options_.ctx) return end(StopReason::kContextFull, false);
    if (static_cast<int>(run.result.tokens.size()) == run.req.max_new_tokens)
      return end(StopReason::kMaxTokens, true);  // a session feeds the last token next turn
    if (!confirmed) {
      settle(i);
      break;
    }
  }
  settle(proposed);  // every proposal confirmed: the token after them is the next to feed
  if (run.adapt_k) run.adapt_k->Record(proposed, accepted);
  Propose(row);
}

void ServingLoop::Propose(int row) {
  Row& slot = rows_[row];
  Running& run = *slot.run;
  run.proposed = 0;
  if (!run.proposer) return;
  // Every position a proposal takes must be one the request could reach: the last token sampled
  // is never fed, the context ends at ctx, and the row's chunk fits one forward call.
  const int room =
      std::min({run.req.max_new_tokens - static_cast<int>(run.result.tokens.size()) - 1,
                options_.ctx - slot.cur_pos - 2, options_.max_batch_tokens - 1});
  const int k = std::min(run.adapt_k->k(), room);
  if (k < 1) return;
  std::vector<int> proposals = run.proposer->Propose(k);
  // A proposer breaking its contract (more than k, an id outside the vocabulary) costs speed,
  // never exactness or a failed step: the proposals are cut before the first that cannot be fed.
  const int vocab = model_.config().vocab_size;
  size_t n = std::min(proposals.size(), static_cast<size_t>(k));
  for (size_t i = 0; i < n; ++i)
    if (proposals[i] < 0 || proposals[i] >= vocab) n = i;
  run.to_feed.insert(run.to_feed.end(), proposals.begin(), proposals.begin() + n);
  run.proposed = static_cast<int>(n);
}

void ServingLoop::Finish(int row, StopReason reason, std::string error) {
  Row& slot = rows_[row];
  if (slot.run->beam) ReleaseBeams(row);
  std::unique_ptr<Running> run = std::move(slot.run);
  room_freed_ = true;  // a row, KV blocks or a session's turn: what waits may fit now
  RequestResult result = std::move(run->result);
  result.reason = reason;
  result.error = std::move(error);
  if (!run->beam) {
    run->stream->Finish();
    result.text = run->stream->emitted();
    result.kv_bytes_peak = cache_->HeldBytes({row}, slot.cur_pos);
  }
  result.t_finish = Now();
  if (slot.session != 0) {
    Session& session = sessions_[slot.session];
    result.rng_after = session.sampler->rng_state();
    if (run->beam && run->beam->prefilled) {
      // The conversation goes on with the best hypothesis, fed with the next turn (without the
      // EOS or stop token that ended it, as a sampled reply).
      session.pending = result.tokens;
      if (!session.pending.empty() &&
          (result.reason == StopReason::kEos || result.reason == StopReason::kStopString))
        session.pending.pop_back();
    } else {
      session.pending.assign(run->to_feed.begin() + static_cast<int64_t>(run->fed),
                             run->to_feed.end());
    }
    session.had_turn = true;
    session.busy = false;
    const int keep = std::max(BlocksFor(slot.cur_pos), cache_->user_blocks(row));
    reserved_blocks_ += keep - slot.reserved_blocks;
    slot.reserved_blocks = keep;
    result.session_pos = slot.cur_pos + static_cast<int>(session.pending.size());
  } else {
    ReleaseRow(row);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(result.id);
    ++status_.requests_finished;
  }
  run->req.observer->OnFinish(result);
}

void ServingLoop::FinishPending(Pending& p, StopReason reason, std::string error, bool rejected) {
  RequestResult result;
  result.id = p.id;
  result.rejected = rejected;
  result.reason = reason;
  result.error = std::move(error);
  result.t_submit = p.t_submit;
  result.t_finish = Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(p.id);
    ++status_.requests_finished;
  }
  p.req.observer->OnFinish(result);
}

}  // namespace wc
