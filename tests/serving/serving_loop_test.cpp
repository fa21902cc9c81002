// The serving loop's requests end the way Conversation's generation did (max tokens, EOS, stop
// strings, a full context), sessions carry a conversation and its RNG stream across requests, bad
// requests end alone with a clear error, and admission never evicts: what does not fit waits.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
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

// ---- Requests queued behind a full loop ----

TEST(ServingLoopQueue, QueuedRequestsStartWhenTheRunningOnesEnd) {
  // One row, three requests at once: the second and third wait in the queue and must start when
  // the row frees, without anything else waking the loop.
  auto loop = MakeLoop(Rows(1));
  std::vector<std::shared_ptr<WaitingObserver>> observers;
  for (int i = 0; i < 3; ++i) {
    RequestSpec s;
    s.prompt = test::TextPrompt(5 + i);
    s.max_new_tokens = 4;
    observers.push_back(test::Submit(*loop, s));
  }
  for (size_t i = 0; i < observers.size(); ++i) {
    const RequestResult* r = observers[i]->WaitFor(std::chrono::seconds(20));
    ASSERT_NE(r, nullptr) << "request " << i << " never left the queue";
    EXPECT_EQ(r->reason, StopReason::kMaxTokens);
    EXPECT_EQ(r->user_row, 0);
  }
}

// ---- How a request ends ----

TEST(ServingLoopResults, PrefillProgressIsReportedChunkByChunk) {
  // A 300-token prompt at 64 tokens per forward call: OnPrefill after each chunk, rising to the
  // whole prompt, all before the first token.
  class ProgressObserver : public WaitingObserver {
   public:
    void OnPrefill(int fed, int total, int context) override {
      EXPECT_EQ(tokens_, 0) << "prefill progress after a token";
      EXPECT_EQ(context, fed) << "a one-shot request's row holds its prompt only";
      progress.emplace_back(fed, total);
    }
    void OnToken(int token, const float* logits, int vocab) override {
      ++tokens_;
      WaitingObserver::OnToken(token, logits, vocab);
    }
    std::vector<std::pair<int, int>> progress;

   private:
    int tokens_ = 0;
  };
  ServingOptions o = Rows(2);
  o.max_batch_tokens = 64;
  auto loop = MakeLoop(o);
  auto observer = std::make_shared<ProgressObserver>();
  RequestSpec s;
  s.prompt = test::TextPrompt(300);
  s.max_new_tokens = 2;
  loop->Submit(test::MakeRequest(s, observer));
  test::Await(*observer);
  ASSERT_EQ(observer->progress.size(), 5u);  // 64 x 4 + 44
  for (size_t i = 0; i < observer->progress.size(); ++i) {
    EXPECT_EQ(observer->progress[i].first, std::min<int>(300, 64 * static_cast<int>(i + 1)));
    EXPECT_EQ(observer->progress[i].second, 300);
  }
}

