// The chat as a client of a server (app/chat/remote_chat_session.h) against `wormchat serve` in
// process (tests/app/serve_test_server.h): replies, seeds, /undo and /retry, cancelling, the
// server's prefix cache and figures, a conversation outgrowing the context, kept chats resumed,
// and what needs the engine here.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "app/chat/chat_store.h"
#include "app/chat/remote_chat_session.h"
#include "app/openai/chat_client.h"
#include "serving/transcript.h"
#include "tests/app/serve_test_server.h"
#include "tests/test_util.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

using test::ApiTestServer;

// One reply's callbacks, waited for.
struct Reply {
  std::mutex mu;
  std::condition_variable cv;
  std::string text;
  bool done = false;
  RequestResult result;
  std::function<void(std::string_view)> OnText() {
    return [this](std::string_view t) {
      std::lock_guard<std::mutex> lock(mu);
      text.append(t);
    };
  }
  std::function<void(const RequestResult&)> OnDone() {
    return [this](const RequestResult& r) {
      std::lock_guard<std::mutex> lock(mu);
      result = r;
      done = true;
      cv.notify_all();
    };
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(120), [this] { return done; }))
        << "no reply within 120 s";
  }
};

ConversationSettings Settings(uint64_t seed, int max_tokens = 12) {
  ConversationSettings s;
  s.seed = seed;
  s.max_new_tokens = max_tokens;
  s.sampling.temperature = 1.0f;
  s.sampling.top_k = 0;
  s.sampling.top_p = 1.0f;
  return s;
}

ChatKeep NoKeep() {
  ChatKeep k;
  k.save = false;
  return k;
}

std::unique_ptr<RemoteChatSession> Session(const ApiTestServer& server, ConversationSettings s,
                                           ChatKeep keep = NoKeep()) {
  auto client = std::make_unique<ChatClient>(
      ParseServerAddress("http://127.0.0.1:" + std::to_string(server.port())), "");
  return std::make_unique<RemoteChatSession>(std::move(client), "default-model", s, keep);
}

// Sends `message` and waits for the reply; its text as streamed.
std::string Say(RemoteChatSession& s, const std::string& message) {
  Reply r;
  s.Send(message, r.OnText(), r.OnDone());
  r.Wait();
  EXPECT_NE(r.result.reason, StopReason::kError) << r.result.error;
  return r.text;
}

TEST(RemoteChat, TurnSeedIsTheSeedFirstThenIndependent32BitSeeds) {
  EXPECT_EQ(RemoteChatSession::TurnSeed(42, 0), 42u);
  EXPECT_EQ(RemoteChatSession::TurnSeed(0xFFFFFFFFFFull, 0), 0xFFFFFFFFFFull);
  std::set<uint64_t> seen;
  for (int k = 1; k <= 64; ++k) {
    const uint64_t s = RemoteChatSession::TurnSeed(42, k);
    EXPECT_LE(s, 0xFFFFFFFFull);
    seen.insert(s);
    EXPECT_EQ(s, RemoteChatSession::TurnSeed(42, k));
  }
  EXPECT_EQ(seen.size(), 64u);
  EXPECT_NE(RemoteChatSession::TurnSeed(42, 1), RemoteChatSession::TurnSeed(43, 1));
}

TEST(RemoteChat, RepliesStreamAndALaterTurnReusesTheServersPrefixCache) {
  ApiTestServer server(ApiServerOptions{}, 512, 4);
  auto s = Session(server, Settings(7, 16));
  ChatFigures f = s->figures();
  EXPECT_FALSE(f.kv_known);  // nothing from the server yet
  EXPECT_FALSE(f.remote_note.empty());
  // A first message of more than a KV block (64 tokens), so a whole block of it can be cached.
  std::string question;
  for (int i = 0; i < 12; ++i) question += "What is a falcon, and where does it live? ";
  const std::string first = Say(*s, question);
  ASSERT_FALSE(first.empty());
  std::vector<ConversationTurn> turns = s->turns();
  ASSERT_EQ(turns.size(), 1u);
  EXPECT_EQ(turns[0].reply_text, first);
  EXPECT_TRUE(turns[0].finished);
  EXPECT_TRUE(turns[0].reply_ids.empty());  // a server sends text
  f = s->figures();
  EXPECT_TRUE(f.kv_known) << "wormchat serve sends its figures";
  EXPECT_TRUE(f.remote_note.empty());
  EXPECT_EQ(f.ctx_size, 512);
  EXPECT_GT(f.kv_blocks_total, 0);
  EXPECT_GT(f.prompt_tokens, 0);
  EXPECT_GT(f.reply_tokens, 0);
  EXPECT_GT(f.ttft_s, 0);
  EXPECT_GT(f.ctx_tokens, f.prompt_tokens);
  EXPECT_FALSE(f.panel_text.empty());

  Say(*s, "And what does it eat?");
  f = s->figures();
  EXPECT_GT(f.cached_tokens, 0) << "the first turn's blocks come from the server's prefix cache";
  EXPECT_GT(f.prompt_tokens, f.cached_tokens);
  EXPECT_NE(s->StatsText().find("reused from the server's prefix cache"), std::string::npos);
}

