// A Conversation (serving/conversation.h): its first turn is `generate`'s reply, later turns
// continue the session, a full context drops the oldest turns instead of wiping the conversation,
// /reset and a new seed start over deterministically, and the same operations always give the
// same tokens (what transcripts replay).
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "serving/conversation.h"
#include "tests/serving/serving_loop_util.h"

namespace wc {
namespace {

using test::M;

ChatFormat Format() {
  return test::DefaultChatFormat();
}

std::unique_ptr<ServingLoop> Loop(int ctx = 0) {
  return test::ConversationLoop(4, ctx);
}

ConversationSettings Greedy(int max_new = 24) {
  ConversationSettings s;
  s.sampling = test::Greedy();
  s.max_new_tokens = max_new;
  return s;
}

ConversationSettings Sampled(uint64_t seed) {
  return test::SampledSettings(seed, /*max_new_tokens=*/24);
}

using test::Say;

const std::vector<std::string> kQuestions = {
    "What is a falcon?",  "Define harbor.",    "What does it mean to sail?", "What is patience?",
    "What is a library?", "Tell me a saying.", "What is a river?",           "Define courage."};

TEST(Conversation, FirstTurnIsGeneratesReplyAndLaterTurnsContinueTheSession) {
  auto loop = Loop();
  Conversation c(*loop, *M().model, *M().tokenizer, Format(), Greedy());
  const ConversationTurn first = Say(c, kQuestions[0]);
  const test::Outcome alone = test::RunOne(*loop, test::GreedyChat(kQuestions[0], 24));
  EXPECT_EQ(first.reply_ids, alone.result.tokens);
  EXPECT_EQ(first.reply_text, alone.result.text);
  Say(c, kQuestions[1]);
  // The session holds exactly what FrameFrom frames for the turns so far (without the closing
  // [eos] and the next user turn, which the next Send feeds).
  ASSERT_EQ(c.turns().size(), 2u);
  const size_t next = Format().EncodeUserTurn(*M().tokenizer, "x").size();
  EXPECT_EQ(c.session_pos(),
            static_cast<int>(c.FrameFrom(0, "x").size() - next - (Format().eos_ends_turn ? 1 : 0)));
}

TEST(Conversation, AFullContextDropsTheOldestTurnsAndGoesOn) {
  auto loop = Loop(/*ctx=*/120);
  ConversationSettings s = Greedy(30);
  s.system = "You answer briefly.";
  Conversation c(*loop, *M().model, *M().tokenizer, Format(), s);
  int dropped = 0;
  for (const std::string& q : kQuestions) {
    const ConversationTurn t = Say(c, q);
    dropped += t.dropped_before;
    EXPECT_FALSE(t.reply_ids.empty()) << q;
    EXPECT_LE(c.session_pos(), 120);
  }
  EXPECT_GT(dropped, 0) << "8 turns of ~40 tokens cannot fit 120 positions";
  EXPECT_EQ(c.turns().size(), kQuestions.size()) << "every turn is still listed";
  // After a drop the session starts over from the kept turns: the system prompt is still first.
  const std::vector<int> sys =
      M().tokenizer->Encode(Format().system_prefix + s.system + Format().system_suffix);
  const std::vector<int> framed = c.FrameFrom(c.turns().size(), "y");
  ASSERT_GT(framed.size(), sys.size());
  EXPECT_TRUE(std::equal(sys.begin(), sys.end(), framed.begin() + (Format().add_bos ? 1 : 0)));
}

TEST(Conversation, TheSameOperationsGiveTheSameTokens) {
  // Sampled turns, a /reset, a seed change, a settings change and context trimming, twice over
  // on two loops: every reply is identical (transcripts rely on it); another seed differs.
  auto run = [](uint64_t seed) {
    auto loop = Loop(/*ctx=*/160);
    Conversation c(*loop, *M().model, *M().tokenizer, Format(), Sampled(seed));
    Say(c, kQuestions[0]);
    Say(c, kQuestions[1]);
    c.Reset();
    Say(c, kQuestions[2]);
    ConversationSettings s = c.settings();
    s.seed = seed + 1;
    c.set_settings(s);
    Say(c, kQuestions[3]);
    s.sampling.temperature = 0.5f;
    s.max_new_tokens = 40;
    c.set_settings(s);
    for (size_t i = 4; i < kQuestions.size(); ++i) Say(c, kQuestions[i]);
    return c.turns();
  };
  const std::vector<ConversationTurn> a = run(7), b = run(7), other = run(8);
  ASSERT_EQ(a.size(), b.size());
  bool any_difference = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].reply_ids, b[i].reply_ids) << "turn " << i;
    EXPECT_EQ(a[i].reply_text, b[i].reply_text) << "turn " << i;
    EXPECT_EQ(a[i].dropped_before, b[i].dropped_before) << "turn " << i;
    any_difference |= a[i].reply_ids != other[i].reply_ids;
  }
  EXPECT_TRUE(a[2].reset_before);
  EXPECT_TRUE(any_difference);
}