TEST(ServingLoopResults, ACancelStopsTheForwardPassItArrivesIn) {
  // Request 2 (a 40-token prompt) is cancelled from inside the forward pass that prefills it
  // (the attention observer runs on the loop's thread, between layers). The pass stops at its
  // next poll: request 2 ends cancelled with no prefill progress and no token (had the pass run
  // to the end, it would have sampled one), and request 1, which shared the pass, goes on to
  // exactly the tokens and logits it has alone.
  class PrefillCounter : public WaitingObserver {
   public:
    PrefillCounter() : WaitingObserver(nullptr, /*keep_logits=*/true) {}
    void OnPrefill(int, int, int) override { ++prefills; }
    std::atomic<int> prefills{0};
  };
  RequestSpec first, second;
  first.prompt = test::TextPrompt(5);
  first.max_new_tokens = 12;
  first.stop_at_eos = false;
  second.prompt = test::TextPrompt(40, 100);
  second.max_new_tokens = 8;
  const Outcome alone = test::RunSolo({first}, KVCacheOptions{})[0];

  auto loop = MakeLoop(Rows(2));
  std::atomic<int> cancels{0};
  ServingLoop* raw = loop.get();
  M().model->set_attention_observer([&](int layer, const float*, int64_t n_tokens) {
    if (layer == 0 && n_tokens >= 40 && cancels.fetch_add(1) == 0) raw->Cancel(2);
  });
  auto one = std::make_shared<PrefillCounter>();
  auto two = std::make_shared<PrefillCounter>();
  ASSERT_EQ(loop->Submit(test::MakeRequest(first, one)), 1u);
  ASSERT_EQ(loop->Submit(test::MakeRequest(second, two)), 2u);
  const Outcome got = test::Await(*one);
  const RequestResult r2 = test::Await(*two).result;
  loop.reset();
  M().model->set_attention_observer(nullptr);
  EXPECT_EQ(cancels.load(), 1) << "the cancelling pass ran again";
  EXPECT_EQ(r2.reason, StopReason::kCancelled);
  EXPECT_TRUE(r2.tokens.empty());
  EXPECT_EQ(two->prefills.load(), 0);
  test::ExpectSameOutcome(alone, got, "the request that shared the interrupted pass");
}

TEST(ServingLoopResults, MaxNewTokensZeroFeedsThePromptAndSamplesNothing) {
  auto loop = MakeLoop(Rows(2));
  RequestSpec s;
  s.prompt = test::TextPrompt(12);
  s.max_new_tokens = 0;
  const Outcome o = RunOne(*loop, s);
  EXPECT_EQ(o.result.reason, StopReason::kMaxTokens);
  EXPECT_TRUE(o.result.tokens.empty());
  EXPECT_TRUE(o.result.text.empty());
  EXPECT_TRUE(o.logits.empty());
  EXPECT_EQ(o.result.prompt_tokens, 12);
  EXPECT_EQ(o.result.t_first_token, 0);
  EXPECT_GE(o.result.user_row, 0);
  loop->Shutdown(ShutdownMode::kDrain);  // status() is final once the loop has stopped
  EXPECT_EQ(loop->status().tokens_prefilled, 12);
}

TEST(ServingLoopResults, MaxNewTokensEndsWithLengthAndReportsTheTimeline) {
  auto loop = MakeLoop(Rows(2));
  RequestSpec s;
  s.prompt = test::TextPrompt(9);
  s.max_new_tokens = 7;
  s.stop_at_eos = false;
  const Outcome o = RunOne(*loop, s);
  EXPECT_EQ(o.result.reason, StopReason::kMaxTokens);
  EXPECT_EQ(o.result.tokens.size(), 7u);
  EXPECT_EQ(o.logits.size(), 7u);
  EXPECT_EQ(o.logits[0].size(), static_cast<size_t>(M().config().vocab_size));
  EXPECT_TRUE(o.result.error.empty());
  EXPECT_GT(o.result.id, 0u);
  EXPECT_LE(o.result.t_submit, o.result.t_admit);
  EXPECT_LE(o.result.t_admit, o.result.t_first_token);
  EXPECT_LE(o.result.t_first_token, o.result.t_finish);
}

