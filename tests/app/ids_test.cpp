// Running on token ids (issue 15): the IdsTokenizer, and `--ids` of chat, batch and transcript
// record on a model without tokenizer.model, whose results must equal `generate --ids`; a batch
// prompt given as token ids; the missing-tokenizer error's hint names where --ids exists.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/app/batch_test_util.h"
#include "tokenizer/ids_tokenizer.h"
#include "util/error.h"

namespace wc::test {
namespace {

TEST(IdsTokenizer, ReadsIdsAndSpellsThem) {
  const IdsTokenizer tok(12);
  EXPECT_EQ(tok.piece_count(), 12);
  EXPECT_EQ(tok.Encode(" 1  2\n3\t11 "), (std::vector<int>{1, 2, 3, 11}));
  EXPECT_TRUE(tok.Encode(" \n").empty());
  EXPECT_EQ(tok.Decode({0, 11, 7}), " 0 11 7");
  EXPECT_EQ(tok.TokenBytes(10), " 10");
  EXPECT_EQ(tok.TokenBytes(12), "");
  EXPECT_EQ(tok.TokenBytes(-1), "");
  EXPECT_EQ(tok.bos_id(), -1);
  for (const char* bad : {"4 x", "12", "-1", "3.5", "1e2", "99999999999999999999"}) {
    try {
      tok.Encode(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("token ids: ", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

// A copy of a fixture model that has no tokenizer.model (vocab 347, EOS 11).
class IdsRun : public ::testing::Test {
 protected:
  void SetUp() override { CopyDir(FixtureDir("mq_f32"), dir_.path()); }
  std::string Model() const { return dir_.path(); }
  // `generate --ids` on the model: its printed ids.
  std::vector<int> Generate(const std::string& ids, int n, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"generate", "--model", Model(),          "--ids",
                                     ids,        "-n",      std::to_string(n)};
    argv.insert(argv.end(), args.begin(), args.end());
    const RunResult r = RunWormchat(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Ids(r.out);
  }
  static std::vector<int> Ids(const std::string& text) {
    std::vector<int> ids;
    std::istringstream in(text);
    int id;
    while (in >> id) ids.push_back(id);
    return ids;
  }
  static std::string Spell(const std::vector<int>& ids) {
    std::string s;
    for (int id : ids) s += " " + std::to_string(id);
    return s;
  }
  TempDir dir_;
};

TEST_F(IdsRun, WithoutTheFlagTheErrorSaysWhereIdsAreTaken) {
  const RunResult r = RunWormchat({"chat", "--model", Model()}, "5 6\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tokenizer.model: missing"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ids of generate, logits, chat, batch and transcript record"),
            std::string::npos)
      << r.err;
}

TEST_F(IdsRun, ChatRepliesInIdsAsGenerateDoes) {
  const std::vector<std::string> sampling = {"--seed", "7", "--temperature", "0.9"};
  std::vector<std::string> args = {"chat", "--model", Model(), "--ids", "-n", "6"};
  args.insert(args.end(), sampling.begin(), sampling.end());
  const RunResult r = RunWormchat(args, "5 17 9\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<int> reply = Generate("5 17 9", 6, sampling);
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(r.out, Spell(reply).substr(1) + "\n");  // a chat reply's leading space is trimmed
}

TEST_F(IdsRun, ChatTurnsAreFedBackToBackWithoutFraming) {
  const std::vector<std::string> greedy = {"--temperature", "0"};
  const RunResult r = RunWormchat(
      {"chat", "--model", Model(), "--ids", "-n", "4", "--temperature", "0"}, "5 17 9\n3 4\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string first, second;
  ASSERT_TRUE(std::getline(lines, first) && std::getline(lines, second)) << r.out;
  std::vector<int> fed = {5, 17, 9};
  std::vector<int> reply = Ids(first);
  EXPECT_EQ(reply, Generate(Spell(fed), 4, greedy));
  if (!reply.empty() && reply.back() == 11) reply.pop_back();  // an ending EOS is not fed
  fed.insert(fed.end(), reply.begin(), reply.end());
  fed.insert(fed.end(), {3, 4});
  EXPECT_EQ(Ids(second), Generate(Spell(fed), 4, greedy));
}

TEST_F(IdsRun, ChatRefusesAMessageThatIsNotIdsAndGoesOn) {
  const RunResult r =
      RunWormchat({"chat", "--model", Model(), "--ids", "-n", "2"}, "hello\n999\n5 6\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("'hello' is not a token id"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("token id 999 is outside the vocabulary [0, 347)"), std::string::npos)
      << r.out;
  EXPECT_EQ(Ids(r.out.substr(r.out.rfind("347)") + 4)).size(), 2u) << r.out;
}

TEST_F(IdsRun, BatchTextLinesAreIdsAndRepliesSpellIds) {
  TempDir tmp;
  const RunResult r =
      Batch(tmp, "5 17 9\n\n4 x\n1 2\n", tmp.File("out.jsonl"),
            {"--model", Model(), "--ids", "-n", "5", "--seed", "3", "--format", "text", "--quiet"});
  EXPECT_EQ(r.exit_code, 1) << r.err;  // line 3 is bad
  const auto recs = Records(ReadFile(tmp.File("out.jsonl")));
  ASSERT_EQ(recs.size(), 3u);
  for (const auto& [id, ids] :
       {std::pair<std::string, std::string>{"batch-1", "5 17 9"}, {"batch-4", "1 2"}}) {
    const std::string custom_id = id.substr(6);
    const std::vector<int> want =
        Generate(ids, 5, {"--seed", std::to_string(DerivedSeed(3, custom_id))});
    EXPECT_EQ(Text(recs.at(id)), Spell(want).substr(1)) << id;  // chat-like: trimmed
  }
  EXPECT_NE(recs.at("batch-3")["error"]["message"].get<std::string>().find(
                "line 3: the prompt: token ids: 'x' is not a token id"),
            std::string::npos)
      << recs.at("batch-3");
}

TEST(BatchPromptIds, APromptOfTokenIdsEqualsItsTextAndBadIdsAreNamed) {
  const RunResult tokens = RunWormchat({"tokenize", "--text", "The cat"});
  ASSERT_EQ(tokens.exit_code, 0) << tokens.err;
  // The default model's chat format adds BOS, also to a raw completion prompt: given as ids, it
  // must be written.
  const json config =
      json::parse(ReadFile(std::string(WORMCHAT_ASSETS_DIR) + "/default-model/config.json"));
  json ids = json::array({config.at("bos_token_id")});
  std::istringstream in(tokens.out);
  for (int id; in >> id;) ids.push_back(id);
  ASSERT_GT(ids.size(), 1u);
  const json by_text = Completion("text", "The cat", {{"seed", 4}, {"max_tokens", 8}});
  json by_ids = by_text;
  by_ids["custom_id"] = "ids";
  by_ids["body"]["prompt"] = ids;
  json too_big = by_ids, negative = by_ids, word = by_ids, empty = by_ids;
  too_big["custom_id"] = "big", too_big["body"]["prompt"] = {1, 1000000};
  negative["custom_id"] = "neg", negative["body"]["prompt"] = {-1};
  word["custom_id"] = "word", word["body"]["prompt"] = {"The"};
  empty["custom_id"] = "empty", empty["body"]["prompt"] = json::array();
  TempDir tmp;
  const RunResult r = Batch(tmp, Jsonl({by_text, by_ids, too_big, negative, word, empty}),
                            tmp.File("out.jsonl"), {"--quiet"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto recs = Records(ReadFile(tmp.File("out.jsonl")));
  ASSERT_EQ(recs.size(), 6u);
  EXPECT_FALSE(Text(recs.at("batch-1")).empty());
  EXPECT_EQ(Text(recs.at("batch-2")), Text(recs.at("batch-1")));
  EXPECT_EQ(recs.at("batch-2")["response"]["body"]["usage"],
            recs.at("batch-1")["response"]["body"]["usage"]);
  const auto message = [&](const char* id) {
    return recs.at(id)["error"]["message"].get<std::string>();
  };
  EXPECT_NE(message("batch-3").find("body.prompt: token id 1000000 at [1] is outside the "
                                    "vocabulary"),
            std::string::npos)
      << message("batch-3");
  EXPECT_NE(message("batch-4").find("body.prompt[0] must be a token id"), std::string::npos)
      << message("batch-4");
  EXPECT_NE(message("batch-5").find("body.prompt[0] must be a token id"), std::string::npos)
      << message("batch-5");
  EXPECT_NE(message("batch-6").find("body.prompt is empty"), std::string::npos)
      << message("batch-6");
}

TEST_F(IdsRun, StopStringsAreRefusedWithIdsInsteadOfNeverMatching) {
  const RunResult gen =
      RunWormchat({"generate", "--model", Model(), "--ids", "5 6", "--stop", "7"});
  EXPECT_EQ(gen.exit_code, 1);
  EXPECT_NE(gen.err.find("--stop matches text, but with --ids"), std::string::npos) << gen.err;
  TempDir tmp;
  const RunResult flag = Batch(tmp, "5 6\n", tmp.File("a.jsonl"),
                               {"--model", Model(), "--ids", "--stop", "7", "--quiet"});
  EXPECT_EQ(flag.exit_code, 1);
  EXPECT_NE(flag.err.find("--stop matches text, but with --ids"), std::string::npos) << flag.err;
  json line = Completion("c", "5 6", {{"stop", "7"}});
  const RunResult body =
      Batch(tmp, Jsonl({line}), tmp.File("b.jsonl"), {"--model", Model(), "--ids", "--quiet"});
  EXPECT_EQ(body.exit_code, 1);
  EXPECT_NE(ReadFile(tmp.File("b.jsonl")).find("line 1: body.stop matches text, but with --ids"),
            std::string::npos)
      << ReadFile(tmp.File("b.jsonl"));
}

TEST_F(IdsRun, TranscriptsRecordIdsAndReplay) {
  TempDir tmp;
  WriteFile(tmp.File("turns.txt"), "5 17 9\n3 4\n");
  const RunResult rec =
      RunWormchat({"transcript", "record", "--model", Model(), "--ids", "--turns",
                   tmp.File("turns.txt"), "--out", tmp.File("t.txt"), "-n", "4", "--seed", "2"});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  const std::string text = ReadFile(tmp.File("t.txt"));
  EXPECT_NE(text.find("\nids: true\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n> 5 17 9\n"), std::string::npos) << text;
  const RunResult replay = RunWormchat({"transcript", "replay", tmp.File("t.txt")});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  // Without the header line the same turns are text, and this model has no tokenizer.
  std::string no_ids = text;
  no_ids.erase(no_ids.find("ids: true\n"), 10);
  WriteFile(tmp.File("t2.txt"), no_ids);
  const RunResult bad = RunWormchat({"transcript", "replay", tmp.File("t2.txt")});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE((bad.out + bad.err).find("tokenizer.model: missing"), std::string::npos)
      << bad.out << bad.err;
}

// --matmul-precision decides a BF16 model's tokens, so a transcript records it (when not the
// default) and replays with it.
TEST(MatmulPrecision, TranscriptsRecordItAndReplay) {
  TempDir tmp;
  WriteFile(tmp.File("turns.txt"), "5 17 9\n3 4\n");
  const std::string model = FixtureDir("mq_bias_bf16");
  const RunResult rec = RunWormchat({"transcript", "record", "--model", model, "--ids",
                                     "--matmul-precision", "f32", "--turns", tmp.File("turns.txt"),
                                     "--out", tmp.File("t.txt"), "-n", "6", "--seed", "2"});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  const std::string text = ReadFile(tmp.File("t.txt"));
  EXPECT_NE(text.find("\nmatmul-precision: f32\n"), std::string::npos) << text;
  const RunResult replay = RunWormchat({"transcript", "replay", tmp.File("t.txt")});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  const RunResult fast =
      RunWormchat({"transcript", "record", "--model", model, "--ids", "--turns",
                   tmp.File("turns.txt"), "--out", tmp.File("f.txt"), "-n", "6"});
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  EXPECT_EQ(ReadFile(tmp.File("f.txt")).find("matmul-precision"), std::string::npos)
      << "the default is not written";
  std::string bad = text;
  bad.replace(bad.find("matmul-precision: f32"), 21, "matmul-precision: f16");
  WriteFile(tmp.File("bad.txt"), bad);
  const RunResult refused = RunWormchat({"transcript", "replay", tmp.File("bad.txt")});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("matmul-precision: 'f16' is not bf16, f32, int8, int7 or int16"),
            std::string::npos)
      << refused.err;
}

// Records a transcript of `turns` on the bf16 fixture with --matmul-precision `precision` (and
// --weights `weights` unless empty), checks that its header names both, and replays it token for
// token on the default threads and on one.
void ExpectRecordedAndReplayed(const std::string& precision, const std::string& weights,
                               const std::string& turns) {
  TempDir tmp;
  WriteFile(tmp.File("turns.txt"), turns);
  std::vector<std::string> args = {"transcript",
                                   "record",
                                   "--model",
                                   FixtureDir("mq_bias_bf16"),
                                   "--ids",
                                   "--matmul-precision",
                                   precision,
                                   "--turns",
                                   tmp.File("turns.txt"),
                                   "--out",
                                   tmp.File("t.txt"),
                                   "-n",
                                   "6",
                                   "--seed",
                                   "2"};
  if (!weights.empty()) args.insert(args.end(), {"--weights", weights});
  const RunResult rec = RunWormchat(args);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  const std::string text = ReadFile(tmp.File("t.txt"));
  EXPECT_NE(text.find("\nmatmul-precision: " + precision + "\n"), std::string::npos) << text;
  if (!weights.empty())
    EXPECT_NE(text.find("\nweights: " + weights + "\n"), std::string::npos) << text;
  const RunResult replay = RunWormchat({"transcript", "replay", tmp.File("t.txt")});
  EXPECT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  const RunResult one = RunWormchat({"transcript", "replay", tmp.File("t.txt"), "--threads", "1"});
  EXPECT_EQ(one.exit_code, 0) << one.out << one.err;
}

// int8 (block-float matrices in integer products) is recorded beside the weights it applies to and
// replays token for token; an unknown value on the command line is one line naming the flag.
TEST(MatmulPrecision, Int8IsRecordedWithItsWeightsAndReplays) {
  ExpectRecordedAndReplayed("int8", "bfp4", "5 17 9\n3 4\n");
  const std::string model = FixtureDir("mq_bias_bf16");
  const RunResult bad = RunWormchat(
      {"generate", "--model", model, "--ids", "5 17", "-n", "2", "--matmul-precision", "int4"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(
      bad.err.find(
          "--matmul-precision 'int4' is not supported; choose bf16, f32, int8, int7 or int16"),
      std::string::npos)
      << bad.err;
  // Without a block-float matrix int8 would change nothing: refused, naming what to add.
  const RunResult none = RunWormchat(
      {"generate", "--model", model, "--ids", "5 17", "-n", "2", "--matmul-precision", "int8"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("--matmul-precision int8 multiplies block-float matrices, and this "
                          "model's are bf16; add --weights bfp8 or bfp4"),
            std::string::npos)
      << none.err;
}

// int7 (int8 with 7-bit activation blocks) likewise, over turns long enough for its AVX2 bfp8
// tiles of 8 tokens; on a model without a block-float matrix it is refused, naming the value.
TEST(MatmulPrecision, Int7IsRecordedAndReplays) {
  ExpectRecordedAndReplayed("int7", "bfp8",
                            "5 17 9 5 17 9 5 17 9 5 17 9 5 17 9 5 17 9\n3 4 3 4 3 4 3 4\n");
  const RunResult none = RunWormchat({"generate", "--model", FixtureDir("mq_bias_bf16"), "--ids",
                                      "5 17", "-n", "2", "--matmul-precision", "int7"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("--matmul-precision int7 multiplies block-float matrices"),
            std::string::npos)
      << none.err;
}

// int16 (BF16 matrices in 16-bit integer products) is recorded and replays token for token, the
// same with one thread as with two; on a model without a BF16 matrix it is refused, naming what
// to add.
TEST(MatmulPrecision, Int16IsRecordedAndReplays) {
  ExpectRecordedAndReplayed("int16", "", "5 17 9\n3 4\n");
  const RunResult none = RunWormchat({"generate", "--model", FixtureDir("mq_f32"), "--ids", "5 17",
                                      "-n", "2", "--matmul-precision", "int16"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("--matmul-precision int16 multiplies BF16 matrices, and this model's "
                          "are f32; add --weights bf16"),
            std::string::npos)
      << none.err;
}

}  // namespace
}  // namespace wc::test
