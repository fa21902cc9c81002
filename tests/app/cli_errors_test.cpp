// Bad input through the real binary: one clear line on stderr naming the file/field and the
// problem, a non-zero exit, never a crash or a hang.
#include <cstring>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace wc {
namespace {

using test::RunWormchat;

// Runs `args`; expects exit `code` (1: bad input, 2: usage) and exactly one stderr line
// containing every needle.
void ExpectError(const std::vector<std::string>& args, const std::vector<std::string>& needles,
                 int code = 1) {
  const auto r = RunWormchat(args);
  std::string cmd;
  for (const auto& a : args) cmd += a + " ";
  EXPECT_EQ(r.exit_code, code) << cmd << "\n" << r.err;
  EXPECT_EQ(test::CountLines(r.err), 1) << cmd << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("wormchat: error: ", 0), 0u) << r.err;
  for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << cmd << "\n" << r.err;
}

// A copy of a fixture (with the test tokenizer) that a test may corrupt.
struct ModelCopy {
  ModelCopy(const std::string& fixture = "newarch_gqa_f32") {
    test::CopyDir(test::FixtureDir(fixture), dir.path());
    test::CopyDir(test::FixtureDir("tokenizer"), dir.path());
  }
  std::string path() const { return dir.path(); }
  std::string File(const std::string& n) const { return dir.File(n); }
  test::TempDir dir;
};

TEST(CliErrors, MissingModelDirectoryAndFiles) {
  ExpectError({"generate", "--model", "/nonexistent/model", "--prompt", "hi"},
              {"/nonexistent/model", "not found"});
  ModelCopy m;
  std::remove(m.File("config.json").c_str());
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi"}, {"config.json", "missing"});
  ModelCopy m2;
  std::remove(m2.File("model.safetensors").c_str());
  ExpectError({"generate", "--model", m2.path(), "--prompt", "hi"}, {"no model.safetensors"});
  ModelCopy m3;
  std::remove(m3.File("tokenizer.model").c_str());
  ExpectError({"generate", "--model", m3.path(), "--prompt", "hi"}, {"tokenizer.model", "missing"});
}

TEST(CliErrors, TruncatedAndCorruptSafetensors) {
  ModelCopy m;
  const std::string st = m.File("model.safetensors");
  const std::string bytes = test::ReadFile(st);
  test::WriteFile(st, bytes.substr(0, bytes.size() / 2));  // truncated data
  ExpectError({"logits", "--model", m.path(), "--ids", "1 2", "--out", m.File("x.npy")},
              {st, "out of range"});
  test::WriteFile(st, bytes.substr(0, 40));  // truncated inside the header
  ExpectError({"logits", "--model", m.path(), "--ids", "1 2", "--out", m.File("x.npy")},
              {st, "runs past the end"});
  std::string bad_dtype = bytes;
  const size_t at = bad_dtype.find("\"F32\"");
  ASSERT_NE(at, std::string::npos);
  bad_dtype.replace(at, 5, "\"Q32\"");
  test::WriteFile(st, bad_dtype);
  ExpectError({"logits", "--model", m.path(), "--ids", "1 2", "--out", m.File("x.npy")},
              {st, "unknown dtype 'Q32'"});
  test::WriteFile(st, "");
  ExpectError({"info", "--model", m.path()}, {st, "truncated"});
}

TEST(CliErrors, MisshapedTensorAndInconsistentConfig) {
  ModelCopy m;
  std::string cfg = test::ReadFile(m.File("config.json"));
  std::string wrong = cfg;
  wrong.replace(wrong.find("\"hidden_size\": 128"), 18, "\"hidden_size\": 130");
  test::WriteFile(m.File("config.json"), wrong);
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi"},
              {"config.json", "hidden_size 130 is not divisible by num_attention_heads 8"});
  wrong = cfg;
  wrong.replace(wrong.find("\"num_kv_heads\": 2"), 17, "\"num_kv_heads\": 3");
  test::WriteFile(m.File("config.json"), wrong);
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi"},
              {"num_attention_heads 8 is not divisible by num_kv_heads 3"});
  wrong = cfg;
  wrong.replace(wrong.find("\"num_kv_heads\": 2"), 17, "\"num_kv_heads\": 4");
  test::WriteFile(m.File("config.json"), wrong);
  ExpectError(
      {"generate", "--model", m.path(), "--prompt", "hi"},
      {"model.safetensors", "query_key_value.weight' has shape [192, 128], expected [256, 128]"});
  test::WriteFile(m.File("config.json"), "{\"hidden_size\": ");
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi"}, {"config.json", "invalid JSON"});
}

