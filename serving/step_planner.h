// prepare_inputs' choice (seed 001): which user rows feed how many tokens in the next forward call.
// Decoding rows come first, one token each, so a long prompt delays their next token by at most
// one chunk; prefilling rows share what is left of the token budget in admission order (chunked
// prefill, as vLLM and TensorRT-LLM's in-flight batching do).
#pragma once

#include <cstdint>
#include <vector>

namespace wc {

struct RowDemand {
  int row = 0;
  int remaining = 0;  // tokens the row still has to feed (>= 1)
  // Feeding sampled tokens (else a prompt): one, or one per live beam of a beam request - those
  // are planned together or not at all (their step needs every beam's logits).
  bool decoding = false;
  int64_t admit_seq = 0;  // admission order: lower was admitted first
};

struct PlannedChunk {
  int row = 0;
  int n_tokens = 0;  // >= 1
};

// At most max_batch_tokens (>= 1) tokens in all. Decoding rows are taken in row order starting at
// the first row >= `rotate` (wrapping), each whole or skipped when it does not fit what is left, so
// when the budget is smaller than the decoding rows' tokens every row still gets its turn across
// steps (a row's demand must not exceed max_batch_tokens). Returns chunks for a non-empty `rows`
// with at least one token; rows that get nothing are left out.
std::vector<PlannedChunk> PlanStep(std::vector<RowDemand> rows, int max_batch_tokens, int rotate);

}  // namespace wc
