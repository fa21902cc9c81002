// The Hugging Face tokenizer.json tokenizer (tokenizer/hf_tokenizer.h) against ids from HF's own
// library: llama.cpp's Falcon vectors and the HF reference corpus over Falcon's real vocabulary
// and six toy tokenizers that exercise the other components, two of them shaped like Falcon3's
// (tests/fixtures/tokenizer/README.md). The commands with Falcon's vocabulary:
// tests/app/tokenizer_cli_test.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/chat/chat_format.h"
#include "model/config.h"
#include "serving/text_stream.h"
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
    if (has_decoder) {
      EXPECT_EQ(tok.Decode(ids), c["decoded_skip_special"].get<std::string>())
          << dir << " " << name;
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(cases.size()));
}

TEST(HfTokenizer, FalconMatchesHfReferenceCorpus) {
  CheckReference(Falcon(), FixtureDir("tokenizer/falcon"), true);
}

// decode(encode(s)) == s for every valid UTF-8 corpus string without a special token in it that
// HF's own round trip keeps (Falcon has no token for a few control bytes such as \v: HF drops them,
// so does wormchat).
TEST(HfTokenizer, FalconRoundTripsValidText) {
  const auto cases =
      nlohmann::json::parse(ReadFile(FixtureDir("tokenizer/falcon") + "/hf_expected.json"));
  int checked = 0;
  for (const auto& c : cases) {
    if (!c.contains("text")) continue;
    const std::string text = c["text"].get<std::string>();
    const std::vector<int> ids = Falcon().Encode(text);
    bool special = false;  // Falcon's special tokens are ids 0-11 and add nothing to a stream
    for (int id : ids) special = special || id <= 11;
    if (special || c["decoded"].get<std::string>() != text) continue;
    EXPECT_EQ(Falcon().Decode(ids), text);
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

TEST(HfTokenizer, HugeAndMissingFilesAreRefusedByName) {
  test::TempDir dir;
  const std::string huge = dir.File("tokenizer.json");
  { std::ofstream(huge) << "{"; }
  ASSERT_EQ(truncate(huge.c_str(), HfTokenizer::kMaxFileBytes + 1), 0);
  try {
    HfTokenizer tok(huge);
    FAIL() << "a file past the limit must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(huge), std::string::npos) << e.what();
  }
  try {
    HfTokenizer tok(dir.File("none.json"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none.json: missing"), std::string::npos) << e.what();
  }
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

// Falcon3's structure: Llama-3 regex Split + ByteLevel, BPE with ignore_merges, added tokens at ids
// 0-30, newline and tab as non-special added tokens in byte-level form ("Ċ", "ĉ"); the corpus is
// corpus.json plus corpus_falcon3.json (chat framing, tabs, blank lines, CRLF, contractions).
TEST(HfTokenizer, ToyFalcon3MatchesHf) {
  const std::string dir = FixtureDir("tokenizer/toy_falcon3");
  CheckReference(HfTokenizer(dir + "/tokenizer.json"), dir, true);
}

// The same with ids 12 and 13 a raw "\n" and "\t", the other shape Falcon3's file could have.
TEST(HfTokenizer, ToyFalcon3RawNewlineMatchesHf) {
  const std::string dir = FixtureDir("tokenizer/toy_falcon3_rawnl");
  CheckReference(HfTokenizer(dir + "/tokenizer.json"), dir, true);
}

// Newline and tab are added tokens that are not special: they decode to their text (special added
// tokens decode to nothing), as HF's decode gives them back, in a stream too.
TEST(HfTokenizer, ToyFalcon3NewlineAndTabSurviveDecode) {
  for (const char* name : {"toy_falcon3", "toy_falcon3_rawnl"}) {
    const std::string dir = FixtureDir(std::string("tokenizer/") + name);
    const HfTokenizer tok(dir + "/tokenizer.json");
    const auto cases = nlohmann::json::parse(ReadFile(dir + "/hf_expected.json"));
    std::vector<int> expected;
    for (const auto& c : cases) {
      if (c.value("text", std::string()) != "a\nb\tc") continue;
      expected = c["ids"].get<std::vector<int>>();
      EXPECT_EQ(c["decoded_skip_special"].get<std::string>(), "a\nb\tc") << name;
    }
    ASSERT_EQ(expected.size(), 5u) << name;
    const std::vector<int> ids = tok.Encode("a\nb\tc");
    EXPECT_EQ(Join(ids), Join(expected)) << name;
    ASSERT_EQ(ids.size(), 5u) << name;
    EXPECT_EQ(ids[1], 12) << name;
    EXPECT_EQ(ids[3], 13) << name;
    EXPECT_EQ(tok.Decode(ids), "a\nb\tc") << name;
    EXPECT_EQ(tok.TokenBytes(12), "\n") << name;
    EXPECT_EQ(tok.TokenBytes(13), "\t") << name;
    EXPECT_EQ(tok.TokenBytes(11), "") << name;  // <|endoftext|>, special
    EXPECT_EQ(tok.TokenId("<|endoftext|>"), 11) << name;
    EXPECT_EQ(tok.TokenId("<|pad|>"), 30) << name;
    EXPECT_EQ(tok.bos_id(), -1) << name;  // a ByteLevel post-processor adds nothing
    EXPECT_EQ(tok.eos_id(), -1) << name;
    StringSink sink;
    TextStream stream({}, sink, /*trim_leading_space=*/false);
    for (int id : ids) stream.Add(tok.TokenBytes(id));
    stream.Finish();
    EXPECT_EQ(sink.text(), "a\nb\tc") << name;
  }
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

// The post-processor's BOS/EOS: HF's encode(add_special_tokens=True) is [bos] + ids + [eos].
TEST(HfTokenizer, PostProcessorBosEosAreHfs) {
  for (const char* name :
       {"toy_bytefallback", "toy_unk", "toy_bytelevel", "toy_falcon3", "toy_falcon3_rawnl"}) {
    const std::string dir = FixtureDir(std::string("tokenizer/") + name);
    const HfTokenizer tok(dir + "/tokenizer.json");
    const auto cases = nlohmann::json::parse(ReadFile(dir + "/hf_expected.json"));
    for (const auto& c : cases) {
      ASSERT_TRUE(c.contains("ids_with_special")) << name;
      std::vector<int> framed;
      if (tok.bos_id() >= 0) framed.push_back(tok.bos_id());
      for (int id : c["ids"].get<std::vector<int>>()) framed.push_back(id);
      if (tok.eos_id() >= 0) framed.push_back(tok.eos_id());
      EXPECT_EQ(Join(framed), Join(c["ids_with_special"].get<std::vector<int>>())) << name;
    }
  }
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

// Byte-level BPE splits characters across tokens: streamed token by token, nothing is shown of a
// character until it is complete, and the text comes out exactly.
TEST(HfTokenizer, StreamedTokensNeverShowHalfACharacter) {
  const std::string text =
      "Falcon \xF0\x9F\xA6\x85 \xE4\xBD\xA0\xE5\xA5\xBD, \xD0\xB2\xD1\x8B "
      "na\xC3\xAF"
      "ve caf\xC3\xA9 \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 12345";
  const std::vector<int> ids = Falcon().Encode(text);
  int split = 0;  // tokens that end inside a character
  StringSink sink;
  TextStream stream({}, sink, /*trim_leading_space=*/false);
  for (int id : ids) {
    const std::string_view bytes = Falcon().TokenBytes(id);
    stream.Add(bytes);
    EXPECT_EQ(Utf8CompletePrefix(sink.text()), sink.text().size());
    const std::string so_far = sink.text();
    if (!so_far.empty()) {
      EXPECT_EQ(text.compare(0, so_far.size(), so_far), 0) << so_far;
    }
    split += Utf8CompletePrefix(bytes) != bytes.size() ? 1 : 0;
  }
  stream.Finish();
  EXPECT_EQ(sink.text(), text);
  EXPECT_GT(split, 0);  // the case this test is about did occur
}

// Falcon-instruct's framing through the default chat format gives HF's ids for the framed text.
TEST(HfTokenizer, FalconInstructFramingIsHfs) {
  const auto cases =
      nlohmann::json::parse(ReadFile(FixtureDir("tokenizer/falcon") + "/hf_expected.json"));
  std::vector<int> expected;
  for (const auto& c : cases)
    if (c.value("text", std::string()) == "User: hi\nAssistant:")
      expected = c["ids"].get<std::vector<int>>();
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(EncodePrompt(Falcon(), ChatFormat{}, "hi", /*raw=*/false, 11), expected);
}

// bos/eos beside config.json: generation_config.json, tokenizer_config.json,
// special_tokens_map.json, in HF's order, config.json winning.
TEST(GenerationDefaults, SpecialTokensComeFromConfigThenTheFilesBesideIt) {
  test::TempDir dir;
  ModelConfig c = PresetConfig("tiny");
  c.vocab_size = 65024;
  nlohmann::json config = c.ToJson();
  config.erase("bos_token_id");
  config.erase("eos_token_id");
  auto write = [&](const std::string& name, const nlohmann::json& j) {
    std::ofstream(dir.File(name)) << j.dump();
  };
  write("config.json", config);
  EXPECT_EQ(LoadConfig(dir.path()).eos_token_id, 11);  // nothing beside it: Falcon's default
  CopyFile(WORMCHAT_FALCON_TOKENIZER, dir.File("tokenizer.json"));
  write("special_tokens_map.json", {{"bos_token", ">>TITLE<<"}, {"eos_token", ">>ABSTRACT<<"}});
  EXPECT_EQ(LoadConfig(dir.path()).bos_token_id, 0);
  EXPECT_EQ(LoadConfig(dir.path()).eos_token_id, 1);
  write("tokenizer_config.json", {{"eos_token", {{"content", ">>QUESTION<<"}}}});
  EXPECT_EQ(LoadConfig(dir.path()).eos_token_id, Falcon().TokenId(">>QUESTION<<"));
  EXPECT_EQ(LoadConfig(dir.path()).bos_token_id, 0);  // still special_tokens_map.json's
  write("generation_config.json", {{"eos_token_id", {7, 9}}});
  EXPECT_EQ(LoadConfig(dir.path()).eos_token_id, 7);  // a list: its first
  // ... and only its first ends generation (a GGUF vocabulary's EOG ids are GGUF's alone).
  EXPECT_TRUE(LoadConfig(dir.path()).end_token_ids.empty());
  EXPECT_FALSE(LoadConfig(dir.path()).EndsGeneration(9));
  config["eos_token_id"] = 5;
  write("config.json", config);
  EXPECT_EQ(LoadConfig(dir.path()).eos_token_id, 5);  // config.json wins
  config.erase("eos_token_id");
  write("config.json", config);
  write("generation_config.json", {{"eos_token_id", 70000}});
  try {
    LoadConfig(dir.path());
    FAIL() << "an id past the vocabulary must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json (eos_token_id): token id 70000"),
              std::string::npos)
        << e.what();
  }
  write("generation_config.json", nlohmann::json::object());
  write("tokenizer_config.json", {{"eos_token", "<no such token>"}});
  try {
    LoadConfig(dir.path());
    FAIL() << "an unknown token name must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json: key 'eos_token' names"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace wc
