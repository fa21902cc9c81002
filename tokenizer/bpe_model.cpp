#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/unicode.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc {
namespace {

std::optional<std::string> OptionalString(const nlohmann::json& obj, const char* key,
                                          const std::string& what) {
  return JsonFind<std::string>(obj, key, what);
}

// Merges as ["a b", ...] (tokenizers < 0.20) or [["a", "b"], ...].
std::pair<std::string, std::string> MergePair(const nlohmann::json& m, size_t i,
                                              const std::string& what) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    const size_t space = s.find(' ', 1);  // HF splits at the first space after the first char
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
      throw Error(Cat(what, ": key 'merges'[", i, "] \"", Printable(s, 60),
                      "\" is not two tokens separated by one space"));
    return {s.substr(0, space), s.substr(space + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  throw Error(
      Cat(what, ": key 'merges'[", i, "] must be \"a b\" or [\"a\", \"b\"], got ", JsonSnippet(m)));
}

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, const std::string& what) {
  if (!model.contains("vocab") || !model["vocab"].is_object())
    throw Error(Cat(what, ": key 'vocab' must be an object of token: id"));
  int max_id = -1;
  for (const auto& [token, id_json] : model["vocab"].items()) {
    const int id = JsonAs<int>(id_json, Cat(what, ": key 'vocab'[\"", Printable(token, 40), "\"]"));
    if (id < 0 || id >= (1 << 24))
      throw Error(Cat(what, ": key 'vocab'[\"", Printable(token, 40), "\"] id ", id,
                      " is outside [0, 16777216)"));
    vocab_.emplace(token, id);
    max_id = std::max(max_id, id);
  }
  tokens_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : vocab_) tokens_[static_cast<size_t>(id)] = token;

  if (auto dropout = JsonFind<double>(model, "dropout", what); dropout && *dropout != 0.0)
    throw Error(Cat(what, ": key 'dropout' ", *dropout,
                    " is not supported (BPE dropout samples; wormchat tokenizes exactly)"));
  prefix_ = OptionalString(model, "continuing_subword_prefix", what).value_or("");
  suffix_ = OptionalString(model, "end_of_word_suffix", what).value_or("");
  fuse_unk_ = JsonFind<bool>(model, "fuse_unk", what).value_or(false);
  byte_fallback_ = JsonFind<bool>(model, "byte_fallback", what).value_or(false);
  ignore_merges_ = JsonFind<bool>(model, "ignore_merges", what).value_or(false);
  if (auto unk = OptionalString(model, "unk_token", what)) {
    auto it = vocab_.find(*unk);
    if (it == vocab_.end())
      throw Error(
          Cat(what, ": key 'unk_token' \"", Printable(*unk, 40), "\" is not in the vocabulary"));
    unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = vocab_.find(name);
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }

  const auto merges = model.find("merges");
  if (merges == model.end() || merges->is_null()) return;
  if (!merges->is_array()) throw Error(Cat(what, ": key 'merges' must be an array"));
  merges_.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const auto [a, b] = MergePair((*merges)[i], i, what);
    const auto ia = vocab_.find(a), ib = vocab_.find(b);
    const std::string b_rest = b.substr(std::min(prefix_.size(), b.size()));
    const auto inew = vocab_.find(a + b_rest);
    if (ia == vocab_.end() || ib == vocab_.end() || inew == vocab_.end())
      throw Error(Cat(what, ": key 'merges'[", i, "] (\"", Printable(a, 30), "\", \"",
                      Printable(b, 30), "\") names a token not in the vocabulary: \"",
                      Printable(ia == vocab_.end()   ? a
                                : ib == vocab_.end() ? b
                                                     : a + b_rest,
                                40),
                      "\""));
    // The first occurrence of a pair keeps its rank (HF builds a map, the later ones overwrite
    // it: a tokenizer.json never repeats a pair).
    merges_[PairKey(ia->second, ib->second)] = Merge{static_cast<int>(i), inew->second};
  }
}

const BpeModel::Merge* BpeModel::FindMerge(int a, int b) const {
  const auto it = merges_.find(PairKey(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::Tokenize(std::string_view word, std::vector<int>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  // Symbols: ids in a doubly linked list (prev / next indices; removed ones have len 0).
  struct Symbol {
    int id;
    int prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int id) {
    const int n = static_cast<int>(symbols.size());
    symbols.push_back(Symbol{id, n - 1, n + 1, true});
  };
  int pending_unk = -1;  // the unk standing for the chars since the last token, or -1
  std::string piece;
  for (size_t p = 0; p < word.size();) {
    const size_t start = p;
    unicode::Next(word, &p);
    piece.assign(word.substr(start, p - start));
    if (start > 0 && !prefix_.empty()) piece.insert(0, prefix_);
    if (p == word.size() && !suffix_.empty()) piece += suffix_;
    const auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(it->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : piece) all = all && byte_ids_[b] >= 0;
      if (all) {  // HF leaves a pending unk where it is: after these bytes
        for (unsigned char b : piece) add(byte_ids_[b]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = *unk_id_;
    }
    // No token, no byte fallback, no unk: the char is dropped, as HF does.
  }
  if (pending_unk >= 0) add(pending_unk);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  struct Candidate {
    int rank, pos, new_id;
    bool operator<(const Candidate& o) const {  // max-heap: the lowest rank, then leftmost, on top
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (const Merge* m = FindMerge(symbols[i].id, symbols[i + 1].id))
      queue.push(Candidate{m->rank, static_cast<int>(i), m->new_id});
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    const Merge* m = FindMerge(left.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;  // a stale entry
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0)
      if (const Merge* pm = FindMerge(symbols[static_cast<size_t>(left.prev)].id, left.id))
        queue.push(Candidate{pm->rank, left.prev, pm->new_id});
    if (left.next >= 0)
      if (const Merge* nm = FindMerge(left.id, symbols[static_cast<size_t>(left.next)].id))
        queue.push(Candidate{nm->rank, top.pos, nm->new_id});
  }
  for (const Symbol& s : symbols)
    if (s.alive) ids->push_back(s.id);
}

}  // namespace wc
