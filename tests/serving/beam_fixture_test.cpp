// Beam requests in the serving loop against the independent Python reference (issue 13):
// tests/fixtures/beams/cases.json, made by tools/python/make_beam_fixtures.py from falcon_ref's
// full-sequence forward passes. Each case runs on a copy of an F32 model fixture whose config.json
// names the case's eos_token_id, with F32 KV, paged (the loop's default block size) and then
// contiguous: the sequences must match the reference (ids, reasons; scores within 1e-4 relative -
// every decision in a case has a margin of at least 1e-4, so float32 noise cannot flip one) and the
// two KV layouts must give identical bits.
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kvcache/kv_cache.h"
#include "model/decoder_model.h"
#include "serving/request.h"
#include "serving/serving_loop.h"
#include "serving/waiting_observer.h"
#include "tests/test_util.h"

namespace wc {
namespace {

constexpr double kScoreRelTol = 1e-4;

struct ExpectedSequence {
  std::vector<int> ids;
  double score = 0;
  std::string finish_reason;  // "stop" or "length"
};

struct BeamCase {
  std::string name, model;
  int eos_token_id = 0;
  std::vector<int> prompt_ids;
  BeamParams beams;
  int max_new_tokens = 0;
  std::vector<ExpectedSequence> expected;
};

// Every case of the fixture file; throws (failing test discovery, never skipping) when it is
// missing or malformed.
std::vector<BeamCase> LoadCases() {
  const std::string path = test::FixtureDir("beams") + "/cases.json";
  const nlohmann::json j = nlohmann::json::parse(test::ReadFile(path));
  if (j.at("format") != "wormchat-beam-fixtures-1")
    throw std::runtime_error(path + ": unknown format");
  std::vector<BeamCase> cases;
  for (const nlohmann::json& c : j.at("cases")) {
    BeamCase bc;
    bc.name = c.at("name").get<std::string>();
    bc.model = c.at("model").get<std::string>();
    bc.eos_token_id = c.at("eos_token_id").get<int>();
    bc.prompt_ids = c.at("prompt_ids").get<std::vector<int>>();
    bc.beams.num_beams = c.at("num_beams").get<int>();
    bc.beams.length_penalty = c.at("length_penalty").get<float>();
    bc.beams.early_stopping = c.at("early_stopping").get<bool>();
    bc.beams.num_return = c.at("num_return").get<int>();
    bc.max_new_tokens = c.at("max_new_tokens").get<int>();
    for (const nlohmann::json& s : c.at("expected"))
      bc.expected.push_back({s.at("ids").get<std::vector<int>>(), s.at("score").get<double>(),
                             s.at("finish_reason").get<std::string>()});
    cases.push_back(std::move(bc));
  }
  if (cases.empty()) throw std::runtime_error(path + ": no cases");
  return cases;
}

const std::vector<BeamCase>& Cases() {
  static const std::vector<BeamCase> cases = LoadCases();
  return cases;
}

std::string Ids(const std::vector<int>& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
  return s.str();
}

const char* ReasonName(StopReason r) {
  const char* name = FinishReasonName(r);
  return name != nullptr ? name : StopReasonName(r);
}

// Runs the case's beam request on `model` with F32 KV; block_size 0 = contiguous.
RequestResult RunBeams(const DecoderModel& model, const BeamCase& c, int block_size) {
  ServingOptions options;
  options.user_rows = 8;
  options.threads = 1;
  options.kv.dtype = KVDType::kF32;
  options.kv.block_size = block_size;
  ServingLoop loop(model, /*tokenizer=*/nullptr, std::nullopt, options);
  Request req;
  req.prompt_ids = c.prompt_ids;
  req.max_new_tokens = c.max_new_tokens;
  req.stop_at_eos = true;
  req.beams = c.beams;
  auto obs = std::make_shared<WaitingObserver>();
  req.observer = obs;
  loop.Submit(std::move(req));
  const RequestResult* r = obs->WaitFor(std::chrono::minutes(5));
  if (r == nullptr) {
    ADD_FAILURE() << c.name << " (block_size " << block_size << "): no result after 5 minutes";
    return RequestResult{};
  }
  return *r;
}

class BeamFixtureTest : public ::testing::TestWithParam<size_t> {};

TEST_P(BeamFixtureTest, MatchesTheReferenceOnPagedAndContiguousKV) {
  const BeamCase& c = Cases()[GetParam()];
  const std::string label = "case " + c.name + " (model " + c.model + ", eos " +
                            std::to_string(c.eos_token_id) + ", W " +
                            std::to_string(c.beams.num_beams) + ")";
  test::TempDir dir;
  test::CopyDir(test::FixtureDir(c.model), dir.path());
  nlohmann::json config = nlohmann::json::parse(test::ReadFile(dir.File("config.json")));
  config["eos_token_id"] = c.eos_token_id;
  test::WriteFile(dir.File("config.json"), config.dump(2));
  const std::unique_ptr<DecoderModel> model = DecoderModel::Load(dir.path(), ModelOptions{});
  ASSERT_EQ(model->config().eos_token_id, c.eos_token_id) << label;

  const RequestResult paged = RunBeams(*model, c, kServingBlockSize);
  ASSERT_NE(paged.reason, StopReason::kError) << label << ": " << paged.error;
  ASSERT_NE(paged.reason, StopReason::kCancelled) << label;
  ASSERT_EQ(paged.sequences.size(), c.expected.size())
      << label << ": got " << paged.sequences.size() << " sequences, the reference "
      << c.expected.size();
  for (size_t i = 0; i < c.expected.size(); ++i) {
    const BeamSequence& got = paged.sequences[i];
    const ExpectedSequence& want = c.expected[i];
    const std::string at = label + ", sequence " + std::to_string(i);
    EXPECT_EQ(got.tokens, want.ids)
        << at << ": ids [" << Ids(got.tokens) << "], the reference [" << Ids(want.ids) << "]";
    EXPECT_NEAR(got.score, want.score, kScoreRelTol * std::fabs(want.score))
        << at << ": score " << got.score << ", the reference " << want.score;
    EXPECT_EQ(ReasonName(got.reason), want.finish_reason)
        << at << ": finish reason " << StopReasonName(got.reason);
  }
  // RequestResult's own tokens and reason are the best sequence's.
  EXPECT_EQ(paged.tokens, paged.sequences.front().tokens) << label;
  EXPECT_EQ(paged.reason, paged.sequences.front().reason) << label;

  const RequestResult contiguous = RunBeams(*model, c, /*block_size=*/0);
  ASSERT_NE(contiguous.reason, StopReason::kError) << label << ": " << contiguous.error;
  ASSERT_EQ(contiguous.sequences.size(), paged.sequences.size()) << label << ", contiguous KV";
  for (size_t i = 0; i < paged.sequences.size(); ++i) {
    const BeamSequence& p = paged.sequences[i];
    const BeamSequence& q = contiguous.sequences[i];
    const std::string at = label + ", sequence " + std::to_string(i) + ", contiguous vs paged KV";
    EXPECT_EQ(q.tokens, p.tokens) << at;
    EXPECT_EQ(std::memcmp(&q.score, &p.score, sizeof(double)), 0)
        << at << ": score " << q.score << " vs " << p.score;
    EXPECT_EQ(q.reason, p.reason) << at;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BeamFixtureTest, ::testing::Range<size_t>(0, Cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return Cases()[info.param].name;
                         });

}  // namespace
}  // namespace wc