TEST(ServingLoopResults, EosEndsTheReplyAndAddsNoText) {
  auto loop = MakeLoop(Rows(2));
  const Outcome o = RunOne(*loop, GreedyChat("What does it mean to sail?", 100));
  ASSERT_EQ(o.result.reason, StopReason::kEos);
  ASSERT_FALSE(o.result.tokens.empty());
  EXPECT_EQ(o.result.tokens.back(), M().config().eos_token_id);
  // The chat framing trims the reply's leading space; the text is that of the tokens before EOS.
  std::vector<int> reply(o.result.tokens.begin(), o.result.tokens.end() - 1);
  std::string decoded = M().tokenizer->Decode(reply);
  if (!decoded.empty() && decoded[0] == ' ') decoded.erase(0, 1);
  EXPECT_EQ(o.result.text, decoded);
  EXPECT_EQ(o.result.text.rfind("To sail", 0), 0u) << o.result.text;

  // stop_at_eos = false: generation goes on through the EOS, to max_new_tokens, with the same
  // tokens and logits up to it.
  RequestSpec on = GreedyChat("What does it mean to sail?", o.result.tokens.size() + 5);
  on.stop_at_eos = false;
  const Outcome past = RunOne(*loop, on);
  EXPECT_EQ(past.result.reason, StopReason::kMaxTokens);
  ASSERT_EQ(past.result.tokens.size(), o.result.tokens.size() + 5);
  Outcome prefix = past;
  prefix.result.tokens.resize(o.result.tokens.size());
  prefix.logits.resize(o.logits.size());
  prefix.result.reason = StopReason::kEos;
  prefix.result.text = o.result.text;
  test::ExpectSameOutcome(o, prefix, "the reply up to EOS");
}

TEST(ServingLoopResults, AStopStringEndsTheReplyAndKeepsTheTextBeforeIt) {
  auto loop = MakeLoop(Rows(2));
  const Outcome full = RunOne(*loop, GreedyChat("Define harbor.", 100));
  ASSERT_EQ(full.result.reason, StopReason::kEos);
  // A stop string starting inside the reply: the third word's first two letters and the space
  // before them.
  const std::string& text = full.result.text;
  const size_t second = text.find(' ');
  const size_t third = text.find(' ', second + 1);
  ASSERT_NE(third, std::string::npos) << text;
  const std::string stop = text.substr(third, 3);
  RequestSpec s = GreedyChat("Define harbor.", 100);
  s.stop = {"never in this reply", stop};
  const Outcome o = RunOne(*loop, s);
  EXPECT_EQ(o.result.reason, StopReason::kStopString);
  EXPECT_EQ(o.result.text, text.substr(0, text.find(stop))) << "stop " << stop;
  // The tokens up to the one that completed the stop string, as in the full reply.
  ASSERT_LT(o.result.tokens.size(), full.result.tokens.size());
  EXPECT_TRUE(
      std::equal(o.result.tokens.begin(), o.result.tokens.end(), full.result.tokens.begin()));
  EXPECT_EQ(o.logits.size(), o.result.tokens.size());
}

TEST(ServingLoopResults, AFullContextEndsWithContext) {
  ServingOptions small = Rows(2);
  small.ctx = 40;
  auto loop = MakeLoop(small);
  RequestSpec s;
  s.prompt = test::TextPrompt(30);
  s.sampling = test::Greedy();
  s.stop_at_eos = false;
  s.max_new_tokens = 100;
  const Outcome o = RunOne(*loop, s);
  EXPECT_EQ(o.result.reason, StopReason::kContextFull);
  // As Conversation: positions 30..39 take the first 10 sampled tokens, and one more is sampled
  // from the logits of position 39.
  EXPECT_EQ(o.result.tokens.size(), 11u);
  // The same tokens and logits as with room to spare.
  auto big = MakeLoop(Rows(2));
  s.max_new_tokens = 11;
  Outcome roomy = RunOne(*big, s);
  EXPECT_EQ(roomy.result.reason, StopReason::kMaxTokens);
  roomy.result.reason = StopReason::kContextFull;
  test::ExpectSameOutcome(roomy, o, "ctx 40 vs 512");
  // A prompt of ctx - 1 tokens still gets two; one of ctx tokens is an error.
  s.prompt = test::TextPrompt(39);
  const Outcome edge = RunOne(*loop, s);
  EXPECT_EQ(edge.result.reason, StopReason::kContextFull);
  EXPECT_EQ(edge.result.tokens.size(), 2u);
  s.prompt = test::TextPrompt(40);
  const Outcome over = RunOne(*loop, s);
  EXPECT_EQ(over.result.reason, StopReason::kError);
  EXPECT_NE(over.result.error.find("too long for the context of 40"), std::string::npos)
      << over.result.error;
}