TEST(CliErrors, PromptLongerThanTheContext) {
  ModelCopy m("mha_seq_bf16");  // vocab 613 covers the test tokenizer's 512 pieces
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "harbor ";
  ExpectError({"generate", "--model", m.path(), "--prompt", long_prompt},
              {"--prompt is", "too long for the context of 64 tokens"});
  ExpectError({"logits", "--model", m.path(), "--prompt", long_prompt, "--out", m.File("x.npy")},
              {"longer than the context of 64"});
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi", "--ctx", "1"},
              {"too long for the context of 1"});
}

TEST(CliErrors, InvalidSamplingParameters) {
  ModelCopy m;
  // Run options (serving/run_options.h) are checked as the command line is parsed: usage errors.
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi", "--top-p", "0"},
              {"--top-p: must be a number in (0, 1] (1 = off), got 0"}, 2);
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi", "--top-p", "1.5"},
              {"--top-p: must be a number in (0, 1]", "got 1.5"}, 2);
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi", "--temperature", "-1"},
              {"--temperature: must be a number >= 0 (0 = greedy), got -1"}, 2);
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi", "--top-k", "-3"},
              {"--top-k: must be a whole number >= 0 (0 = no limit), got -3"}, 2);
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi", "--top-k", "2.5"},
              {"--top-k: must be a whole number", "got 2.5"}, 2);
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi", "-n", "-1"},
              {"--max-new-tokens: must be a whole number >= 0", "got -1"}, 2);
  ExpectError({"chat", "--model", m.path(), "--temperature", "nan"},
              {"--temperature: must be a number >= 0", "got nan"}, 2);
  ExpectError({"chat", "--model", m.path(), "--speculate-k", "17"},
              {"--speculate-k: must be a whole number in 1-16, got 17"}, 2);
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi", "--threads", "-2"}, {"--threads"},
              2);
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi", "--kv-dtype", "int3"},
              {"--kv-dtype 'int3'"});
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi", "--lm-head-fractures", "3"},
              {"--lm-head-fractures 3"});
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi", "--matmul-precision", "fp8"},
              {"--matmul-precision 'fp8'", "bf16, f32, int8, int7 or int16"});
}

TEST(CliErrors, BadIds) {
  ModelCopy m;
  ExpectError({"logits", "--model", m.path(), "--ids", "1 x 3", "--out", m.File("x.npy")},
              {"--ids: 'x' is not a token id"});
  ExpectError({"logits", "--model", m.path(), "--ids", "1 331", "--out", m.File("x.npy")},
              {"--ids: token id 331 is outside the vocabulary [0, 331)"});
  ExpectError({"logits", "--model", m.path(), "--out", m.File("x.npy")}, {"--prompt or --ids"}, 2);
  ExpectError({"logits", "--model", m.path(), "--ids", "1", "--out", "/nonexistent/dir/x.npy"},
              {"/nonexistent/dir/x.npy", "cannot write"});
}

TEST(CliErrors, UnknownPresetAndBadInitArguments) {
  ExpectError({"info", "--preset", "falcon-1t"}, {"unknown preset 'falcon-1t'", "falcon-40b"});
  test::TempDir out;
  const std::string tok = test::FixtureDir("tokenizer") + "/tokenizer.model";
  ExpectError({"init", "--preset", "falcon-40b", "--layers", "1", "--hidden", "256", "--heads", "8",
               "--kv-heads", "3", "--tokenizer", tok, "--out", out.path()},
              {"num_attention_heads 8 is not divisible by num_kv_heads 3"});
  ExpectError(
      {"init", "--preset", "tiny", "--vocab", "100", "--tokenizer", tok, "--out", out.path()},
      {"--vocab 100 is smaller than the tokenizer's 512 pieces"});
  ExpectError(
      {"init", "--preset", "tiny", "--dtype", "int4", "--tokenizer", tok, "--out", out.path()},
      {"--dtype 'int4'"});
}

TEST(CliErrors, UsageErrorsAreOneLineAndExitNonZero) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"generate", "--bogus"},
                                             {},
                                             {"generate"},
                                             {"generate", "--prompt", "x", "-n", "many"}}) {
    const auto r = RunWormchat(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(test::CountLines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("wormchat: error: ", 0), 0u) << r.err;
  }
}

TEST(CliErrors, TokenizerLargerThanTheVocabulary) {
  ModelCopy m;  // vocab 331, the test tokenizer has 512 pieces
  ExpectError({"generate", "--model", m.path(), "--prompt", "hi"},
              {"tokenizer.model has 512 pieces but config.json's vocab_size is 331"});
}

}  // namespace
}  // namespace wc
