// A GGUF vocabulary's end-of-generation ids (EOT, EOM, ...: ModelConfig::end_token_ids) end a
// reply in the serving loop as EOS does, greedy and in beam search; everything else about the run
// stays the same bits. The model is tests/fixtures/gguf/mq_f32.gguf, and the same file with
// tokenizer.ggml.eot_token_id spliced in (its tensors untouched): the EOT is a token the plain
// file's greedy reply reaches, so the two runs agree up to it and the second ends there.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "model/decoder_model.h"
#include "model/model_tokenizer.h"
#include "serving/serving_loop.h"
#include "tests/model/gguf_writer.h"
#include "tests/serving/serving_loop_util.h"
#include "tests/test_util.h"

namespace wc {
namespace {

using test::Outcome;
using test::RequestSpec;

struct GgufModel {
  std::unique_ptr<DecoderModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

GgufModel LoadGguf(const std::string& path) {
  GgufModel m;
  m.model = DecoderModel::Load(path, ModelOptions());
  m.tokenizer = LoadModelTokenizer(path);
  return m;
}

// Runs `spec` alone on `m` with `threads` OpenMP threads.
Outcome RunOn(const GgufModel& m, const RequestSpec& spec, int threads = 1) {
  ServingOptions o = test::Rows(spec.beams ? spec.beams->num_beams : 1);
  o.threads = threads;
  o.check_block_counts = true;
  ServingLoop loop(*m.model, m.tokenizer.get(), std::nullopt, o);
  return test::RunOne(loop, spec);
}

RequestSpec GreedyIds(int max_new_tokens) {
  RequestSpec s;
  s.prompt = {5, 17, 42, 9};
  s.sampling = test::Greedy();
  s.max_new_tokens = max_new_tokens;
  return s;
}

class GgufEndIds : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string plain_path = test::FixtureDir("gguf") + "/mq_f32.gguf";
    plain_ = LoadGguf(plain_path);
    const int eos = plain_.model->config().eos_token_id;
    ASSERT_TRUE(plain_.model->config().end_token_ids.empty());
    // The plain file's greedy reply; its first new id (not EOS) from the third token on is the
    // EOT of the second file.
    reply_ = RunOn(plain_, GreedyIds(12)).result.tokens;
    ASSERT_EQ(reply_.size(), 12u);
    for (size_t j = 2; j < reply_.size() && end_at_ < 0; ++j)
      if (reply_[j] != eos && std::find(reply_.begin(), reply_.begin() + j, reply_[j]) ==
                                  reply_.begin() + static_cast<int64_t>(j))
        end_at_ = static_cast<int>(j);
    ASSERT_GE(end_at_, 0);
    eot_ = reply_[static_cast<size_t>(end_at_)];
    test::GgufWriter keys;
    keys.U32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(eot_));
    const std::string bytes = test::ReadFile(plain_path);
    const std::vector<uint8_t> spliced =
        test::AddKeys(std::vector<uint8_t>(bytes.begin(), bytes.end()), keys);
    test::WriteFile(dir_.File("eot.gguf"), std::string(spliced.begin(), spliced.end()));
    eot_model_ = LoadGguf(dir_.File("eot.gguf"));
  }

  test::TempDir dir_;
  GgufModel plain_, eot_model_;
  std::vector<int> reply_;
  int end_at_ = -1, eot_ = -1;
};

TEST_F(GgufEndIds, AnEotEndsTheReplyAsEosDoes) {
  EXPECT_EQ(eot_model_.model->config().end_token_ids, std::vector<int>{eot_});
  EXPECT_TRUE(eot_model_.model->config().EndsGeneration(eot_));
  const Outcome plain = RunOn(plain_, GreedyIds(12));
  const Outcome ended = RunOn(eot_model_, GreedyIds(12));
  EXPECT_EQ(ended.result.reason, StopReason::kEos);
  EXPECT_EQ(ended.result.tokens,
            std::vector<int>(reply_.begin(), reply_.begin() + end_at_ + 1));  // the EOT included
  // Its text is that of the tokens before it; every logit up to it is the plain file's.
  std::string text;
  for (int i = 0; i < end_at_; ++i) text += eot_model_.tokenizer->TokenBytes(reply_[i]);
  EXPECT_EQ(ended.result.text, text);
  ASSERT_EQ(ended.logits.size(), static_cast<size_t>(end_at_ + 1));
  for (int i = 0; i <= end_at_; ++i) EXPECT_TRUE(test::SameBits(ended.logits[i], plain.logits[i]));
  // The same on two threads.
  test::ExpectSameOutcome(ended, RunOn(eot_model_, GreedyIds(12), 2), "2 threads");

  // stop_at_eos false: generation goes on through it, as through EOS.
  RequestSpec on = GreedyIds(12);
  on.stop_at_eos = false;
  const Outcome through = RunOn(eot_model_, on);
  EXPECT_EQ(through.result.reason, StopReason::kMaxTokens);
  EXPECT_EQ(through.result.tokens, reply_);
}

// Beam search ends a hypothesis at the EOT exactly where the plain file's beams end one at a stop
// string that is the EOT's text: the same sequences and scores, each named eos instead of stop.
TEST_F(GgufEndIds, BeamsEndAHypothesisAtTheEot) {
  const std::string eot_text(plain_.tokenizer->TokenBytes(eot_));
  ASSERT_FALSE(eot_text.empty());
  for (int width : {2, 4}) {
    RequestSpec beams = GreedyIds(10);
    beams.beams = BeamParams{width, 1.0f, false, width};
    RequestSpec stopped = beams;
    stopped.stop = {eot_text};
    const Outcome want = RunOn(plain_, stopped);
    const Outcome got = RunOn(eot_model_, beams);
    ASSERT_EQ(got.result.sequences.size(), want.result.sequences.size()) << width;
    int ended = 0;
    for (size_t i = 0; i < got.result.sequences.size(); ++i) {
      const BeamSequence &g = got.result.sequences[i], &w = want.result.sequences[i];
      EXPECT_EQ(g.tokens, w.tokens) << width << " " << i;
      EXPECT_EQ(g.score, w.score) << width << " " << i;
      EXPECT_EQ(g.text, w.text) << width << " " << i;
      EXPECT_EQ(g.reason, w.reason == StopReason::kStopString ? StopReason::kEos : w.reason);
      if (g.reason == StopReason::kEos) {
        ++ended;
        EXPECT_EQ(g.tokens.back(), eot_);
      }
    }
    EXPECT_GT(ended, 0) << "width " << width << ": no hypothesis reached the EOT";
  }
}

}  // namespace
}  // namespace wc