TEST(ServingLoopResults, TextPromptsAreFramedAsIds) {
  auto loop = MakeLoop(Rows(2));
  const RequestSpec ids = GreedyChat("What is a falcon?", 12);
  RequestSpec text = ids;
  text.prompt.clear();
  text.prompt_text = "What is a falcon?";
  test::ExpectSameOutcome(RunOne(*loop, ids), RunOne(*loop, text), "text vs framed ids");
  // chat = false: the text is fed as it is ([bos] + text).
  RequestSpec raw;
  raw.prompt_text = "A falcon is a bird of prey";
  raw.sampling = test::Greedy();
  raw.max_new_tokens = 6;
  const Outcome r = RunOne(*loop, raw);
  std::vector<int> want = {M().config().bos_token_id};
  const std::vector<int> body = M().tokenizer->Encode(raw.prompt_text);
  want.insert(want.end(), body.begin(), body.end());
  EXPECT_EQ(r.result.prompt_tokens, static_cast<int>(want.size()));
  RequestSpec as_ids = raw;
  as_ids.prompt_text.clear();
  as_ids.prompt = want;
  test::ExpectSameOutcome(r, RunOne(*loop, as_ids), "raw text vs its ids");
}

// ---- Bad requests ----

TEST(ServingLoopErrors, BadRequestsEndAloneWithAClearMessage) {
  ServingOptions o = Rows(4);
  o.kv.block_size = 16;
  o.kv.n_blocks = 8;  // 128 tokens
  o.ctx = 100;
  auto loop = MakeLoop(o);
  const int vocab = M().config().vocab_size;
  struct Bad {
    RequestSpec spec;
    std::string message;  // a part of the error
  };
  std::vector<Bad> bad;
  auto add = [&](std::string message, auto change) {
    RequestSpec s;
    s.prompt = test::TextPrompt(10);
    s.max_new_tokens = 8;
    change(s);
    bad.push_back({s, std::move(message)});
  };
  add("the prompt is empty", [](RequestSpec& s) { s.prompt.clear(); });
  add("too long for the context of 100", [](RequestSpec& s) { s.prompt = test::TextPrompt(100); });
  add("--temperature", [](RequestSpec& s) { s.sampling.temperature = -0.5f; });
  add("--temperature", [](RequestSpec& s) { s.sampling.temperature = NAN; });
  add("--top-p", [](RequestSpec& s) { s.sampling.top_p = 1.5f; });
  add("--top-p", [](RequestSpec& s) { s.sampling.top_p = 0.0f; });
  add("--top-k", [](RequestSpec& s) { s.sampling.top_k = -1; });
  add("max_new_tokens must be >= 0", [](RequestSpec& s) { s.max_new_tokens = -1; });
  add("stop string is empty", [](RequestSpec& s) { s.stop = {"ok", ""}; });
  add(Cat("token id ", vocab, " is outside the vocabulary"),
      [&](RequestSpec& s) { s.prompt[3] = vocab; });
  add("token id -1 is outside the vocabulary", [](RequestSpec& s) { s.prompt[0] = -1; });
  add("session 999 is not open", [](RequestSpec& s) { s.session = 999; });
  // 10 + 300 tokens, capped by the context of 100: 7 blocks fit the pool of 8...
  add("", [](RequestSpec& s) {
    s.max_new_tokens = 300;
    s.stop_at_eos = false;
  });
  // ... but with a 128-token context they would not: a loop of its own below.
  std::vector<std::shared_ptr<WaitingObserver>> good, failed;
  for (size_t i = 0; i < bad.size(); ++i) {
    RequestSpec g;
    g.prompt = test::TextPrompt(5 + static_cast<int>(i), static_cast<int>(i));
    g.seed = i;
    g.max_new_tokens = 6;
    good.push_back(test::Submit(*loop, g));
    failed.push_back(test::Submit(*loop, bad[i].spec));
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    const Outcome f = test::Await(*failed[i]);
    if (bad[i].message.empty()) {  // the one that fits
      EXPECT_EQ(f.result.reason, StopReason::kContextFull) << f.result.error;
      continue;
    }
    EXPECT_EQ(f.result.reason, StopReason::kError) << "bad request " << i;
    EXPECT_NE(f.result.error.find(bad[i].message), std::string::npos)
        << "bad request " << i << ": " << f.result.error;
    EXPECT_EQ(f.result.error.find('\n'), std::string::npos) << "one line: " << f.result.error;
    EXPECT_TRUE(f.result.tokens.empty());
    EXPECT_EQ(f.result.user_row, -1);
    EXPECT_TRUE(f.result.rejected) << "bad request " << i;
    const Outcome g = test::Await(*good[i]);
    EXPECT_NE(g.result.reason, StopReason::kError) << g.result.error;
    EXPECT_FALSE(g.result.tokens.empty());
  }
  loop->Shutdown(ShutdownMode::kDrain);
  const ServingStatus s = loop->status();
  EXPECT_EQ(s.requests_finished, static_cast<int64_t>(2 * bad.size()));
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_reserved, 0);

  ServingOptions tight = o;
  tight.ctx = 0;  // 512
  auto loop2 = MakeLoop(tight);
  RequestSpec huge;
  huge.prompt = test::TextPrompt(10);
  huge.max_new_tokens = 200;  // 210 tokens: 14 blocks of 16, the pool has 8
  const Outcome h = RunOne(*loop2, huge);
  EXPECT_EQ(h.result.reason, StopReason::kError);
  EXPECT_NE(h.result.error.find("more than the whole pool of 8"), std::string::npos)
      << h.result.error;
  // A session turn that could never fit the pool fails the same way when it is admitted.
  const SessionId session = loop2->OpenSession();
  huge.session = session;
  const Outcome hs = RunOne(*loop2, huge);
  EXPECT_EQ(hs.result.reason, StopReason::kError);
  EXPECT_NE(hs.result.error.find("more than the whole pool of 8"), std::string::npos)
      << hs.result.error;
  huge.max_new_tokens = 20;  // fits: the session runs
  const Outcome fits = RunOne(*loop2, huge);
  EXPECT_NE(fits.result.reason, StopReason::kError) << fits.result.error;
  EXPECT_FALSE(fits.result.tokens.empty());
}

