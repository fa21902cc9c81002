// Beam requests in the serving loop (issue 13): W = 1 is greedy whatever the sampling settings,
// the returned hypotheses are ranked and worded as their tokens say, the KV they hold stays within
// the shared-prompt bound, a session goes on with the best hypothesis, cancellation and a stress
// mix give every block back, and bad values are refused naming the flag.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/sanitized.h"
#include "tests/serving/serving_loop_util.h"
#include "util/rng.h"

namespace wc {
namespace {

using test::Outcome;
using test::RequestSpec;

using test::M;

BeamParams Beams(int w, float length_penalty = 1.0f, bool early = false, int num_return = 1) {
  BeamParams b;
  b.num_beams = w;
  b.length_penalty = length_penalty;
  b.early_stopping = early;
  b.num_return = num_return;
  return b;
}

std::string Detokenize(const std::vector<int>& tokens) {
  std::string s;
  for (int t : tokens) s += M().tokenizer->TokenBytes(t);
  return s;
}

TEST(ServingLoopBeams, OneBeamIsGreedyWhateverTheSamplingSettings) {
  auto loop = test::MakeLoop(test::Rows(4));
  for (int i = 0; i < 4; ++i) {
    RequestSpec greedy = i % 2 == 0 ? test::GreedyChat("What is a falcon?", 24) : RequestSpec{};
    if (i % 2 == 1) {
      greedy.prompt = test::TextPrompt(10 + 7 * i, 3 * i);
      greedy.sampling = test::Greedy();
      greedy.max_new_tokens = 20;
    }
    RequestSpec beam = greedy;
    beam.sampling.temperature = 1.3f;  // ignored: beams are deterministic
    beam.sampling.top_k = 5;
    beam.seed = 77;
    beam.beams = Beams(1, i == 3 ? 2.0f : 1.0f);
    const Outcome want = test::RunOne(*loop, greedy);
    const Outcome got = test::RunOne(*loop, beam);
    const std::string label = Cat("prompt ", i);
    EXPECT_EQ(got.result.tokens, want.result.tokens) << label;
    EXPECT_EQ(got.result.text, want.result.text) << label;
    EXPECT_EQ(got.result.reason, want.result.reason) << label;
    ASSERT_EQ(got.result.sequences.size(), 1u) << label;
    EXPECT_EQ(got.result.sequences[0].tokens, want.result.tokens) << label;
    EXPECT_TRUE(got.logits.empty()) << label << ": a beam request streams no tokens";
  }
}

TEST(ServingLoopBeams, HypothesesAreRankedScoredAndWorded) {
  ServingOptions o = test::Rows(8);
  const int bs = o.kv.block_size;
  auto loop = test::MakeLoop(o);
  for (const float lp : {0.5f, 1.0f, 2.0f}) {
    RequestSpec s = test::GreedyChat("Describe a harbor at night.", 30);
    s.beams = Beams(4, lp, /*early=*/false, /*num_return=*/4);
    const Outcome out = test::RunOne(*loop, s);
    const RequestResult& r = out.result;
    const std::string label = Cat("length penalty ", lp);
    ASSERT_EQ(r.sequences.size(), 4u) << label;
    EXPECT_EQ(r.tokens, r.sequences[0].tokens) << label;
    EXPECT_EQ(r.text, r.sequences[0].text) << label;
    EXPECT_EQ(r.reason, r.sequences[0].reason) << label;
    for (size_t i = 0; i < r.sequences.size(); ++i) {
      const BeamSequence& seq = r.sequences[i];
      ASSERT_FALSE(seq.tokens.empty()) << label;
      EXPECT_LE(static_cast<int>(seq.tokens.size()), 30) << label;
      if (i > 0) {
        EXPECT_GE(r.sequences[i - 1].score, seq.score) << label << ": ranked best first";
      }
      EXPECT_LT(seq.score, 0) << label;
      const bool eos = seq.tokens.back() == M().config().eos_token_id;
      EXPECT_EQ(seq.reason == StopReason::kEos, eos) << label;
      if (seq.reason == StopReason::kMaxTokens) {
        EXPECT_EQ(seq.tokens.size(), 30u) << label;
      }
      if (seq.reason != StopReason::kStopString) {
        // The text is the tokens' bytes (the EOS dropped), trimmed of the reply's leading space.
        std::vector<int> body = seq.tokens;
        if (eos) body.pop_back();
        std::string want = Detokenize(body);
        want.erase(0, want.find_first_not_of(" "));
        EXPECT_EQ(seq.text, want) << label << ": sequence " << i;
      }
    }
    // Held KV: the prompt's full blocks once, then per beam a copy of its partly filled block and
    // the blocks of its own tokens - far below a copy of the prompt per beam.
    const int64_t block_bytes =
        KVBytesPerToken(M().model->CacheShape(1, 512), o.kv.dtype, o.kv.scale) * bs;
    const int prompt = r.prompt_tokens;
    const int64_t bound = (prompt / bs + 4 * ((prompt % bs + 30 + bs - 1) / bs)) * block_bytes;
    EXPECT_GT(r.kv_bytes_peak, 0) << label;
    EXPECT_LE(r.kv_bytes_peak, bound) << label;
  }
}

TEST(ServingLoopBeams, LongPromptIsHeldOnceAcrossBeams) {
  // A prompt of whole blocks: the beams hold it once plus their own tokens, at most prompt +
  // W x generated + one block per beam (the bound), versus W copies done naively.
  ServingOptions o = test::Rows(8);
  const int bs = o.kv.block_size;
  auto loop = test::MakeLoop(o);
  RequestSpec s;
  s.prompt = test::TextPrompt(4 * bs);
  s.max_new_tokens = 40;
  s.stop_at_eos = false;
  s.beams = Beams(8);
  const RequestResult r = test::RunOne(*loop, s).result;
  ASSERT_EQ(r.sequences.size(), 1u);
  const int64_t per_token = KVBytesPerToken(M().model->CacheShape(1, 512), o.kv.dtype, o.kv.scale);
  const int64_t bound = (4 * bs + 8 * 40) * per_token + 8 * bs * per_token;
  EXPECT_LE(r.kv_bytes_peak, bound);
  EXPECT_GE(r.kv_bytes_peak, 4 * bs * per_token);
  EXPECT_LT(r.kv_bytes_peak, 8 * 4 * bs * per_token / 2) << "shared, not copied";
  // Contiguous rows share through the cache indirection: the prompt once, and the beams' tokens
  // with what their lineages share counted once (the last step's are never fed); no rounding.
  o.kv.block_size = 0;
  auto contiguous = test::MakeLoop(o);
  const RequestResult c = test::RunOne(*contiguous, s).result;
  EXPECT_EQ(c.sequences[0].tokens, r.sequences[0].tokens);
  EXPECT_LE(c.kv_bytes_peak, (4 * bs + 8 * 39) * per_token);
  EXPECT_GE(c.kv_bytes_peak, (4 * bs + 39) * per_token);
}

TEST(ServingLoopBeams, EarlyStoppingEndsNoLaterThanWithout) {
  auto loop = test::MakeLoop(test::Rows(8));
  RequestSpec s = test::GreedyChat("What is patience?", 40);
  s.beams = Beams(4, 1.0f, /*early=*/true, 4);
  const RequestResult early = test::RunOne(*loop, s).result;
  s.beams->early_stopping = false;
  const RequestResult late = test::RunOne(*loop, s).result;
  ASSERT_FALSE(early.sequences.empty());
  ASSERT_FALSE(late.sequences.empty());
  // Without early stopping the search can only find better hypotheses.
  EXPECT_GE(late.sequences[0].score, early.sequences[0].score);
}

TEST(ServingLoopBeams, StopStringEndsAHypothesisAndCutsItsText) {
  auto loop = test::MakeLoop(test::Rows(4));
  RequestSpec s = test::GreedyChat("What is a falcon?", 24);
  s.beams = Beams(2);
  const RequestResult plain = test::RunOne(*loop, s).result;
  ASSERT_GE(plain.text.size(), 6u);
  // A stop string the best hypothesis reaches: the text before it is kept.
  const std::string stop = plain.text.substr(3, 3);
  s.stop = {stop};
  const RequestResult cut = test::RunOne(*loop, s).result;
  ASSERT_FALSE(cut.sequences.empty());
  bool any_stop = false;
  for (const BeamSequence& seq : cut.sequences) {
    EXPECT_EQ(seq.text.find(stop), std::string::npos) << seq.text;
    any_stop |= seq.reason == StopReason::kStopString;
  }
  EXPECT_TRUE(any_stop);
}

TEST(ServingLoopBeams, SessionGoesOnWithTheBestHypothesis) {
  ServingOptions o = test::Rows(6);
  auto loop = test::MakeLoop(o);
  const SessionId session = loop->OpenSession();
  RequestSpec turn = test::GreedyChat("What is a falcon?", 16);
  turn.prompt.clear();
  turn.prompt_text = "What is a falcon?";
  turn.session = session;
  turn.beams = Beams(4);
  const RequestResult first = test::RunOne(*loop, turn).result;
  ASSERT_EQ(first.sequences.size(), 1u);
  std::vector<int> kept = first.tokens;
  if (first.reason == StopReason::kEos || first.reason == StopReason::kStopString) kept.pop_back();
  EXPECT_EQ(first.session_pos, first.prompt_tokens + static_cast<int>(kept.size()));
  // While idle, the session holds its row and the blocks of the prompt only (the beams' are back).
  ASSERT_TRUE(test::WaitUntil([&] { return loop->status().active_rows == 0; }));
  ServingStatus st = loop->status();
  EXPECT_EQ(st.session_rows, 1);
  EXPECT_LE(st.kv_blocks_used, (first.prompt_tokens + o.kv.block_size - 1) / o.kv.block_size);
  // The next turn (sampled) sees the conversation with the best reply in it.
  turn.beams.reset();
  turn.prompt_text = "And a harbor?";
  const RequestResult second = test::RunOne(*loop, turn).result;
  EXPECT_NE(second.reason, StopReason::kError) << second.error;
  // Its feed is the kept reply, then the new turn; the session then holds both turns.
  EXPECT_GT(second.prompt_tokens, static_cast<int>(kept.size()));
  int second_kept = static_cast<int>(second.tokens.size());
  if (second.reason == StopReason::kEos || second.reason == StopReason::kStopString) --second_kept;
  EXPECT_EQ(second.session_pos, first.prompt_tokens + second.prompt_tokens + second_kept);
  loop->CloseSession(session);
  ASSERT_TRUE(test::WaitUntil([&] { return loop->status().kv_blocks_used == 0; }));
}

TEST(ServingLoopBeams, CancellingMidwayFreesEveryBlock) {
  ServingOptions o = test::Rows(8);
  o.threads = test::LoopThreads();
  auto loop = test::MakeLoop(o);
  const int total = loop->status().kv_blocks_total;
  ASSERT_GT(total, 0);
  RequestSpec s;
  s.prompt = test::TextPrompt(150);
  s.max_new_tokens = 300;
  s.stop_at_eos = false;
  s.beams = Beams(8);
  auto observer = test::Submit(*loop, s);
  ASSERT_TRUE(test::WaitUntil([&] { return loop->status().tokens_sampled >= 8 * 5; }));
  EXPECT_GT(loop->status().kv_blocks_used, 0);
  loop->Cancel(1);
  const RequestResult r = test::Await(*observer).result;
  EXPECT_EQ(r.reason, StopReason::kCancelled);
  EXPECT_TRUE(r.sequences.empty());
  ASSERT_TRUE(test::WaitUntil([&] {
    const ServingStatus st = loop->status();
    return st.kv_blocks_used == 0 && st.kv_blocks_reserved == 0 && st.active_rows == 0;
  })) << "blocks used "
      << loop->status().kv_blocks_used;
}

TEST(ServingLoopBeams, RandomBeamAndPlainRequestsWithCancellationsLeakNothing) {
  // Random beam widths, prompts, lengths and cancellations on a small pool: the block refcounts
  // stay consistent (the pool checks every AddRef/Release and the loop would fail the requests
  // with an error), nothing waits forever, and the pool is whole at the end.
  ServingOptions o = test::Rows(12);
  o.kv.block_size = 16;
  o.kv.n_blocks = 160;
  o.max_batch_tokens = 48;
  o.threads = test::LoopThreads();
  auto loop = test::MakeLoop(o);
  Rng rng(13);
  std::vector<std::shared_ptr<WaitingObserver>> observers;
  std::vector<RequestId> ids;
  const int n_requests = test::kSanitized ? 24 : 40;  // sanitizers: 3-8x slower
  for (int i = 0; i < n_requests; ++i) {
    RequestSpec s;
    s.prompt = test::TextPrompt(1 + static_cast<int>(rng.Next() % 90), static_cast<int>(i * 11));
    s.max_new_tokens = static_cast<int>(rng.Next() % 30);
    s.stop_at_eos = rng.Next() % 2 == 0;
    if (rng.Next() % 2 == 0) {
      s.beams = Beams(1 + static_cast<int>(rng.Next() % 8), 1.0f, rng.Next() % 2 == 0);
    } else {
      s.sampling.temperature = 0.9f;
      s.seed = i;
    }
    observers.push_back(test::Submit(*loop, s));
    ids.push_back(static_cast<RequestId>(i + 1));
    if (rng.Next() % 4 == 0) loop->Cancel(ids[rng.Next() % ids.size()]);
    if (rng.Next() % 3 == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(rng.Next() % 30));
  }
  int cancelled = 0, beams_done = 0;
  for (auto& obs : observers) {
    const RequestResult r = test::Await(*obs).result;
    ASSERT_NE(r.reason, StopReason::kError) << r.error;
    cancelled += r.reason == StopReason::kCancelled;
    beams_done += !r.sequences.empty();
  }
  EXPECT_GT(cancelled, 3);
  EXPECT_GT(beams_done, 5);
  // The status is sent after the step whose callbacks ended the last request.
  EXPECT_TRUE(test::WaitUntil([&] {
    const ServingStatus st = loop->status();
    return st.kv_blocks_used == 0 && st.kv_blocks_reserved == 0 && st.active_rows == 0;
  })) << "blocks used "
      << loop->status().kv_blocks_used << ", reserved " << loop->status().kv_blocks_reserved;
  EXPECT_LE(loop->status().kv_blocks_peak, loop->status().kv_blocks_total);
}

TEST(ServingLoopBeams, BadValuesAreRefusedNamingTheFlag) {
  auto loop = test::MakeLoop(test::Rows(4));
  struct Bad {
    BeamParams beams;
    const char* flag;
  };
  const Bad bad[] = {
      {Beams(0), "--beams"},
      {Beams(17), "--beams"},
      {Beams(5), "--user-rows"},  // more beams than rows
      {Beams(2, 1.0f, false, 3), "--num-return"},
      {Beams(2, -0.5f), "--length-penalty"},
      {Beams(2, std::numeric_limits<float>::quiet_NaN()), "--length-penalty"},
      {Beams(2, std::numeric_limits<float>::infinity()), "--length-penalty"},
  };
  for (const Bad& b : bad) {
    RequestSpec s;
    s.prompt = test::TextPrompt(5);
    s.beams = b.beams;
    const RequestResult r = test::RunOne(*loop, s).result;
    EXPECT_EQ(r.reason, StopReason::kError);
    EXPECT_TRUE(r.rejected);
    EXPECT_NE(r.error.find(b.flag), std::string::npos) << r.error;
  }
}

}  // namespace
}  // namespace wc
