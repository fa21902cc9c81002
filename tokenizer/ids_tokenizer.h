// Token ids written out as text: the "tokenizer" of `--ids` runs (chat, batch, transcripts), which
// need no tokenizer.model. Encode("5 17 9") is {5, 17, 9}; each id streams as ' ' + its decimal
// digits, so a reply reads "23 8 2" (a chat reply's leading space is trimmed, as always) and a
// transcript or batch record spells its ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace wc {

// Whitespace-separated token ids ("1 2 3"), each in [0, vocab). Throws wc::Error starting with
// `what` for a word that is not a whole number or an id outside the vocabulary; blank text gives
// no ids (callers say what that means for them).
std::vector<int> ParseTokenIds(const std::string& text, int vocab, const std::string& what);

class IdsTokenizer final : public Tokenizer {
 public:
  // Ids [0, vocab_size). Holds every id's text: about 12 bytes per id.
  explicit IdsTokenizer(int vocab_size);

  // ParseTokenIds(text, piece_count(), "token ids").
  std::vector<int> Encode(const std::string& text) const override;
  std::string_view TokenBytes(int id) const override;
  int bos_id() const override { return -1; }
  int eos_id() const override { return -1; }
  int TokenId(const std::string&) const override { return -1; }
  int piece_count() const override { return static_cast<int>(offsets_.size()) - 1; }
  const std::string& path() const override { return name_; }

 private:
  std::string name_ = "token ids (--ids)";
  std::string text_;               // " 0 1 2 ... vocab-1": every id's bytes, back to back
  std::vector<uint32_t> offsets_;  // [vocab_size + 1]: id i is text_[offsets_[i], offsets_[i+1])
};

}  // namespace wc
