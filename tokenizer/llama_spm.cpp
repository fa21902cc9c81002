#include "tokenizer/llama_spm.h"

#include <cstdio>
#include <queue>

#include "tokenizer/llama_unicode.h"

#include "util/error.h"

namespace wc {
namespace {

struct SpmBigram {
  int left = 0, right = 0;
  float score = 0;
  size_t size = 0;
};

// The queue's order: highest score first, then the leftmost pair.
struct SpmBigramBelow {
  bool operator()(const SpmBigram& a, const SpmBigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

int LlamaSpmByteToken(const std::unordered_map<std::string, int>& ids, unsigned char b) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "<0x%02X>", b);
  if (const auto it = ids.find(hex); it != ids.end()) return it->second;
  if (const auto it = ids.find(std::string(1, static_cast<char>(b))); it != ids.end())
    return it->second;
  return -1;
}

void LlamaSpmEncode(const LlamaSpmVocab& vocab, std::string_view text, std::vector<int>* out) {
  const auto& ids = *vocab.ids;
  std::vector<llama_unicode::MergeSymbol> syms = llama_unicode::CharacterSymbols(text);
  std::priority_queue<SpmBigram, std::vector<SpmBigram>, SpmBigramBelow> queue;
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t size = syms[left].n + syms[right].n;
    const auto it = ids.find(std::string(text.substr(syms[left].offset, size)));
    if (it == ids.end()) return;
    queue.push({left, right, (*vocab.scores)[static_cast<size_t>(it->second)], size});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_pair(i - 1, i);
  while (!queue.empty()) {
    const SpmBigram b = queue.top();
    queue.pop();
    llama_unicode::MergeSymbol &l = syms[b.left], &r = syms[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_pair(l.prev, b.left);
    try_pair(b.left, l.next);
  }
  if (syms.empty()) return;
  // Every merged symbol is a token; the rest are single characters, written byte by byte.
  for (int i = 0; i != -1; i = syms[i].next) {
    const std::string_view piece = text.substr(syms[i].offset, syms[i].n);
    if (const auto it = ids.find(std::string(piece)); it != ids.end()) {
      out->push_back(it->second);
      continue;
    }
    for (char c : piece) {
      const int id = LlamaSpmByteToken(ids, static_cast<unsigned char>(c));
      if (id < 0) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "%02X", static_cast<unsigned char>(c));
        throw Error(Cat(vocab.source, ": the text needs byte 0x", hex,
                        ", and the vocabulary has neither a token \"<0x", hex,
                        ">\" nor a one-byte token for it (llama.cpp aborts here)"));
      }
      out->push_back(id);
    }
  }
}

}  // namespace wc
