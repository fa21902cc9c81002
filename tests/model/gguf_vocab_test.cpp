// A GGUF file's vocabulary (model/gguf/gguf_vocab.h) made a tokenizer (tokenizer/gguf_tokenizer.h)
// gives llama.cpp b6673's llama-tokenize ids for every recorded input
// (tests/fixtures/tokenizer/gguf/*.expected.jsonl, tools/tokenizer/gguf_expected.py), and every bad
// key is one line naming it.
#include "model/gguf/gguf_vocab.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_tokenizer.h"
#include "tests/model/gguf_writer.h"
#include "tests/test_util.h"
#include "tokenizer/gguf_tokenizer.h"
#include "util/error.h"

namespace wc {
namespace {

std::string GgufFixture(const std::string& name) {
  if (name == "falcon") return WORMCHAT_FALCON_GGUF;
  return test::FixtureDir("tokenizer") + "/gguf/" + name + ".gguf";
}

std::string Unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

class GgufVocabFixtureTest : public testing::TestWithParam<std::string> {};

TEST_P(GgufVocabFixtureTest, IdsAreLlamaTokenizes) {
  const std::string name = GetParam();
  const GgufFile file(GgufFixture(name));
  const GgufTokenizer tok(ReadGgufVocab(file));
  std::ifstream in(test::FixtureDir("tokenizer") + "/gguf/" + name + ".expected.jsonl");
  ASSERT_TRUE(in) << name;
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    const std::string text =
        j.contains("hex") ? Unhex(j["hex"].get<std::string>()) : j["text"].get<std::string>();
    bool no_bos = false, no_parse_special = false;
    for (const auto& f : j["flags"]) {
      no_bos = no_bos || f == "--no-bos";
      no_parse_special = no_parse_special || f == "--no-parse-special";
    }
    ++cases;
    const bool add_special = tok.adds_bos() && !no_bos;
    if (j.contains("crash")) {  // llama-tokenize aborts: wormchat names the problem instead
      EXPECT_THROW(tok.Encode(text, add_special, !no_parse_special), Error) << line;
      continue;
    }
    EXPECT_EQ(tok.Encode(text, add_special, !no_parse_special), j["ids"].get<std::vector<int>>())
        << name << ": " << line;
  }
  EXPECT_GT(cases, 300) << name;
}

INSTANTIATE_TEST_SUITE_P(Vocabs, GgufVocabFixtureTest,
                         testing::Values("bytelevel_default", "bytelevel_gpt-2", "bytelevel_falcon",
                                         "bytelevel_llama3", "toy_falcon3", "toy_falcon3_nobos",
                                         "spm", "falcon"),
                         [](const testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// llama.cpp's own reference cases for its Falcon vocabulary (models/ggml-vocab-falcon.gguf.inp and
// .out, made with HF's tokenizer): the same ids from the same vocabulary written by gguf-py.
TEST(GgufVocabTest, FalconMatchesLlamaCppReferenceCases) {
  const GgufTokenizer tok(ReadGgufVocab(GgufFile(GgufFixture("falcon"))));
  const std::string dir = test::FixtureDir("tokenizer") + "/falcon/";
  const std::string inp = test::ReadFile(dir + "llama_cpp_vocab.inp");
  std::ifstream out(dir + "llama_cpp_vocab.out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  int cases = 0;
  for (size_t p = 0, q; (q = inp.find(sep, p)) != std::string::npos; p = q + sep.size()) {
    std::string line;
    ASSERT_TRUE(std::getline(out, line));
    std::vector<int> want;
    std::istringstream ids(line);
    for (int id; ids >> id;) want.push_back(id);
    EXPECT_EQ(tok.Encode(inp.substr(p, q - p), false, false), want) << inp.substr(p, q - p);
    ++cases;
  }
  EXPECT_EQ(cases, 46);
}

TEST(GgufVocabTest, PiecesDecodeBackToTheText) {
  for (const char* name : {"bytelevel_falcon", "falcon", "toy_falcon3"}) {
    const GgufTokenizer tok(ReadGgufVocab(GgufFile(GgufFixture(name))));
    for (const std::string text : {"Hello world", "  it's\n\n 12345 \xC3\xBC\xE4\xBD\xA0", ""})
      EXPECT_EQ(tok.Decode(tok.Encode(text)), text) << name;
  }
  const GgufTokenizer spm(ReadGgufVocab(GgufFile(GgufFixture("spm"))));
  // SPM's first piece carries the prefix space; byte pieces give their bytes.
  EXPECT_EQ(spm.Decode(spm.Encode("h\xC3\xA9llo\n")), " h\xC3\xA9llo\n");
  EXPECT_EQ(spm.TokenBytes(spm.bos_id()), "");  // control tokens add nothing
  EXPECT_EQ(spm.Piece(spm.bos_id()), "<s>");
}

TEST(GgufVocabTest, SpecialIdsAndFlags) {
  const GgufTokenizer f3(ReadGgufVocab(GgufFile(GgufFixture("toy_falcon3"))));
  EXPECT_TRUE(f3.adds_bos());  // the falcon3 pre type's default, as llama.cpp's
  const GgufTokenizer f3n(ReadGgufVocab(GgufFile(GgufFixture("toy_falcon3_nobos"))));
  EXPECT_FALSE(f3n.adds_bos());  // add_bos_token false wins
  const GgufTokenizer gpt2(ReadGgufVocab(GgufFile(GgufFixture("bytelevel_gpt-2"))));
  EXPECT_TRUE(gpt2.adds_bos());
  EXPECT_TRUE(gpt2.adds_eos());
  EXPECT_EQ(gpt2.bos_id(), gpt2.TokenId("<|endoftext|>"));
  // <|im_end|> ends generation and is a control token by its text.
  const int im_end = gpt2.TokenId("<|im_end|>");
  ASSERT_GE(im_end, 0);
  EXPECT_NE(std::find(gpt2.eog_ids().begin(), gpt2.eog_ids().end(), im_end), gpt2.eog_ids().end());
  EXPECT_EQ(LoadModelTokenizer(GgufFixture("spm"))->piece_count(), 514);
}

// ------------------------------------------------------------------------------ refusals

struct BadKey {
  const char* what;
  std::function<void(test::GgufWriter&)> write;
  const char* key;
  const char* problem;
};

void BaseVocab(test::GgufWriter& w, bool tokens = true) {
  w.Str("general.architecture", "falcon");
  w.Str("tokenizer.ggml.model", "gpt2");
  w.Str("tokenizer.ggml.pre", "falcon");
  if (tokens) w.Strs("tokenizer.ggml.tokens", {"a", "b", "ab"});
}

TEST(GgufVocabTest, BadKeysAreOneLineNamingTheKey) {
  const std::vector<BadKey> cases = {
      {"model of another type",
       [](test::GgufWriter& w) {
         w.Str("general.architecture", "falcon");
         w.U32("tokenizer.ggml.model", 2);
       },
       "tokenizer.ggml.model", "u32, expected a string"},
      {"unknown model", [](test::GgufWriter& w) { w.Str("tokenizer.ggml.model", "gpt3"); },
       "tokenizer.ggml.model", "not a tokenizer llama.cpp knows"},
      {"model not built", [](test::GgufWriter& w) { w.Str("tokenizer.ggml.model", "bert"); },
       "tokenizer.ggml.model", "does not build"},
      {"no tokens",
       [](test::GgufWriter& w) {
         BaseVocab(w, false);
         w.Strs("tokenizer.ggml.merges", {"a b"});
       },
       "tokenizer.ggml.tokens", "missing"},
      {"no merges", [](test::GgufWriter& w) { BaseVocab(w); }, "tokenizer.ggml.merges", "missing"},
      {"scores too short",
       [](test::GgufWriter& w) {
         BaseVocab(w);
         w.Strs("tokenizer.ggml.merges", {"a b"});
         w.F32s("tokenizer.ggml.scores", {0, 0});
       },
       "tokenizer.ggml.scores", "has 2 elements but tokenizer.ggml.tokens has 3"},
      {"types of i32s written as f32",
       [](test::GgufWriter& w) {
         BaseVocab(w);
         w.Strs("tokenizer.ggml.merges", {"a b"});
         w.F32s("tokenizer.ggml.token_type", {1, 1, 1});
       },
       "tokenizer.ggml.token_type", "expected an array of i32"},
      {"bos out of range",
       [](test::GgufWriter& w) {
         BaseVocab(w);
         w.Strs("tokenizer.ggml.merges", {"a b"});
         w.U32("tokenizer.ggml.bos_token_id", 3);
       },
       "tokenizer.ggml.bos_token_id", "outside the 3 tokens"},
      {"eos of another type",
       [](test::GgufWriter& w) {
         BaseVocab(w);
         w.Strs("tokenizer.ggml.merges", {"a b"});
         w.I32("tokenizer.ggml.eos_token_id", 1);
       },
       "tokenizer.ggml.eos_token_id", "expected u32"},
      {"add_bos of another type",
       [](test::GgufWriter& w) {
         BaseVocab(w);
         w.Strs("tokenizer.ggml.merges", {"a b"});
         w.U32("tokenizer.ggml.add_bos_token", 1);
       },
       "tokenizer.ggml.add_bos_token", "expected bool"},
      {"unknown pre",
       [](test::GgufWriter& w) {
         w.Str("tokenizer.ggml.model", "gpt2");
         w.Str("tokenizer.ggml.pre", "nonsense");
         w.Strs("tokenizer.ggml.tokens", {"a"});
         w.Strs("tokenizer.ggml.merges", {});
       },
       "tokenizer.ggml.pre", "llama.cpp does not know"},
      {"pre not built",
       [](test::GgufWriter& w) {
         w.Str("tokenizer.ggml.model", "gpt2");
         w.Str("tokenizer.ggml.pre", "qwen2");
         w.Strs("tokenizer.ggml.tokens", {"a"});
         w.Strs("tokenizer.ggml.merges", {});
       },
       "tokenizer.ggml.pre", "does not build yet"},
      {"duplicate tokens",
       [](test::GgufWriter& w) {
         w.Str("tokenizer.ggml.model", "llama");
         w.Strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "a"});
       },
       "tokenizer.ggml.tokens", "twice"},
      {"default bos outside a small vocabulary",
       [](test::GgufWriter& w) {
         w.Str("tokenizer.ggml.model", "gpt2");
         w.Str("tokenizer.ggml.pre", "llama3");
         w.Strs("tokenizer.ggml.tokens", {"a"});
         w.Strs("tokenizer.ggml.merges", {});
       },
       "tokenizer.ggml.bos_token_id", "outside its 1 tokens"},
  };
  for (const BadKey& c : cases) {
    test::GgufWriter w;
    c.write(w);
    const std::vector<uint8_t> bytes = w.Bytes();
    try {
      const GgufFile file(bytes.data(), bytes.size(), "bad.gguf");
      GgufTokenizer tok(ReadGgufVocab(file));
      ADD_FAILURE() << c.what << ": no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << c.what << ": " << msg;
      EXPECT_NE(msg.find(c.key), std::string::npos) << c.what << ": " << msg;
      EXPECT_NE(msg.find(c.problem), std::string::npos) << c.what << ": " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << c.what << ": " << msg;
    }
  }
}

}  // namespace
}  // namespace wc
