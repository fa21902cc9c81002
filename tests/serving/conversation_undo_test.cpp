// A Conversation's /undo and /retry (serving/conversation.h): an undone exchange leaves the
// conversation - context and RNG stream - exactly as if it had never been, so its turns() replay
// token for token; /retry same gives the same reply, /retry a new one from the stream's next seed,
// recorded in the turn; nothing to undo is a one-line error that changes nothing; and with the
// prefix cache a retried reply re-prefills at most one KV block of the conversation.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "serving/conversation.h"
#include "tests/serving/serving_loop_util.h"
#include "util/error.h"

namespace wc {
namespace {

using test::M;

ConversationSettings TopKSampled(uint64_t seed, int max_new = 12) {
  return test::SampledSettings(seed, max_new, /*top_k=*/40);
}

using test::Say;

// The loop a Chat runs on, built before the conversation and destroyed after it.
struct OwnLoop {
  std::unique_ptr<ServingLoop> loop = test::ConversationLoop(/*user_rows=*/2);
};

// A conversation on a loop of its own (two rows), with the default model and its chat format.
class Chat : private OwnLoop, public Conversation {
 public:
  explicit Chat(const ConversationSettings& s)
      : Conversation(*loop, *M().model, *M().tokenizer, test::DefaultChatFormat(), s) {}
};

RequestResult Retry(Conversation& c, bool same_seed) {
  auto observer = std::make_shared<WaitingObserver>();
  c.Retry(same_seed, observer);
  return test::WaitReply(*observer);
}

// `turns` run again in a fresh conversation as a transcript replays them (a reset, the settings
// each ran with, its message); returns the new turns.
std::vector<ConversationTurn> Replay(const std::vector<ConversationTurn>& turns,
                                     const ConversationSettings& initial) {
  Chat c(initial);
  for (const ConversationTurn& t : turns) {
    if (t.reset_before) c.Reset();
    if (!(t.settings == c.settings())) c.set_settings(t.settings);
    Say(c, t.user);
  }
  return c.turns();
}

void ExpectReplays(const std::vector<ConversationTurn>& turns,
                   const ConversationSettings& initial) {
  const std::vector<ConversationTurn> again = Replay(turns, initial);
  ASSERT_EQ(again.size(), turns.size());
  for (size_t i = 0; i < turns.size(); ++i) {
    EXPECT_EQ(again[i].reply_ids, turns[i].reply_ids) << "turn " << i;
    EXPECT_EQ(again[i].settings.seed, turns[i].settings.seed) << "turn " << i;
  }
}

const std::vector<std::string> kUndoQuestions = {"What is a falcon?", "Define harbor.",
                                                 "What does it mean to sail?", "What is patience?",
                                                 "Tell me a saying."};

TEST(ConversationUndo, AnUndoneExchangeIsAsIfItHadNeverBeen) {
  const ConversationSettings s = TopKSampled(7);
  Chat c(s);
  Say(c, kUndoQuestions[0]);
  Say(c, kUndoQuestions[1]);
  const ConversationTurn undone = Say(c, kUndoQuestions[2]);
  const ConversationTurn t = c.Undo();
  EXPECT_EQ(t.user, kUndoQuestions[2]);
  EXPECT_EQ(t.reply_ids, undone.reply_ids);
  ASSERT_EQ(c.turns().size(), 2u);
  Say(c, kUndoQuestions[3]);
  ExpectReplays(c.turns(), s);
  // The same question again after an undo gets the undone reply back (the stream went back).
  c.Undo();
  EXPECT_EQ(Say(c, kUndoQuestions[2]).reply_ids, undone.reply_ids);
}

TEST(ConversationUndo, RetrySameRepeatsTheReplyAndRetryTakesTheStreamsNextSeed) {
  const ConversationSettings s = TopKSampled(11);
  Chat c(s);
  Say(c, kUndoQuestions[0]);
  const std::vector<int> first = Say(c, kUndoQuestions[1]).reply_ids;
  const RequestResult same = Retry(c, /*same_seed=*/true);
  EXPECT_EQ(same.tokens, first);
  EXPECT_EQ(c.turns().size(), 2u);
  EXPECT_EQ(c.settings().seed, 11u);
  const RequestResult next = Retry(c, /*same_seed=*/false);
  EXPECT_NE(next.tokens, first);  // another stream (12 sampled tokens at T 0.9)
  ASSERT_EQ(c.turns().size(), 2u);
  EXPECT_EQ(c.turns().back().user, kUndoQuestions[1]);
  EXPECT_EQ(c.turns().back().reply_ids, next.tokens);
  const uint64_t seed = c.turns().back().settings.seed;
  EXPECT_NE(seed, 11u);  // recorded in the turn, and the conversation's from now on
  EXPECT_EQ(c.settings().seed, seed);
  // A second /retry draws again from the new stream: yet another seed.
  Retry(c, false);
  EXPECT_NE(c.settings().seed, seed);
  Say(c, kUndoQuestions[2]);
  ExpectReplays(c.turns(), s);
}

TEST(ConversationUndo, UndoingATurnThatChangedTheSeedRestoresTheOldStream) {
  const ConversationSettings s = TopKSampled(3);
  // A turn, then one at seed 9, undone.
  auto undo_reseeded_turn = [](Conversation& c) {
    Say(c, kUndoQuestions[0]);
    c.set_settings(TopKSampled(9));
    Say(c, kUndoQuestions[1]);
    c.Undo();
  };
  // The seed changed for the undone turn, then set back: the next turn continues seed 3's stream.
  {
    Chat c(s);
    undo_reseeded_turn(c);
    c.set_settings(s);
    Say(c, kUndoQuestions[2]);
    ExpectReplays(c.turns(), s);
    const std::vector<ConversationTurn> plain = Replay({c.turns()[0], c.turns()[1]}, s);
    EXPECT_EQ(plain[1].reply_ids, c.turns()[1].reply_ids);
  }
  // Kept at the new seed: the next turn starts that stream afresh.
  {
    Chat c(s);
    undo_reseeded_turn(c);
    Say(c, kUndoQuestions[2]);
    EXPECT_EQ(c.turns().back().settings.seed, 9u);
    ExpectReplays(c.turns(), s);
  }
  // Undone across a /reset: the reset is pending again.
  {
    Chat c(s);
    Say(c, kUndoQuestions[0]);
    c.Reset();
    Say(c, kUndoQuestions[1]);
    c.Undo();
    Say(c, kUndoQuestions[3]);
    EXPECT_TRUE(c.turns().back().reset_before);
    ExpectReplays(c.turns(), s);
  }
}

TEST(ConversationUndo, NothingToUndoChangesNothing) {
  Chat c(TopKSampled(5));
  EXPECT_THROW(c.Undo(), Error);
  EXPECT_THROW(c.Retry(false, std::make_shared<WaitingObserver>()), Error);
  EXPECT_EQ(c.settings().seed, 5u);
  Say(c, kUndoQuestions[0]);
  c.Reset();
  try {
    c.Undo();
    ADD_FAILURE() << "an undo after /reset";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "nothing to undo in this conversation");
  }
  EXPECT_THROW(c.Retry(true, std::make_shared<WaitingObserver>()), Error);
  EXPECT_EQ(c.turns().size(), 1u);
  EXPECT_EQ(c.settings().seed, 5u);
}

// Restore (a resumed chat): the turns of a conversation - a seed change and a /reset among them -
// restored into a fresh one, which then replies to the next message exactly as the original did.
TEST(ConversationUndo, ARestoredConversationRepliesAsTheOriginalWould) {
  const ConversationSettings s = TopKSampled(13);
  Chat c(s);
  Say(c, kUndoQuestions[0]);
  c.set_settings(TopKSampled(17));
  Say(c, kUndoQuestions[1]);
  c.Reset();
  Say(c, kUndoQuestions[2]);
  Say(c, kUndoQuestions[3]);
  const std::vector<ConversationTurn> before = c.turns();
  const ConversationTurn next = Say(c, kUndoQuestions[4]);

  Chat d(s);
  auto observer = std::make_shared<WaitingObserver>();
  ASSERT_NE(d.Restore(before, observer), 0u);
  const RequestResult prefill = test::WaitReply(*observer);
  EXPECT_TRUE(prefill.tokens.empty());
  EXPECT_EQ(d.settings().seed, 17u);
  EXPECT_EQ(d.turns().size(), before.size());
  EXPECT_EQ(Say(d, kUndoQuestions[4]).reply_ids, next.reply_ids);
  EXPECT_THROW(d.Restore(before, std::make_shared<WaitingObserver>()), Error);  // it has turns
}

// With the prefix cache (on by default, blocks of 64), a retried reply re-prefills the
// conversation's last partial block at most: 20 turns, each retried once.
TEST(ConversationUndo, ARetryReprefillsAtMostOneBlockPerTurn) {
  Chat c(TopKSampled(21, /*max_new=*/6));
  int64_t reprefilled = 0;
  for (int turn = 0; turn < 20; ++turn) {
    Say(c, kUndoQuestions[turn % kUndoQuestions.size()]);
    const RequestResult r = Retry(c, /*same_seed=*/false);
    const int computed = r.prompt_tokens - r.cached_tokens;
    EXPECT_LE(computed, kServingBlockSize) << "turn " << turn;
    EXPECT_EQ(r.cached_tokens % kServingBlockSize, 0) << "turn " << turn;
    reprefilled += computed;
  }
  EXPECT_EQ(c.turns().size(), 20u);
  EXPECT_EQ(c.turns().front().dropped_before + c.turns().back().dropped_before, 0)
      << "the conversation must fit the context for this measure";
  std::printf("20 turns each retried: %lld prompt tokens computed again in all (%.1f a retry)\n",
              static_cast<long long>(reprefilled), reprefilled / 20.0);
}

}  // namespace
}  // namespace wc