TEST(RemoteChat, TheSameChatGivesTheSameRepliesAndUndoRetryRewindTheStream) {
  ApiTestServer server(ApiServerOptions{}, 512, 4);
  auto a = Session(server, Settings(11));
  auto b = Session(server, Settings(11));
  const std::string a1 = Say(*a, "Tell me a story.");
  const std::string a2 = Say(*a, "Another one.");
  EXPECT_EQ(Say(*b, "Tell me a story."), a1);
  EXPECT_EQ(Say(*b, "Another one."), a2);

  // /undo then the same message: the same reply (the same stream position).
  std::string undone;
  ASSERT_EQ(b->Undo(&undone), "");
  EXPECT_EQ(undone, "Another one.");
  EXPECT_EQ(b->turns().size(), 1u);
  EXPECT_EQ(Say(*b, "Another one."), a2);

  // /retry from the same position: the same reply; with a new seed: recorded in the turn.
  Reply same;
  b->Retry(/*same_seed=*/true, same.OnText(), same.OnDone());
  same.Wait();
  EXPECT_EQ(same.text, a2);
  Reply fresh;
  b->Retry(/*same_seed=*/false, fresh.OnText(), fresh.OnDone());
  fresh.Wait();
  const std::vector<ConversationTurn> turns = b->turns();
  ASSERT_EQ(turns.size(), 2u);
  EXPECT_NE(turns[1].settings.seed, 11u);
  EXPECT_EQ(b->settings().seed, turns[1].settings.seed);
  EXPECT_EQ(turns[1].reply_text, fresh.text);
}

