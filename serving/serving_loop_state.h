// The serving loop's private state (serving_loop.cpp, serving_loop_step.cpp): a request before
// admission, a request in its user row, a session, a user row. Only the loop's thread touches it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "serving/beam_search.h"
#include "serving/proposer.h"
#include "serving/serving_loop.h"
#include "serving/text_stream.h"

namespace wc {

// Streams a request's final text to its observer.
class ObserverSink : public TextSink {
 public:
  explicit ObserverSink(RequestObserver& observer) : observer_(observer) {}
  void Write(std::string_view text) override {
    if (!text.empty()) observer_.OnText(text);
  }

 private:
  RequestObserver& observer_;
};

struct ServingLoop::Pending {
  RequestId id = 0;
  Request req;
  std::vector<int> ids;  // one-shot: the framed prompt; sessions: framed at admission
  std::string error;     // non-empty: the request is bad and ends at the next step
  double t_submit = 0;
};

// A beam request's state beside its Running (issue 13): the search, the rows its beams live in.
struct ServingLoop::BeamRun {
  explicit BeamRun(const BeamParams& params) : search(params) {}
  BeamSearch search;
  std::vector<int> rows;          // [num_beams] user rows; live beam i is in rows[i]; rows[0] leads
  std::vector<std::string> stop;  // the request's stop strings and the chat format's
  bool trim_leading_space = false;
  bool prefilled = false;  // the prompt is in the leader's KV (the first step has run)
  int prompt_end = 0;      // the leader's cur_pos after the prompt
  int steps = 0;           // steps run: tokens each live beam holds
  bool context_full = false;
  int64_t kv_bytes_peak = 0;
};

struct ServingLoop::Running {
  RequestId id = 0;
  Request req;
  std::unique_ptr<Sampler> own_sampler;  // one-shot requests
  Sampler* sampler = nullptr;            // own_sampler or the session's
  std::unique_ptr<ObserverSink> sink;
  std::unique_ptr<TextStream> stream;  // sampled requests
  std::unique_ptr<BeamRun> beam;       // beam requests
  // Tokens not yet in the KV: the prompt, then each sampled token (beams: one per live beam, fed
  // into beam->rows[i] at once).
  std::vector<int> to_feed;
  size_t fed = 0;         // of to_feed
  bool decoding = false;  // to_feed holds sampled tokens (not the prompt)
  // Speculating requests (Request::speculate_k > 0): the proposer (prompt lookup's index, a draft
  // model's row, ...) fed with the row's tokens (the prompt and every token sampled), how many
  // tokens to propose next, and how many of to_feed's are proposals (after the one sampled token:
  // to_feed = [token, p1..p_proposed]).
  std::unique_ptr<Proposer> proposer;
  std::unique_ptr<AdaptiveK> adapt_k;
  int proposed = 0;
  int64_t admit_seq = 0;
  RequestResult result;
};

struct ServingLoop::Session {
  int row = -1;                      // the user row it holds, once admitted
  std::unique_ptr<Sampler> sampler;  // its RNG stream, from the first turn's seed
  std::vector<int> pending;          // tokens of the conversation not fed yet
  bool had_turn = false;
  bool busy = false;  // a request of this session is running
};

struct ServingLoop::Row {
  std::unique_ptr<Running> run;
  SessionId session = 0;    // held by this session (also between its requests)
  int cur_pos = 0;          // tokens in the row's KV
  int reserved_blocks = 0;  // paged: blocks admission promised this row (a beam request's: all on
                            // its leader row)
  int leader = -1;          // a beam of the request whose leader is this row (run stays empty)
  // The token ids in the row's KV, positions [0, cur_pos), while the prefix cache can index them
  // (a beam row's KV is reordered: `tokens_known` false), its full blocks indexed so far, and the
  // index's node of the last of them (the next Insert's parent, found without a walk).
  std::vector<int> tokens;
  bool tokens_known = true;
  int indexed_blocks = 0;
  PrefixCache::Handle index_chain;
};

}  // namespace wc
