// Draft tokens for speculative decoding (issue 34): prompt lookup, which proposes what followed the
// latest earlier occurrence of the row's last few tokens, and AdaptiveK, how many tokens a row
// proposes next. Both are pure bookkeeping over token ids: no model, no RNG, no threads; the
// serving loop verifies the proposals (Sampler::SampleVerify) and feeds back what it kept.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "serving/run_options.h"

namespace wc {

// What proposes one speculating request's draft tokens. The serving loop makes one per admitted
// request (ProposerSource::Make), calls Reset once with the row's history (a session's earlier
// turns, then the prompt), Append with every token the row keeps (never a rejected proposal), and
// Propose(k) before each verify step; all on the loop's thread. The proposals must be a
// deterministic function of the history (and of the source's fixed settings): they decide the
// verify chunks, and the determinism contract asks the same chunks on every run. A proposer whose
// choice is one token for sure (q one-hot: prompt lookup, a scripted sequence, a draft model's
// argmax) is what Sampler::SampleVerify verifies exactly.
class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual void Reset(const std::vector<int>& history) = 0;
  virtual void Append(int token) = 0;
  // At most k token ids, each in [0, the target's vocab_size); empty: nothing to propose.
  virtual std::vector<int> Propose(int k) = 0;
};

// Makes the proposer of each speculating request as it is admitted on `user_row` (a draft model
// keeps its own KV on the row of that number). Shared by the requests that use it; called on the
// loop's thread only.
class ProposerSource {
 public:
  virtual ~ProposerSource() = default;
  virtual std::unique_ptr<Proposer> Make(int user_row) = 0;
};

// The reference lookup, by scanning: for n from min(max_ngram, size - 1) down to 1, the n-gram
// ending at the history's last token is looked for at every earlier end position, latest first;
// the first match found (the longest n-gram, at its most recent earlier occurrence) proposes the
// up to k tokens that followed it, fewer if the history ends first. Returns an empty vector if no
// earlier occurrence of even the last token exists, or if k <= 0. O(size * max_ngram^2) in the
// worst case; PromptLookupProposer gives the same answer from an index. max_ngram in
// [1, kMaxLookupNgram].
std::vector<int> PromptLookupScan(const std::vector<int>& history, int max_ngram, int k);

// Prompt lookup over one row's history (prompt + output so far), indexed as tokens arrive.
//
// Which occurrence: the longest n-gram wins over a shorter one wherever it is; among occurrences
// of that n-gram, the most recent earlier one. The systems compared differ here: vLLM's n-gram
// proposer (v1 ngram_proposer.py, a KMP scan of the reversed history) and TensorRT-LLM's
// (is_use_oldest = true by default) take the earliest occurrence; llama.cpp's ngram-simple draft
// takes the last one in the history, and its n-gram cache drafts each next token from follow-up
// counts instead. We take the most recent: the text being written continues the latest context
// (a chat repeating its last answer, a rewrite of the passage just quoted, a loop the model is in),
// an index of "last position" is what appending updates in O(1), and the answer is unique, so it
// never depends on a hash map's iteration order. The one cost: an occurrence overlapping the
// suffix itself (a run like "a b a b a b") proposes only the tokens up to the end of the history.
//
// The index: a trie of reversed n-grams in one hash map. The node of an n-gram ending at position
// e is keyed by (node of the (n-1)-gram ending at e, token e - n + 1), with the 1-grams under a
// root; each node holds the latest end position seen. Only n-grams ending before the last token
// are indexed (those ending at it join when the next token arrives), so a lookup never finds the
// suffix itself. Append is O(max_ngram) hash operations, Propose O(max_ngram + k); memory is at
// most size * max_ngram nodes (about 1.2 MB for 8,192 tokens and n = 3). Lookups only: results
// never depend on the map's iteration order.
class PromptLookupProposer final : public Proposer {
 public:
  // max_ngram: the longest n-gram matched (--lookup-ngram), in [1, kMaxLookupNgram]; throws
  // wc::Error naming --lookup-ngram otherwise.
  explicit PromptLookupProposer(int max_ngram);
  // Replaces the history (a new request on the row, or a chat turn undone): O(size * max_ngram).
  void Reset(const std::vector<int>& history) override;
  // One more token of the row's history (a prompt token or a token the row kept). token >= 0.
  void Append(int token) override;
  // The up to k tokens that followed the most recent earlier occurrence of the longest n-gram
  // (n <= max_ngram) ending at the last token; fewer if the history ends first; empty if none
  // occurred or k <= 0. Equal to PromptLookupScan(history(), max_ngram(), k).
  std::vector<int> Propose(int k) override { return Lookup(k); }
  std::vector<int> Lookup(int k) const;

