// A batch of tokens for one forward pass of a decoder model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace wc {

// A set of tokens to run together: any mix of user rows and positions (prefill chunks, one decode
// token per user row, ...). Entry i writes its K/V at (user_rows[i], positions[i]) and attends to
// positions [0, positions[i]] of its row, so a prompt may be fed whole or token by token with
// identical results. (user_row, position) pairs must be distinct within a batch.
struct TokenBatch {
  std::vector<int32_t> tokens;      // [n]
  std::vector<int32_t> user_rows;   // [n]
  std::vector<int32_t> positions;   // [n]
  std::vector<int32_t> logit_rows;  // entries whose logits are wanted, in output order

  void Add(int token, int user_row, int pos, bool want_logits) {
    if (want_logits) logit_rows.push_back(static_cast<int32_t>(tokens.size()));
    tokens.push_back(token);
    user_rows.push_back(user_row);
    positions.push_back(pos);
  }
  size_t size() const { return tokens.size(); }
};

}  // namespace wc
