#include "serving/proposer.h"

#include <algorithm>

#include "util/error.h"

namespace wc {

namespace {

void ValidateMaxNgram(int max_ngram) {
  run_option::kLookupNgram.Check(max_ngram, "--lookup-ngram");
}

// history[from, from + k) clipped to the history's end.
std::vector<int> Following(const std::vector<int>& history, size_t from, int k) {
  const size_t end = std::min(history.size(), from + static_cast<size_t>(k));
  return std::vector<int>(history.begin() + from, history.begin() + end);
}

}  // namespace

std::vector<int> PromptLookupScan(const std::vector<int>& history, int max_ngram, int k) {
  ValidateMaxNgram(max_ngram);
  const int size = static_cast<int>(history.size());
  if (k <= 0 || size < 2) return {};
  const int* suffix_end = history.data() + size;  // one past the last token
  for (int n = std::min(max_ngram, size - 1); n >= 1; --n) {
    // An earlier occurrence ends at e <= size - 2 and starts at e - n + 1 >= 0.
    for (int e = size - 2; e >= n - 1; --e) {
      const int* occurrence_end = history.data() + e + 1;
      if (std::equal(occurrence_end - n, occurrence_end, suffix_end - n))
        return Following(history, e + 1, k);
    }
  }
  return {};
}

PromptLookupProposer::PromptLookupProposer(int max_ngram) : max_ngram_(max_ngram) {
  ValidateMaxNgram(max_ngram);
}

void PromptLookupProposer::Reset(const std::vector<int>& history) {
  history_.clear();
  trie_.clear();
  next_id_ = 0;
  history_.reserve(history.size());
  trie_.reserve(history.size() * max_ngram_);
  for (const int token : history) Append(token);
}

void PromptLookupProposer::Append(int token) {
  WC_CHECK(token >= 0, "negative token id ", token);
  // The n-grams ending at the old last token become "earlier" ones now.
  if (!history_.empty()) Index(static_cast<int>(history_.size()) - 1);
  history_.push_back(token);
}

void PromptLookupProposer::Index(int end) {
  uint32_t parent = kRoot;
  for (int n = 1; n <= max_ngram_ && end - n + 1 >= 0; ++n) {
    const auto [it, inserted] = trie_.try_emplace(Key(parent, history_[end - n + 1]),
                                                  Node{next_id_, static_cast<int32_t>(end)});
    if (inserted) {
      WC_CHECK(next_id_ < kRoot, "prompt lookup index full");
      ++next_id_;
    } else {
      it->second.last_end = end;
    }
    parent = it->second.id;
  }
}

std::vector<int> PromptLookupProposer::Lookup(int k) const {
  const int size = static_cast<int>(history_.size());
  if (k <= 0 || size < 2) return {};
  // Walk down the trie along the suffix read backwards: the deepest node found is the longest
  // n-gram with an earlier occurrence (every suffix of an occurring n-gram occurs too).
  uint32_t parent = kRoot;
  int latest_end = -1;
  for (int n = 1; n <= max_ngram_ && n <= size - 1; ++n) {
    const auto it = trie_.find(Key(parent, history_[size - n]));
    if (it == trie_.end()) break;
    latest_end = it->second.last_end;
    parent = it->second.id;
  }
  if (latest_end < 0) return {};
  return Following(history_, static_cast<size_t>(latest_end) + 1, k);
}

AdaptiveK::AdaptiveK(int k_max) : k_max_(k_max), k_(k_max) {
  run_option::kSpeculateK.Check(k_max, "--speculate-k");
}

void AdaptiveK::Record(int proposed, int accepted) {
  WC_CHECK(0 <= accepted && accepted <= proposed && proposed <= k_max_, "verify step of ", accepted,
           " accepted of ", proposed, " proposed with k_max ", k_max_);
  if (proposed == 0) {
    if (skip_ > 0) --skip_;
    return;
  }
  if (accepted == proposed) {
    k_ = std::min(k_max_, k_ + 1);
    backoff_ = 0;
  } else if (2 * accepted < proposed) {
    if (k_ == 1) {
      backoff_ = backoff_ == 0 ? 1 : std::min(kMaxBackoffSteps, 2 * backoff_);
      skip_ = backoff_;
    }
    k_ = std::max(1, k_ / 2);
  }
}

}  // namespace wc
