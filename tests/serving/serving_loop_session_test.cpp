// Sessions carry a conversation, its user row, its KV and its RNG stream across requests; closing
// one frees its row and ends what it still had running or queued.
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/serving/serving_loop_util.h"

namespace wc {
namespace {

using test::Outcome;
using test::RequestSpec;

using test::GreedyChat;
using test::MakeLoop;
using test::Rows;
using test::RunOne;
using test::Turn1;

using test::M;

// ---- Sessions ----

// Turn 1 of the session tests: a framed question, sampled, ending on max tokens (so its last
// token is still to be fed when turn 2 comes).
// Turn 2's ids: EOS ends turn 1, then a framed user turn (what `chat` sends).
std::vector<int> Turn2Ids() {
  std::vector<int> ids = {M().config().eos_token_id};
  const std::vector<int> turn = M().chat_format->EncodeUserTurn(*M().tokenizer, "Define harbor.");
  ids.insert(ids.end(), turn.begin(), turn.end());
  return ids;
}

TEST(ServingLoopSessions, ASecondTurnEqualsTheWholeConversationAsOnePrompt) {
  ServingOptions o = Rows(4);
  o.kv.block_size = 16;
  auto loop = MakeLoop(o);
  const SessionId session = loop->OpenSession();
  const Outcome t1 = RunOne(*loop, Turn1(session));
  ASSERT_EQ(t1.result.reason, StopReason::kMaxTokens);
  const int p1 = static_cast<int>(test::ChatPrompt("What is a falcon?").size());
  EXPECT_EQ(t1.result.session_pos, p1 + 6);  // 5 tokens in the KV, the 6th pending
  RequestSpec turn2;
  turn2.prompt = Turn2Ids();
  turn2.chat = true;
  turn2.sampling = test::Greedy();
  turn2.max_new_tokens = 10;
  turn2.stop_at_eos = false;
  turn2.session = session;
  const Outcome t2 = RunOne(*loop, turn2);
  EXPECT_EQ(t2.result.reason, StopReason::kMaxTokens);
  EXPECT_EQ(t2.result.prompt_tokens, 1 + static_cast<int>(turn2.prompt.size()));
  EXPECT_EQ(t2.result.session_pos, t1.result.session_pos + t2.result.prompt_tokens - 1 + 10);

  RequestSpec whole = turn2;
  whole.session = 0;
  whole.prompt = test::ChatPrompt("What is a falcon?");
  whole.prompt.insert(whole.prompt.end(), t1.result.tokens.begin(), t1.result.tokens.end());
  whole.prompt.insert(whole.prompt.end(), turn2.prompt.begin(), turn2.prompt.end());
  Outcome one_shot = RunOne(*loop, whole);
  one_shot.result.prompt_tokens = t2.result.prompt_tokens;  // the session fed only the new part
  test::ExpectSameOutcome(one_shot, t2, "turn 2 vs one-shot");
}

TEST(ServingLoopSessions, TheRngStreamGoesOnAcrossTurns) {
  auto loop = MakeLoop(Rows(4));
  const SessionId session = loop->OpenSession();
  const RequestSpec spec1 = Turn1(session);
  const Outcome t1 = RunOne(*loop, spec1);
  RequestSpec turn2;
  turn2.prompt = Turn2Ids();
  turn2.sampling.temperature = 1.2f;
  turn2.sampling.top_k = 0;
  turn2.sampling.top_p = 1.0f;
  turn2.seed = 7;  // ignored: the session's stream goes on
  turn2.max_new_tokens = 12;
  turn2.stop_at_eos = false;
  turn2.session = session;
  const Outcome t2 = RunOne(*loop, turn2);
  ASSERT_EQ(t2.logits.size(), 12u);
  // A fresh sampler with turn 1's seed, fed the logits the loop reported, samples both turns.
  Sampler replay(spec1.sampling, spec1.seed);
  const int vocab = M().config().vocab_size;
  for (size_t i = 0; i < t1.logits.size(); ++i)
    EXPECT_EQ(replay.Sample(t1.logits[i].data(), vocab), t1.result.tokens[i]) << "turn 1, " << i;
  replay.set_params(turn2.sampling);
  for (size_t i = 0; i < t2.logits.size(); ++i)
    EXPECT_EQ(replay.Sample(t2.logits[i].data(), vocab), t2.result.tokens[i]) << "turn 2, " << i;
  // Turn 2's first logits are the whole conversation's, as a one-shot prompt.
  RequestSpec whole;
  whole.prompt = test::ChatPrompt("What is a falcon?");
  whole.prompt.insert(whole.prompt.end(), t1.result.tokens.begin(), t1.result.tokens.end());
  whole.prompt.insert(whole.prompt.end(), turn2.prompt.begin(), turn2.prompt.end());
  whole.max_new_tokens = 1;
  const Outcome first = RunOne(*loop, whole);
  ASSERT_EQ(first.logits.size(), 1u);
  EXPECT_EQ(first.logits[0], t2.logits[0]);
}

TEST(ServingLoopSessions, ATurnSubmittedWhileThePreviousRunsWaitsForIt) {
  auto loop = MakeLoop(Rows(4));
  RequestSpec turn2;
  turn2.prompt = Turn2Ids();
  turn2.sampling = test::Greedy();
  turn2.max_new_tokens = 8;
  // One after the other...
  const SessionId a = loop->OpenSession();
  const Outcome a1 = RunOne(*loop, Turn1(a));
  turn2.session = a;
  const Outcome a2 = RunOne(*loop, turn2);
  // ... and both at once: the second turn waits for the first.
  const SessionId b = loop->OpenSession();
  auto b1 = test::Submit(*loop, Turn1(b));
  turn2.session = b;
  auto b2 = test::Submit(*loop, turn2);
  test::ExpectSameOutcome(a1, test::Await(*b1), "turn 1");
  const Outcome b2_out = test::Await(*b2);
  test::ExpectSameOutcome(a2, b2_out, "turn 2");
  EXPECT_EQ(b2_out.result.session_pos, a2.result.session_pos);
}

TEST(ServingLoopSessions, ResetStartsTheConversationOver) {
  ServingOptions o = Rows(2);
  o.kv.block_size = 16;
  auto loop = MakeLoop(o);
  const SessionId session = loop->OpenSession();
  RunOne(*loop, Turn1(session));
  RequestSpec fresh = GreedyChat("Define harbor.", 8);
  fresh.session = session;
  fresh.reset_session = true;
  const Outcome reset = RunOne(*loop, fresh);
  // The new prompt and the reply (less a final EOS, which is never fed); nothing of turn 1.
  const int unfed = reset.result.reason == StopReason::kMaxTokens ? 0 : 1;
  EXPECT_EQ(reset.result.session_pos, static_cast<int>(fresh.prompt.size()) +
                                          static_cast<int>(reset.result.tokens.size()) - unfed);
  fresh.session = 0;
  fresh.reset_session = false;
  test::ExpectSameOutcome(RunOne(*loop, fresh), reset, "after reset vs one-shot");
  // A text turn after the reset is framed as a first turn again ([bos] + user turn).
  RequestSpec text;
  text.prompt_text = "What is patience?";
  text.chat = true;
  text.sampling = test::Greedy();
  text.max_new_tokens = 5;
  text.session = session;
  text.reset_session = true;
  const Outcome t = RunOne(*loop, text);
  EXPECT_EQ(t.result.prompt_tokens, static_cast<int>(test::ChatPrompt("What is patience?").size()));
}

TEST(ServingLoopSessions, ClosingASessionFreesItsRowAndBlocks) {
  ServingOptions o = Rows(2);
  o.kv.block_size = 16;
  auto loop = MakeLoop(o);
  const SessionId session = loop->OpenSession();
  RunOne(*loop, Turn1(session));
  // status() is updated at the end of the step in which the turn ended.
  ASSERT_TRUE(test::WaitUntil([&] { return loop->status().active_rows == 0; }));
  ServingStatus s = loop->status();
  EXPECT_EQ(s.session_rows, 1);
  EXPECT_GT(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_reserved, s.kv_blocks_used);
  loop->CloseSession(session);
  EXPECT_TRUE(test::WaitUntil([&] { return loop->status().session_rows == 0; }));
  s = loop->status();
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_reserved, 0);
  // Its id is no longer accepted.
  RequestSpec late = Turn1(session);
  const Outcome r = RunOne(*loop, late);
  EXPECT_EQ(r.result.reason, StopReason::kError);
  EXPECT_NE(r.result.error.find("not open"), std::string::npos) << r.result.error;
  loop->CloseSession(session);  // closing twice does nothing
  loop->CloseSession(12345);
}

TEST(ServingLoopSessions, ClosingASessionEndsItsRunningAndQueuedTurns) {
  auto loop = MakeLoop(Rows(2));
  const SessionId session = loop->OpenSession();
  RequestSpec long_turn = Turn1(session);
  long_turn.max_new_tokens = 400;
  auto running = test::Submit(*loop, long_turn);
  RequestSpec next;
  next.prompt = Turn2Ids();
  next.session = session;
  auto queued = test::Submit(*loop, next);  // waits: the session is busy
  ASSERT_TRUE(test::WaitUntil([&] { return loop->status().tokens_sampled > 0; }));
  loop->CloseSession(session);
  const RequestResult* r1 = running->WaitFor(std::chrono::seconds(20));
  const RequestResult* r2 = queued->WaitFor(std::chrono::seconds(20));
  if (r1 == nullptr || r2 == nullptr) {
    (void)loop.release();  // the loop is stuck; do not wait for it
    FAIL() << "closing a session with a queued turn hangs the loop";
  }
  EXPECT_EQ(r1->reason, StopReason::kCancelled);
  EXPECT_GT(r1->tokens.size(), 0u);
  EXPECT_EQ(r2->reason, StopReason::kError);
  EXPECT_NE(r2->error.find("closed"), std::string::npos) << r2->error;
  // The loop goes on.
  EXPECT_EQ(RunOne(*loop, GreedyChat("What is a falcon?", 3)).result.tokens.size(), 3u);
  EXPECT_TRUE(test::WaitUntil([&] { return loop->status().session_rows == 0; }));
}

}  // namespace
}  // namespace wc