  int max_ngram() const { return max_ngram_; }
  const std::vector<int>& history() const { return history_; }  // [size] token ids

 private:
  struct Node {
    uint32_t id;       // this n-gram's node id, the parent half of its children's keys
    int32_t last_end;  // the latest position of its last token among the indexed ones
  };
  static constexpr uint32_t kRoot = 0xffffffffu;  // the parent of every 1-gram
  static uint64_t Key(uint32_t parent, int token) {
    return (uint64_t{parent} << 32) | static_cast<uint32_t>(token);
  }
  // Indexes the n-grams (n = 1..max_ngram) ending at position end.
  void Index(int end);

  int max_ngram_;
  std::vector<int> history_;                 // [size] token ids
  std::unordered_map<uint64_t, Node> trie_;  // Key(parent id, token) -> node
  uint32_t next_id_ = 0;
};

// How many tokens a row proposes in its next verify step, adapted to how many it kept.
//
// The rule (additive increase, multiplicative decrease, as TCP's window): a row starts at k_max;
// after a step that proposed P > 0 tokens of which A were accepted,
//  - all accepted (A == P): k = min(k_max, k + 1), growing back one token per fully kept step,
//    and any back-off ends;
//  - mostly rejected (2A < P): k = max(1, k / 2), so three bad steps take 8 to 1; a row already
//    at k = 1 whose one proposal failed backs off instead: it proposes nothing for the next 1
//    step, then 2, 4, up to kMaxBackoffSteps after each further failure;
//  - otherwise k unchanged.
// A step that proposed nothing (P == 0: backing off, or no proposal found) counts one step of the
// back-off down and changes nothing else. The back-off bounds what proposals that always fail
// cost: a verify step of 2 tokens costs about 5% more than a plain decode step on model B
// (docs/performance.md), so without it a row of text the proposer never guesses would pay 5% on
// every step; with it, one failed step in every kMaxBackoffSteps + 1 (under 1%).
// Integer state only: the same sequence of (P, A) gives the same k on every run, which the
// determinism contract needs (the proposals decide the verify chunks). Neither llama.cpp (a fixed
// --draft-max, drafts below --draft-min dropped) nor vLLM (a fixed num_speculative_tokens)
// adapts k per row; the issue asks that a row whose proposals are mostly rejected propose fewer.
class AdaptiveK {
 public:
  static constexpr int kMaxBackoffSteps = 8;
  // k_max: --speculate-k, in [1, kMaxSpeculateK]; throws wc::Error naming --speculate-k otherwise.
  explicit AdaptiveK(int k_max);
  // The number of tokens to propose next, in [1, k_max]; 0 while backing off (propose nothing).
  int k() const { return skip_ > 0 ? 0 : k_; }
  int k_max() const { return k_max_; }
  // Feeds back one step: proposed tokens of which the first accepted were kept (0, 0: nothing was
  // proposed). Requires 0 <= accepted <= proposed <= k_max (an internal check).
  void Record(int proposed, int accepted);
  // Back to k_max, no back-off (a new request on the row).
  void Reset() {
    k_ = k_max_;
    skip_ = backoff_ = 0;
  }

 private:
  int k_max_;
  int k_;
  int skip_ = 0;     // steps left to propose nothing
  int backoff_ = 0;  // the last back-off's length (0: none since the last success)
};

}  // namespace wc