TEST(Conversation, ASeedSetBackBeforeTheNextReplyKeepsTheStream) {
  // /set seed 9 then /set seed 7 again before sending: the stream goes on as if nothing happened
  // (a transcript records only the net change).
  auto run = [](bool toggle) {
    auto loop = Loop();
    Conversation c(*loop, *M().model, *M().tokenizer, Format(), Sampled(7));
    Say(c, kQuestions[0]);
    if (toggle) {
      ConversationSettings s = c.settings();
      s.seed = 9;
      c.set_settings(s);
      s.seed = 7;
      c.set_settings(s);
    }
    return Say(c, kQuestions[1]).reply_ids;
  };
  EXPECT_EQ(run(true), run(false));
}

TEST(Conversation, ResetStartsAFreshConversation) {
  auto loop = Loop();
  Conversation c(*loop, *M().model, *M().tokenizer, Format(), Greedy());
  const ConversationTurn first = Say(c, kQuestions[0]);
  Say(c, kQuestions[1]);
  c.Reset();
  const ConversationTurn again = Say(c, kQuestions[0]);
  EXPECT_TRUE(again.reset_before);
  EXPECT_EQ(again.reply_ids, first.reply_ids) << "greedy: a fresh conversation's first reply";
}

TEST(Conversation, BeamRepliesContinueTheConversation) {
  auto loop = Loop();
  ConversationSettings s = Greedy();
  BeamParams b;
  b.num_beams = 3;
  s.beams = b;
  Conversation c(*loop, *M().model, *M().tokenizer, Format(), s);
  const ConversationTurn t1 = Say(c, kQuestions[0]);
  const ConversationTurn t2 = Say(c, kQuestions[1]);
  EXPECT_FALSE(t1.reply_ids.empty());
  EXPECT_FALSE(t2.reply_ids.empty());
  EXPECT_TRUE(t2.settings.beams.has_value());
}

TEST(Conversation, BadMessagesAndOverlapsAreRefused) {
  auto loop = Loop(/*ctx=*/64);
  Conversation c(*loop, *M().model, *M().tokenizer, Format(), Greedy(200));
  EXPECT_THROW(c.Send("   ", std::make_shared<WaitingObserver>()), Error);
  std::string long_message;
  for (int i = 0; i < 80; ++i) long_message += "harbor ";
  EXPECT_THROW(c.Send(long_message, std::make_shared<WaitingObserver>()), Error);
  EXPECT_TRUE(c.turns().empty()) << "nothing was sent";
  auto observer = std::make_shared<WaitingObserver>();
  c.Send(kQuestions[0], observer);
  if (c.busy()) {
    EXPECT_THROW(c.Send(kQuestions[1], std::make_shared<WaitingObserver>()), Error);
  }
  observer->Wait();
  ConversationSettings bad = c.settings();
  bad.max_new_tokens = 0;
  EXPECT_THROW(c.set_settings(bad), Error);
}

TEST(Conversation, DestroyingItMidReplyCancelsAndReturnsTheRow) {
  auto loop = Loop();
  {
    Conversation c(*loop, *M().model, *M().tokenizer, Format(), Greedy(400));
    c.Send(kQuestions[0], std::make_shared<WaitingObserver>());
  }
  EXPECT_TRUE(test::WaitUntil([&] {
    const ServingStatus s = loop->status();
    return s.active_rows == 0 && s.session_rows == 0 && s.kv_blocks_used == 0;
  }));
}

}  // namespace
}  // namespace wc