TEST(RemoteChat, CancelEndsARunningReplySoonAndKeepsItsText) {
  ApiTestServer server(ApiServerOptions{}, 1024, 2);
  auto s = Session(server, Settings(3, 900));
  Reply r;
  s->Send("Write a very long essay about chips.", r.OnText(), r.OnDone());
  for (int i = 0; i < 600; ++i) {  // until some text came
    {
      std::lock_guard<std::mutex> lock(r.mu);
      if (!r.text.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(s->busy());
  const auto t0 = std::chrono::steady_clock::now();
  s->Cancel();
  r.Wait();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(waited, 5.0);
  EXPECT_EQ(r.result.reason, StopReason::kCancelled);
  EXPECT_FALSE(s->busy());
  const std::vector<ConversationTurn> turns = s->turns();
  ASSERT_EQ(turns.size(), 1u);
  EXPECT_EQ(turns[0].reason, StopReason::kCancelled);
  EXPECT_EQ(turns[0].reply_text, r.text);
  // The server frees the row: the next reply runs.
  s->Apply(ChatCommand{ChatCommand::Kind::kReset});
  EXPECT_FALSE(Say(*s, "Hi.").empty());
}

TEST(RemoteChat, AConversationOutgrowingTheContextDropsItsOldestTurns) {
  ApiTestServer server(ApiServerOptions{}, 160, 2);
  auto s = Session(server, Settings(5, 24));
  const std::string message = "Please describe the falcon, its wings, its speed and its prey.";
  int dropped = 0;
  for (int i = 0; i < 12 && dropped == 0; ++i) {
    Say(*s, message);
    dropped = s->turns().back().dropped_before;
  }
  ASSERT_GT(dropped, 0) << "the context of 160 tokens never filled";
  EXPECT_NE(s->figures().notice.find("dropped the"), std::string::npos) << s->figures().notice;
  EXPECT_EQ(s->turns().back().reason == StopReason::kError, false);
}

TEST(RemoteChat, AKeptChatResumesAndGoesOnAsTheOriginalWould) {
  test::TempDir dir;
  ApiTestServer server(ApiServerOptions{}, 512, 4);
  auto original = Session(server, Settings(21));
  const std::string o1 = Say(*original, "Name a bird.");
  const std::string o2 = Say(*original, "Name another.");

  ChatKeep keep;
  keep.dir = dir.path();
  std::string file;
  {
    auto first = Session(server, Settings(21), keep);
    EXPECT_EQ(Say(*first, "Name a bird."), o1);
    first->Autosave();
    file = first->chat_file();
    ASSERT_FALSE(file.empty());
  }
  const Transcript t = ReadTranscriptFile(file);
  EXPECT_EQ(t.server, "http://127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(t.model, "default-model");
  EXPECT_TRUE(t.fingerprint.empty());
  ASSERT_EQ(t.turns.size(), 1u);
  EXPECT_EQ(t.turns[0].reply_text, o1);
  EXPECT_EQ(ReadTextFile(file).find("ids:"), std::string::npos);
  const std::vector<SavedChat> chats = ListChats(dir.path());
  ASSERT_EQ(chats.size(), 1u);
  EXPECT_EQ(chats[0].model, "default-model");

  keep.file = file;
  auto resumed = Session(server, Settings(999), keep);
  const std::string line = resumed->Resume(nullptr);
  EXPECT_NE(line.find("1 turn"), std::string::npos) << line;
  EXPECT_EQ(resumed->settings().seed, 21u) << "the kept chat's settings";
  EXPECT_EQ(Say(*resumed, "Name another."), o2);
  resumed->Autosave();
  EXPECT_EQ(ReadTranscriptFile(file).turns.size(), 2u);
}

TEST(RemoteChat, AChatRunInProcessIsNotContinuedFromAServer) {
  test::TempDir dir;
  ApiTestServer server(ApiServerOptions{}, 512, 2);
  Transcript t;
  t.version = "0.1.0";
  t.model = "default";
  t.fingerprint = "abc";
  ConversationTurn turn;
  turn.user = "Hi";
  turn.reply_text = "Hello";
  turn.reply_ids = {5, 6};
  turn.reason = StopReason::kEos;
  turn.finished = true;
  t.turns.push_back(turn);
  const std::string path = dir.File("local.txt");
  WriteTranscriptFile(path, t);
  ChatKeep keep;
  keep.dir = dir.path();
  keep.file = path;
  auto s = Session(server, Settings(1), keep);
  try {
    s->Resume(nullptr);
    FAIL() << "resumed a chat run in process";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("without --server"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(s->turns().empty());
}

TEST(RemoteChat, WhatNeedsTheEngineHereSaysSo) {
  ApiTestServer server(ApiServerOptions{}, 512, 2);
  auto s = Session(server, Settings(1));
  ChatCommand beams{ChatCommand::Kind::kBeams};
  beams.value = 4;
  EXPECT_NE(s->Apply(beams).find("not available from a server"), std::string::npos);
  ChatCommand spec{ChatCommand::Kind::kSet};
  spec.name = "speculate";
  spec.path = "lookup";
  EXPECT_NE(s->Apply(spec).find("server's to decide"), std::string::npos);
  ChatCommand temp{ChatCommand::Kind::kSet};
  temp.name = "temperature";
  temp.value = 0.5;
  EXPECT_EQ(s->Apply(temp), "(temperature 0.5)");
  EXPECT_FLOAT_EQ(s->settings().sampling.temperature, 0.5f);
  EXPECT_FALSE(s->last_attention().valid);
  EXPECT_NE(s->identity().server.find("127.0.0.1"), std::string::npos);
  EXPECT_NE(s->StatsText().find("not available from this server"), std::string::npos);
  ConversationSettings beamed = Settings(1);
  beamed.beams = BeamParams{};
  EXPECT_THROW(Session(server, beamed), Error);
}

TEST(RemoteChat, AServerThatIsNotThereIsAnErrorAndTheMessageIsNotATurn) {
  int port = 0;
  {
    ApiTestServer gone(ApiServerOptions{}, 128, 1);
    port = gone.port();
  }
  auto client = std::make_unique<ChatClient>(
      ParseServerAddress("http://127.0.0.1:" + std::to_string(port)), "");
  RemoteChatSession s(std::move(client), "m", Settings(1), NoKeep());
  Reply r;
  s.Send("Hello?", r.OnText(), r.OnDone());
  r.Wait();
  EXPECT_EQ(r.result.reason, StopReason::kError);
  EXPECT_NE(r.result.error.find("cannot reach"), std::string::npos) << r.result.error;
  EXPECT_TRUE(s.turns().empty());
  EXPECT_FALSE(s.busy());
}

}  // namespace
}  // namespace wc