TEST(ServingLoopErrors, BadOptionsThrowNamingTheFlag) {
  auto expect_throw = [](ServingOptions o, const std::string& flag) {
    try {
      MakeLoop(o);
      ADD_FAILURE() << "no error for " << flag;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  ServingOptions o = Rows(1);
  o.user_rows = 0;
  expect_throw(o, "--user-rows");
  o = Rows(1);
  o.max_batch_tokens = 0;
  expect_throw(o, "--max-batch-tokens");
  o = Rows(1);
  o.threads = -1;
  expect_throw(o, "--threads");
  o = Rows(1);
  o.ctx = -5;
  expect_throw(o, "--ctx");
}

// ---- Admission: never evict ----

TEST(ServingLoopAdmission, RequestsWaitForKVBlocksAndNothingIsPreempted) {
  // 12 requests of 4-6 blocks each (prompt plus max_new_tokens) and a pool of 12 blocks: at most
  // three run at once although 8 rows are free; the rest wait in the queue, in order.
  std::vector<RequestSpec> specs;
  for (int i = 0; i < 12; ++i) {
    RequestSpec s;
    s.prompt = test::TextPrompt(40 + 3 * i, 7 * i);
    s.sampling.temperature = 0.8f;
    s.seed = 100 + i;
    s.max_new_tokens = 16 + i % 3 * 4;
    specs.push_back(s);
  }
  KVCacheOptions kv;
  kv.block_size = 16;
  kv.n_blocks = 12;
  const std::vector<Outcome> solo = test::RunSolo(specs, kv, /*threads=*/1);
  ServingOptions o = Rows(8);
  o.kv = kv;
  auto loop = MakeLoop(o);
  std::vector<std::shared_ptr<WaitingObserver>> observers;
  for (const RequestSpec& s : specs) observers.push_back(test::Submit(*loop, s));
  bool saw_waiting = false;
  int most_active = 0;
  while (observers.back()->WaitFor(std::chrono::milliseconds(0)) == nullptr) {
    const ServingStatus s = loop->status();
    EXPECT_LE(s.kv_blocks_used, s.kv_blocks_total);
    EXPECT_LE(s.kv_blocks_reserved, s.kv_blocks_total);
    EXPECT_LE(s.kv_blocks_used, s.kv_blocks_reserved);
    if (s.steps > 0 && s.queued > 0 && s.active_rows > 0 && s.active_rows < 8) saw_waiting = true;
    most_active = std::max(most_active, s.active_rows);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_TRUE(saw_waiting) << "requests never waited for KV blocks";
  EXPECT_LE(most_active, 3);
  double last_admit = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Outcome got = test::Await(*observers[i]);
    test::ExpectSameOutcome(solo[i], got, Cat("request ", i));
    EXPECT_GE(got.result.t_admit, last_admit) << "FIFO admission";
    last_admit = got.result.t_admit;
  }
  loop->Shutdown(ShutdownMode::kDrain);
  const ServingStatus s = loop->status();
  EXPECT_EQ(s.kv_blocks_total, 12);
  EXPECT_LE(s.kv_blocks_peak, 12);
  EXPECT_GE(s.kv_blocks_peak, 4);  // the smallest request alone writes 55 positions
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_reserved, 0);
  EXPECT_EQ(s.queued, 0);
  EXPECT_EQ(s.requests_finished, 12);
}

TEST(ServingLoopAdmission, AnIdleSessionKeepsItsRowUntilClosed) {
  // One row, held by a session between its turns: a one-shot request waits (the session is never
  // evicted) and runs once the session is closed; at a drain, one that can never get the row ends
  // with an error.
  auto loop = MakeLoop(Rows(1));
  RequestSpec one_shot;
  one_shot.prompt = test::TextPrompt(8);
  one_shot.max_new_tokens = 3;
  const SessionId session = loop->OpenSession();
  RunOne(*loop, Turn1(session));
  auto waits = test::Submit(*loop, one_shot);
  EXPECT_EQ(waits->WaitFor(std::chrono::milliseconds(200)), nullptr);
  EXPECT_EQ(loop->status().queued, 1);
  EXPECT_EQ(loop->status().session_rows, 1);
  loop->CloseSession(session);
  const Outcome ran = test::Await(*waits);
  EXPECT_NE(ran.result.reason, StopReason::kError) << ran.result.error;
  EXPECT_EQ(ran.result.user_row, 0);

  RunOne(*loop, Turn1(loop->OpenSession()));
  auto never = test::Submit(*loop, one_shot);
  loop->Shutdown(ShutdownMode::kDrain);
  const RequestResult* r = never->WaitFor(std::chrono::milliseconds(0));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reason, StopReason::kError);
  EXPECT_NE(r->error.find("shut down before there was room"), std::string::npos) << r->error;
}

TEST(ServingLoopAdmission, ThePeakCountsBlocksOfRequestsThatEndInTheSameStep) {
  // A 40-token prompt and one new token: three blocks of 16 are written and freed in one step.
  ServingOptions o = Rows(2);
  o.kv.block_size = 16;
  auto loop = MakeLoop(o);
  RequestSpec s;
  s.prompt = test::TextPrompt(40);
  s.max_new_tokens = 1;
  EXPECT_EQ(RunOne(*loop, s).result.tokens.size(), 1u);
  loop->Shutdown(ShutdownMode::kDrain);
  const ServingStatus st = loop->status();
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.kv_blocks_peak, 3);
}

}  // namespace
}  // namespace wc
