#include "tokenizer/llama_special_partition.h"

#include <list>

namespace wc {
namespace {

// C-locale isspace, as llama.cpp's lstrip/rstrip test bytes.
bool AsciiSpace(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

}  // namespace

std::vector<LlamaFragment> PartitionSpecialTokens(std::string_view text,
                                                  const std::vector<LlamaSpecialToken>& tokens,
                                                  bool parse_special) {
  std::list<LlamaFragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  for (const LlamaSpecialToken& tok : tokens) {
    if (!parse_special && tok.control_or_unknown) continue;
    const size_t tl = tok.text.size();
    for (auto it = frags.begin(); it != frags.end();) {
      if (it->id >= 0) {
        ++it;
        continue;
      }
      size_t base = it->offset, len = it->length;
      std::vector<LlamaFragment> parts;
      bool matched = false;
      while (len > 0) {
        const size_t m = text.substr(0, base + len).find(tok.text, base);
        if (m == std::string_view::npos) break;
        matched = true;
        size_t left = m - base;
        if (tok.lstrip)
          while (left > 0 && AsciiSpace(text[base + left - 1])) --left;
        if (left > 0) parts.push_back({-1, base, left});
        parts.push_back({tok.id, 0, 0});
        const size_t end = base + len;
        base = m + tl;
        len = end - base;
        if (tok.rstrip)
          while (len > 0 && AsciiSpace(text[base])) ++base, --len;
      }
      if (!matched) {
        ++it;
        continue;
      }
      if (len > 0) parts.push_back({-1, base, len});
      it = frags.erase(it);
      frags.insert(it, parts.begin(), parts.end());
    }
  }
  return {frags.begin(), frags.end()};
}

}  // namespace wc
