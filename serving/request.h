// What a client hands the serving loop (a Request), what it hears back while the request runs (a
// RequestObserver), and how the request ended (a RequestResult).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serving/beam_search.h"
#include "serving/proposer.h"
#include "serving/sampler.h"

namespace wc {

using RequestId = uint64_t;  // 1, 2, ... in submission order
using SessionId = uint64_t;  // 0 = none

// How a request ended. Names (StopReasonName): eos, stop, length, context, cancelled, error.
// kEos: the model's EOS or another of its end-of-generation ids (ModelConfig::EndsGeneration: a
// GGUF vocabulary's EOT, ...), the last token of the result, its text left out.
enum class StopReason { kEos, kStopString, kMaxTokens, kContextFull, kCancelled, kError };
const char* StopReasonName(StopReason reason);
// OpenAI's finish_reason of a reply that ran: "stop" (EOS or a stop string) or "length" (max
// tokens or a full context); nullptr for a cancelled or failed one.
const char* FinishReasonName(StopReason reason);

struct RequestResult;

// Hears about one request. Every call comes from the loop's thread, never while the loop holds its
// lock (so a callback may call Submit/Cancel/status), in this order: OnPrefill after each chunk of
// the prompt, per sampled token OnToken then OnText with whatever text that token completed
// (possibly none), and OnFinish exactly once at the end. Callbacks should be quick: the loop waits
// for them.
//
// Beam requests (Request::beams) stream nothing while they run - the best hypothesis is known only
// at the end: OnToken is never called, and OnText once, just before OnFinish, with the best
// sequence's text.
class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  // The sampled token and the logits it was sampled from ([vocab]; valid during the call only).
  virtual void OnToken(int token, const float* logits, int vocab) {
    (void)token, (void)logits, (void)vocab;
  }
  // Final text: complete UTF-8, control bytes removed, never past a stop string.
  virtual void OnText(std::string_view delta) { (void)delta; }
  // After each prefill chunk: `fed` of the `total` prompt tokens are in the KV cache, and the
  // request's user row holds `context` tokens in all (a session's earlier turns included).
  virtual void OnPrefill(int fed, int total, int context) { (void)fed, (void)total, (void)context; }
  virtual void OnFinish(const RequestResult& result) = 0;
};

struct Request {
  // The prompt: token ids, or (when prompt_ids is empty) text for the loop's tokenizer.
  std::vector<int> prompt_ids;
  std::string prompt_text;
  // Chat framing. Text is framed as a user turn with the model's chat format (one-shot: [bos] +
  // turn, as `generate`; in a session, [eos] + turn after the first turn, as `chat`); ids are taken
  // as already framed. Either way, with a chat format, its stop strings apply and the reply's
  // leading space is trimmed. Without a chat format (or chat = false) the prompt is fed as it is.
  bool chat = false;
  SamplingParams sampling;
  // Set: beam search with these parameters (issue 13; serving/beam_search.h) instead of sampling -
  // `sampling` and `seed` are ignored, and num_beams 1 is greedy. The request takes num_beams user
  // rows; the prompt is prefilled once and its KV blocks are shared by the beams. In a session the
  // conversation goes on with the best hypothesis.
  std::optional<BeamParams> beams;
  // Speculative decoding (issue 34): up to `speculate_k` tokens proposed by prompt lookup (unless
  // `proposer_source` names another proposer; serving/proposer.h: the longest n-gram of at most
  // `lookup_ngram` tokens ending the row's tokens that occurred before, and what followed it) ride
  // along with each decoded token and are verified in the same step; the row keeps the ones its own
  // sampling confirms (Sampler::SampleVerify), so the tokens are exactly those of `speculate_k` =
  // 0. 0: off; at most kMaxSpeculateK. Beam requests do not speculate.
  int speculate_k = 0;
  int lookup_ngram = 3;  // 1..kMaxLookupNgram
  // Who proposes instead of prompt lookup (serving/proposer.h): a draft model
  // (serving/draft_proposer.h), a scripted sequence (serving/scripted_proposer.h). Null: prompt
  // lookup over `lookup_ngram`-grams. Only read when speculate_k > 0.
  std::shared_ptr<ProposerSource> proposer_source;
  // Seeds this request's RNG stream. In a session only the first turn's seed is used: later turns
  // continue the session's stream.
  uint64_t seed = 0;
  int max_new_tokens = kDefaultMaxNewTokens;  // >= 0
  std::vector<std::string> stop;  // non-empty strings; the text before a stop string is kept
  bool stop_at_eos = true;  // the model's end-of-generation ids end the reply (EOS, a GGUF EOT...)
  // 0: one-shot (the user row is freed when the request ends). Else a session from
  // ServingLoop::OpenSession(): the prompt is appended to the session's row and KV, which outlive
  // the request; at most one request per session runs at a time.
  SessionId session = 0;
  bool reset_session = false;  // forget the session's tokens first (its RNG stream goes on)
  // Sessions: set the session's RNG stream to this position before this request samples (a chat's
  // /undo and /retry rewind the stream to where an earlier reply began); unset: it goes on.
  std::optional<Rng::State> session_rng;
  std::shared_ptr<RequestObserver> observer;  // required
};

// One returned hypothesis of a beam request.
struct BeamSequence {
  std::vector<int> tokens;  // generated ids, a final EOS included when it ended the hypothesis
  std::string text;         // its text, cut before a stop string
  double score = 0;         // sum of log-probabilities / length^length_penalty
  // kEos or kStopString ("stop"), kMaxTokens or kContextFull ("length").
  StopReason reason = StopReason::kMaxTokens;
};

struct RequestResult {
  RequestId id = 0;
  StopReason reason = StopReason::kMaxTokens;
  std::string error;  // reason kError: what was wrong, one line
  // reason kError: the request itself was bad and was refused before it ran (an invalid value, a
  // prompt that cannot fit, an unknown session); false when the loop failed it (shutdown, a
  // forward pass that failed).
  bool rejected = false;
  std::vector<int> tokens;  // sampled ids, including a final EOS if one was sampled
  std::string text;         // exactly what OnText delivered
  // Beam requests: the best num_return hypotheses, best first (tokens, text and reason above are
  // the first one's; a cancelled or failed beam request returns none).
  std::vector<BeamSequence> sequences;
  // The most KV bytes this request's rows held at once, what beams share counted once (paged:
  // whole blocks; a session's include its earlier turns).
  int64_t kv_bytes_peak = 0;
  int prompt_tokens = 0;  // tokens this request fed before generating (its framed prompt)
  // Of those, the tokens whose K/V came from the prefix cache instead of being computed (whole
  // blocks; 0 with the cache off).
  int cached_tokens = 0;
  int user_row = -1;  // the row it ran in (-1 if never admitted)
  // Speculative decoding: tokens proposed, and of those the ones its sampling confirmed.
  int spec_proposed = 0, spec_accepted = 0;
  // Sessions, once admitted: the session's RNG stream position before this request sampled and
  // after it ended (equal for beam and greedy requests, which draw nothing).
  Rng::State rng_before{}, rng_after{};
  int session_pos = 0;  // sessions: tokens the session holds now (KV plus any not yet fed)
  // Steady-clock seconds since the loop started: submitted, admitted to a row, first token
  // sampled, finished (admitted/first_token are 0 when that never happened).
  double t_submit = 0, t_admit = 0, t_first_token = 0, t_finish = 0;
};

}  // namespace wc
