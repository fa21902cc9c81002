// Beam search through the front ends (issue 13): `generate --beams ... --json` and `--ids` against
// the reference fixtures, `--beams 1` as greedy, batch bodies with num_beams / n equal to
// generate, the chat's /beams, and every bad value refused with one line naming the flag or field.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace wc {
namespace {

using nlohmann::json;
using test::RunWormchat;

json GenerateJson(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"generate", "--json"};
  all.insert(all.end(), args.begin(), args.end());
  const test::RunResult r = RunWormchat(all);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::CountLines(r.out), 1) << "one JSON object on one line: " << r.out;
  return json::parse(r.out);
}

std::string Join(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

TEST(BeamCli, GenerateJsonListsTheHypothesesBestFirst) {
  const json out = GenerateJson({"--prompt", "What is a falcon?", "--beams", "4", "--num-return",
                                 "3", "-n", "30", "--length-penalty", "0.5"});
  const json& seqs = out.at("sequences");
  ASSERT_EQ(seqs.size(), 3u);
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_TRUE(seqs[i].at("text").is_string());
    EXPECT_FALSE(seqs[i].at("ids").empty());
    const std::string reason = seqs[i].at("finish_reason");
    EXPECT_TRUE(reason == "stop" || reason == "length") << reason;
    if (i > 0) {
      EXPECT_GE(seqs[i - 1].at("score").get<double>(), seqs[i].at("score").get<double>());
    }
  }
  // Plain output prints the same best text.
  const test::RunResult plain = RunWormchat({"generate", "--prompt", "What is a falcon?", "--beams",
                                             "4", "-n", "30", "--length-penalty", "0.5"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, seqs[0].at("text").get<std::string>() + "\n");
}

TEST(BeamCli, OneBeamIsTheGreedyReplyWhateverTheSamplingFlags) {
  const json greedy =
      GenerateJson({"--prompt", "Define harbor.", "-n", "24", "--temperature", "0"});
  const json beam = GenerateJson({"--prompt", "Define harbor.", "-n", "24", "--beams", "1",
                                  "--temperature", "1.5", "--top-k", "3", "--seed", "9"});
  EXPECT_EQ(beam["sequences"][0]["ids"], greedy["sequences"][0]["ids"]);
  EXPECT_EQ(beam["sequences"][0]["text"], greedy["sequences"][0]["text"]);
  EXPECT_EQ(beam["sequences"][0]["finish_reason"], greedy["sequences"][0]["finish_reason"]);
  // A sampled sequence scores its log-probability; a hypothesis divides it by length^1.
  const double length = static_cast<double>(beam["sequences"][0]["ids"].size());
  EXPECT_NEAR(beam["sequences"][0]["score"].get<double>() * length,
              greedy["sequences"][0]["score"].get<double>(), 1e-9);
}

TEST(BeamCli, GenerateIdsMatchesTheReferenceFixtures) {
  // The committed reference cases of two beams or more, end to end: --ids on a model without a
  // tokenizer, F32 KV, the case's EOS written into a copy of the fixture's config.json.
  const json fixtures = json::parse(test::ReadFile(test::FixtureDir("beams") + "/cases.json"));
  int run = 0;
  for (const json& c : fixtures.at("cases")) {
    if (c.at("num_beams").get<int>() < 2) continue;
    ++run;
    test::TempDir dir;
    test::CopyDir(test::FixtureDir(c.at("model")), dir.path());
    json cfg = json::parse(test::ReadFile(dir.File("config.json")));
    cfg["eos_token_id"] = c.at("eos_token_id");
    test::WriteFile(dir.File("config.json"), cfg.dump());
    std::vector<std::string> args = {"--model",
                                     dir.path(),
                                     "--kv-dtype",
                                     "f32",
                                     "--ids",
                                     Join(c.at("prompt_ids").get<std::vector<int>>()),
                                     "--beams",
                                     std::to_string(c.at("num_beams").get<int>()),
                                     "--length-penalty",
                                     std::to_string(c.at("length_penalty").get<double>()),
                                     "--num-return",
                                     std::to_string(c.at("num_return").get<int>()),
                                     "-n",
                                     std::to_string(c.at("max_new_tokens").get<int>())};
    if (c.at("early_stopping").get<bool>()) args.push_back("--early-stopping");
    const json out = GenerateJson(args);
    const std::string name = c.at("name");
    const json& want = c.at("expected");
    ASSERT_EQ(out.at("sequences").size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i) {
      const json& got = out["sequences"][i];
      EXPECT_EQ(got.at("ids"), want[i].at("ids")) << name << " sequence " << i;
      EXPECT_EQ(got.at("finish_reason"), want[i].at("finish_reason")) << name;
      const double ws = want[i].at("score"), gs = got.at("score");
      EXPECT_LE(std::fabs(gs - ws), 1e-4 * std::fabs(ws)) << name << " sequence " << i;
      EXPECT_EQ(got.at("text"), "") << "no tokenizer: no text";
    }
  }
  EXPECT_GE(run, 20);
}

TEST(BeamCli, BatchChoicesAreTheHypothesesGenerateReturns) {
  test::TempDir dir;
  test::WriteFile(
      dir.File("in.jsonl"),
      R"({"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"What is a falcon?"}],"max_tokens":30,"num_beams":4,"n":2,"length_penalty":0.5,"early_stopping":true}})"
      "\n"
      R"({"custom_id":"s","method":"POST","url":"/v1/completions","body":{"prompt":"The harbor","max_tokens":8,"temperature":0.8}})"
      "\n");
  const test::RunResult r =
      RunWormchat({"batch", "-i", dir.File("in.jsonl"), "-o", dir.File("out.jsonl"), "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json gen =
      GenerateJson({"--prompt", "What is a falcon?", "-n", "30", "--beams", "4", "--num-return",
                    "2", "--length-penalty", "0.5", "--early-stopping"});
  bool seen = false;
  std::string text = test::ReadFile(dir.File("out.jsonl"));
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    const json rec = json::parse(text.substr(start, end - start));
    start = end + 1;
    if (rec["custom_id"] != "b") {
      EXPECT_EQ(rec["response"]["body"]["choices"].size(), 1u);
      continue;
    }
    seen = true;
    const json& choices = rec["response"]["body"]["choices"];
    ASSERT_EQ(choices.size(), 2u);
    int completion = 0;
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(choices[i]["index"], i);
      EXPECT_EQ(choices[i]["message"]["content"], gen["sequences"][i]["text"]);
      EXPECT_EQ(choices[i]["finish_reason"], gen["sequences"][i]["finish_reason"]);
      completion += static_cast<int>(gen["sequences"][i]["ids"].size());
    }
    EXPECT_EQ(rec["response"]["body"]["usage"]["completion_tokens"], completion);
  }
  EXPECT_TRUE(seen);
}

