#include "tokenizer/llama_bpe.h"

#include <queue>

#include "tokenizer/llama_unicode.h"

namespace wc {
namespace {

struct BpeBigram {
  int left = 0, right = 0;
  int rank = 0;
  std::string text;
};

// The queue's order: lowest rank first, then the leftmost pair.
struct BpeBigramAbove {
  bool operator()(const BpeBigram& a, const BpeBigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

std::unordered_map<std::string, int> LlamaBpeRanks(const std::vector<std::string>& merges) {
  std::unordered_map<std::string, int> ranks;
  ranks.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t space = m.empty() ? std::string::npos : m.find(' ', 1);
    ranks.emplace(space == std::string::npos ? std::string(" ") : m, static_cast<int>(i));
  }
  return ranks;
}

void LlamaBpeEncodeWord(const LlamaBpeVocab& vocab, std::string_view word, std::vector<int>* out) {
  const auto& ids = *vocab.ids;
  std::vector<llama_unicode::MergeSymbol> syms;
  if (vocab.ignore_merges && ids.count(std::string(word)))
    syms.push_back({-1, -1, 0, word.size()});
  else
    syms = llama_unicode::CharacterSymbols(word);
  auto text_of = [&](const llama_unicode::MergeSymbol& s) { return word.substr(s.offset, s.n); };
  std::priority_queue<BpeBigram, std::vector<BpeBigram>, BpeBigramAbove> queue;
  std::string key;
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view l = text_of(syms[left]), r = text_of(syms[right]);
    key.assign(l);
    key += ' ';
    key += r;
    const auto it = vocab.ranks->find(key);
    if (it == vocab.ranks->end()) return;
    queue.push({left, right, it->second, std::string(l) + std::string(r)});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_pair(i - 1, i);
  while (!queue.empty()) {
    const BpeBigram b = queue.top();
    queue.pop();
    llama_unicode::MergeSymbol &l = syms[b.left], &r = syms[b.right];
    if (l.n == 0 || r.n == 0) continue;
    if (l.offset + l.n != r.offset || word.substr(l.offset, l.n + r.n) != b.text) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_pair(l.prev, b.left);
    try_pair(b.left, l.next);
  }
  for (const llama_unicode::MergeSymbol& s : syms) {
    if (s.n == 0) continue;
    const std::string piece(text_of(s));
    if (const auto it = ids.find(piece); it != ids.end()) {
      out->push_back(it->second);
      continue;
    }
    for (char c : piece)
      if (const auto it = ids.find(std::string(1, c)); it != ids.end()) out->push_back(it->second);
  }
}

}  // namespace wc
