// The Hugging Face tokenizer.json tokenizer (tokenizer/hf_tokenizer.h) against ids from HF's own
// library: llama.cpp's Falcon vectors and the HF reference corpus over Falcon's real vocabulary
// and four toy tokenizers that exercise the other components (tests/fixtures/tokenizer/README.md).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "tokenizer/hf_regex.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace wc {
namespace {

using test::FixtureDir;
using test::ReadFile;

std::string Join(const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

const HfTokenizer& Falcon() {
  static const HfTokenizer tok(WORMCHAT_FALCON_TOKENIZER);
  return tok;
}

TEST(HfTokenizer, FalconLoadsWithItsSpecialTokens) {
  const HfTokenizer& tok = Falcon();
  EXPECT_EQ(tok.piece_count(), 65024);
  EXPECT_EQ(tok.TokenId("<|endoftext|>"), 11);
  EXPECT_EQ(tok.TokenId(">>TITLE<<"), 0);
  EXPECT_EQ(tok.bos_id(), -1);        // Falcon's tokenizer.json has no post-processor
  EXPECT_EQ(tok.TokenBytes(11), "");  // special tokens add nothing to a stream
}

TEST(HfTokenizer, FalconMatchesLlamaCppVectors) {
  const std::string dir = FixtureDir("tokenizer/falcon");
  const std::string inp = ReadFile(dir + "/llama_cpp_vocab.inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t p = 0; p < inp.size();) {
    const size_t q = inp.find(sep, p);
    ASSERT_NE(q, std::string::npos);
    texts.push_back(inp.substr(p, q - p));
    p = q + sep.size();
  }
  std::istringstream out(ReadFile(dir + "/llama_cpp_vocab.out"));
  std::string line;
  size_t n = 0;
  for (const std::string& text : texts) {
    ASSERT_TRUE(std::getline(out, line));
    while (!line.empty() && line[0] == ' ') line.erase(0, 1);
    EXPECT_EQ(Join(Falcon().Encode(text)), line) << "text: \"" << text << "\"";
    EXPECT_EQ(Falcon().Decode(Falcon().Encode(text)), text);
    ++n;
  }
  EXPECT_EQ(n, 46u);
}

// Every corpus entry: identical ids; and decoding gives HF's decode(ids, skip_special_tokens).
void CheckReference(const Tokenizer& tok, const std::string& dir, bool has_decoder) {
  const auto cases = nlohmann::json::parse(ReadFile(dir + "/hf_expected.json"));
  ASSERT_GT(cases.size(), 100u);
  int checked = 0;
  for (const auto& c : cases) {
    const bool hex = c.contains("hex");
    const std::string text =
        hex ? FromHex(c["hex"].get<std::string>()) : c["text"].get<std::string>();
    const std::vector<int> ids = tok.Encode(text);
    const std::string name =
        c.value("note", std::string()) + ": " + (hex ? c["hex"].get<std::string>() : text);
    EXPECT_EQ(Join(ids), Join(c["ids"].get<std::vector<int>>())) << dir << " " << name;
    if (has_decoder)
      EXPECT_EQ(tok.Decode(ids), c["decoded_skip_special"].get<std::string>())
          << dir << " " << name;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(cases.size()));
}

TEST(HfTokenizer, FalconMatchesHfReferenceCorpus) {
  CheckReference(Falcon(), FixtureDir("tokenizer/falcon"), true);
}

TEST(HfTokenizer, ToyByteFallbackMatchesHf) {
  const std::string dir = FixtureDir("tokenizer/toy_bytefallback");
  CheckReference(HfTokenizer(dir + "/tokenizer.json"), dir, false);
}

TEST(HfTokenizer, ToyUnkMatchesHf) {
  const std::string dir = FixtureDir("tokenizer/toy_unk");
  CheckReference(HfTokenizer(dir + "/tokenizer.json"), dir, false);
}

TEST(HfTokenizer, ToySuffixMatchesHf) {
  const std::string dir = FixtureDir("tokenizer/toy_suffix");
  CheckReference(HfTokenizer(dir + "/tokenizer.json"), dir, false);
}

TEST(HfTokenizer, ToyByteLevelMatchesHf) {
  const std::string dir = FixtureDir("tokenizer/toy_bytelevel");
  CheckReference(HfTokenizer(dir + "/tokenizer.json"), dir, true);
}

void CopyFile(const std::string& from, const std::string& to) {
  std::ofstream(to, std::ios::binary) << ReadFile(from);
}

TEST(Tokenizer, ModelDirPrefersSentencepieceThenTokenizerJson) {
  test::TempDir dir;
  try {
    Tokenizer::FromModelDir(dir.path());
    FAIL() << "no tokenizer should be an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tokenizer.model: missing"), std::string::npos) << what;
    EXPECT_NE(what.find("tokenizer.json"), std::string::npos) << what;
  }
  CopyFile(WORMCHAT_FALCON_TOKENIZER, dir.File("tokenizer.json"));
  const auto hf = Tokenizer::FromModelDir(dir.path());
  EXPECT_EQ(hf->path(), dir.File("tokenizer.json"));
  EXPECT_EQ(hf->piece_count(), 65024);
  CopyFile(FixtureDir("tokenizer") + "/tokenizer.model", dir.File("tokenizer.model"));
  EXPECT_EQ(Tokenizer::FromModelDir(dir.path())->path(), dir.File("tokenizer.model"));
}

TEST(HfRegex, OnigurumaClassesWinOverPcre2s) {
  // \w takes combining marks (PCRE2's UCP \w does not); \s is White_Space.
  const HfRegex w(R"(\w+)", "test");
  const std::string e_acute = "e\xCC\x81";  // e + U+0301
  ASSERT_EQ(w.FindAll(e_acute).size(), 1u);
  EXPECT_EQ(w.FindAll(e_acute)[0].second, e_acute.size());
  const HfRegex s(R"([^\s]+)", "test");
  EXPECT_EQ(s.FindAll("a\xC2\xA0"
                      "b")
                .size(),
            2u);  // NBSP is \s
}

TEST(HfTokenizer, BadFilesGetOneLineErrorsNamingFileAndKey) {
  auto error_of = [](const std::string& json) {
    try {
      HfTokenizer tok(json, "t.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error_of("{").find("t.json: invalid JSON"), std::string::npos) << error_of("{");
  EXPECT_NE(error_of(R"({"model": {"type": "WordPiece", "vocab": {}}})")
                .find("\"WordPiece\" is not supported"),
            std::string::npos);
  const std::string unknown_merge =
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})";
  EXPECT_NE(error_of(unknown_merge).find("key 'merges'[0]"), std::string::npos)
      << error_of(unknown_merge);
  const std::string bad_pre =
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Metaspace"}})";
  EXPECT_NE(error_of(bad_pre).find("pre_tokenizer type \"Metaspace\" is not supported"),
            std::string::npos)
      << error_of(bad_pre);
  const std::string bad_regex =
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(["}, "behavior": "Isolated"}})";
  EXPECT_NE(error_of(bad_regex).find("invalid regex"), std::string::npos) << error_of(bad_regex);
  for (const std::string& e : {error_of("{"), error_of(unknown_merge), error_of(bad_regex)})
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

}  // namespace
}  // namespace wc
