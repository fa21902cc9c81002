// TokenizerDifference (issue 34's draft-model check): equal tokenizers agree; a piece count, one
// piece's bytes, a special id or the probe text's encoding that differs is found and named.
#include <gtest/gtest.h>

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_match.h"
#include "util/error.h"

namespace wc {
namespace {

const std::string kSentencePiece = std::string(WORMCHAT_TEST_DATA) + "/fixtures/tokenizer";

// Another tokenizer with one thing changed.
class Altered final : public Tokenizer {
 public:
  explicit Altered(const Tokenizer& base) : base_(base) {}
  std::vector<int> Encode(const std::string& text) const override {
    if (refuse) throw Error("the text needs a byte this vocabulary cannot spell");
    std::vector<int> ids = base_.Encode(text);
    if (split_encoding && !ids.empty()) ids.push_back(ids.back());
    return ids;
  }
  std::string_view TokenBytes(int id) const override {
    return id == changed_piece ? std::string_view("zz") : base_.TokenBytes(id);
  }
  int bos_id() const override { return base_.bos_id(); }
  int eos_id() const override { return eos_shift + base_.eos_id(); }
  int TokenId(const std::string& piece) const override { return base_.TokenId(piece); }
  int piece_count() const override { return base_.piece_count(); }
  const std::string& path() const override { return base_.path(); }

  int changed_piece = -1;
  int eos_shift = 0;
  bool split_encoding = false;
  bool refuse = false;

 private:
  const Tokenizer& base_;
};

TEST(TokenizerMatch, ATokenizerMatchesItselfLoadedTwice) {
  const auto a = Tokenizer::FromModelDir(kSentencePiece),
             b = Tokenizer::FromModelDir(kSentencePiece);
  EXPECT_EQ(TokenizerDifference(*a, *b), "");
  EXPECT_GT(a->Encode(kTokenizerProbeText).size(), 20u);  // the probe says something
}

TEST(TokenizerMatch, FindsEachKindOfDifference) {
  const auto base = Tokenizer::FromModelDir(kSentencePiece);
  const HfTokenizer falcon(WORMCHAT_FALCON_TOKENIZER);
  EXPECT_NE(TokenizerDifference(*base, falcon).find("pieces"), std::string::npos);

  Altered piece(*base);
  piece.changed_piece = 300;
  EXPECT_NE(TokenizerDifference(*base, piece).find("piece 300 is"), std::string::npos)
      << TokenizerDifference(*base, piece);
  Altered eos(*base);
  eos.eos_shift = 1;
  EXPECT_NE(TokenizerDifference(*base, eos).find("EOS id"), std::string::npos);
  Altered encoding(*base);
  encoding.split_encoding = true;
  EXPECT_NE(TokenizerDifference(*base, encoding).find("probe text"), std::string::npos);
  // A vocabulary that cannot spell the probe text (a toy GGUF one without byte pieces): refused
  // on one side only is a difference; on both, the pieces decide.
  Altered refusing(*base), also_refusing(*base);
  refusing.refuse = also_refusing.refuse = true;
  EXPECT_EQ(TokenizerDifference(*base, refusing, "the model's", "the draft's"),
            "the draft's cannot encode a probe text that the model's encodes (the text needs a "
            "byte this vocabulary cannot spell)");
  EXPECT_EQ(TokenizerDifference(refusing, also_refusing), "");
}

}  // namespace
}  // namespace wc
