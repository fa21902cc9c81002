#include "tokenizer/ids_tokenizer.h"

#include <sstream>

#include "util/error.h"
#include "util/json_file.h"
#include "util/parse.h"

namespace wc {

std::vector<int> ParseTokenIds(const std::string& text, int vocab, const std::string& what) {
  std::vector<int> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    const std::optional<long long> v = ParseWholeInteger(word);
    if (!v) throw Error(Cat(what, ": '", Printable(word, 40), "' is not a token id"));
    if (*v < 0 || *v >= vocab)
      throw Error(Cat(what, ": token id ", *v, " is outside the vocabulary [0, ", vocab, ")"));
    ids.push_back(static_cast<int>(*v));
  }
  return ids;
}

IdsTokenizer::IdsTokenizer(int vocab_size) {
  WC_CHECK(vocab_size > 0, "an ids tokenizer needs a vocabulary");
  offsets_.reserve(static_cast<size_t>(vocab_size) + 1);
  for (int id = 0; id < vocab_size; ++id) {
    offsets_.push_back(static_cast<uint32_t>(text_.size()));
    text_ += ' ';
    text_ += std::to_string(id);
  }
  offsets_.push_back(static_cast<uint32_t>(text_.size()));
}

std::vector<int> IdsTokenizer::Encode(const std::string& text) const {
  return ParseTokenIds(text, piece_count(), "token ids");
}

std::string_view IdsTokenizer::TokenBytes(int id) const {
  if (id < 0 || id >= piece_count()) return {};
  return std::string_view(text_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
}

}  // namespace wc
