// The BPE model of a Hugging Face tokenizer.json ("model": {"type": "BPE", ...}): a pre-tokenized
// word's chars looked up in the vocabulary (with continuing_subword_prefix / end_of_word_suffix,
// byte fallback to <0xXX> tokens, or the unk token), then merged pair by pair, the lowest merge
// rank first and, among equal ranks, the leftmost - the order HF's Word::merge_all applies them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace wc {

class BpeModel {
 public:
  // From the "model" object; `what` names it in errors ("tokenizer.json: key 'model'"). Throws
  // wc::Error for a missing or mistyped key, merges naming tokens the vocabulary lacks, an unk
  // token outside the vocabulary, or dropout (sampling) other than null / 0.
  BpeModel(const nlohmann::json& model, const std::string& what);

  // Appends the ids of `word` (one pre-tokenized piece, valid UTF-8, non-empty) to *ids.
  void Tokenize(std::string_view word, std::vector<int>* ids) const;

  // The vocabulary: token string -> id, and id -> token string ("" for ids it lacks).
  const std::unordered_map<std::string, int>& vocab() const { return vocab_; }
  const std::vector<std::string>& tokens() const { return tokens_; }

 private:
  struct Merge {
    int rank;
    int new_id;
  };
  static uint64_t PairKey(int a, int b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* FindMerge(int a, int b) const;

  std::unordered_map<std::string, int> vocab_;
  std::vector<std::string> tokens_;             // [max id + 1]
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank, merged id
  std::optional<int> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  int byte_ids_[256];  // byte_fallback: the id of <0xXX>, or -1
  std::string prefix_, suffix_;
};

}  // namespace wc