TEST(BeamCli, ChatBeamsShowTheBestHypothesis) {
  const json gen = GenerateJson({"--prompt", "What is a falcon?", "-n", "30", "--beams", "3"});
  const test::RunResult r =
      RunWormchat({"chat", "-n", "30"}, "/beams 3\nWhat is a falcon?\n/beams 99\n/beams 0\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("beam search with 3 beams"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(gen["sequences"][0]["text"].get<std::string>() + "\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("/beams must be a whole number in 0-16 (0 = sample), got 99"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(sampling)"), std::string::npos) << r.out;
}

TEST(BeamCli, BadValuesAreOneLineErrorsNamingTheFlag) {
  struct Bad {
    std::vector<std::string> args;
    std::string names;
  };
  const std::vector<Bad> bad = {
      {{"--beams", "0"}, "--beams"},
      {{"--beams", "17"}, "--beams"},
      {{"--beams", "2", "--num-return", "3"}, "--num-return"},
      {{"--beams", "2", "--num-return", "0"}, "--num-return"},
      {{"--beams", "2", "--length-penalty", "-1"}, "--length-penalty"},
      {{"--beams", "2", "--length-penalty", "nan"}, "--length-penalty"},
      {{"--beams", "2", "--length-penalty", "inf"}, "--length-penalty"},
      {{"--num-return", "2"}, "--beams"},
      {{"--early-stopping"}, "--beams"},
      {{"--beams", "2", "--max-batch-tokens", "1"}, "--max-batch-tokens"},
  };
  for (const Bad& b : bad) {
    std::vector<std::string> args = {"generate", "--prompt", "hi", "-n", "2"};
    args.insert(args.end(), b.args.begin(), b.args.end());
    const test::RunResult r = RunWormchat(args);
    std::string label;
    for (const std::string& a : b.args) label += a + " ";
    EXPECT_NE(r.exit_code, 0) << label;
    EXPECT_EQ(test::CountLines(r.err), 1) << label << r.err;
    EXPECT_NE(r.err.find(b.names), std::string::npos) << label << r.err;
    EXPECT_TRUE(r.out.empty()) << label << r.out;
  }
  // --prompt and --ids: exactly one.
  const test::RunResult both = RunWormchat({"generate", "--prompt", "hi", "--ids", "1 2"});
  EXPECT_NE(both.exit_code, 0);
  const test::RunResult neither = RunWormchat({"generate", "-n", "2"});
  EXPECT_NE(neither.exit_code, 0);
  EXPECT_NE(neither.err.find("--prompt or --ids"), std::string::npos) << neither.err;
  const test::RunResult bad_id = RunWormchat({"generate", "--ids", "1 x"});
  EXPECT_EQ(bad_id.exit_code, 1);
  EXPECT_NE(bad_id.err.find("--ids"), std::string::npos) << bad_id.err;
}

}  // namespace
}  // namespace wc
