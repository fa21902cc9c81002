#include "tests/serving/serving_loop_util.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

namespace wc::test {

const DefaultModel& LoadDefaultModel() {
  static const DefaultModel* m = [] {
    const std::string dir = std::string(WORMCHAT_ASSETS_DIR) + "/default-model";
    auto* d = new DefaultModel;
    d->model = DecoderModel::Load(dir, ModelOptions{});
    d->tokenizer = Tokenizer::FromModelDir(dir);
    d->chat_format = ChatFormat::Load(dir);
    return d;
  }();
  return *m;
}

namespace {

const char kText[] =
    "A falcon is a bird of prey with long pointed wings and a notched beak. It hunts over open "
    "country and dives at great speed to strike its prey in the air. A harbor is a sheltered "
    "part of a body of water deep enough to provide anchorage for ships. To sail is to travel "
    "on water in a ship or a boat, propelled by the wind or by an engine. A library is a "
    "collection of books and other materials kept for reading, study and reference. The river "
    "flows slowly through the valley, past the old mill and the stone bridge, to the sea. "
    "Patience is the capacity to accept delay or trouble without getting angry or upset. A "
    "garden is a plot of ground where herbs, fruits, flowers or vegetables are cultivated. ";

const std::vector<int>& Corpus() {
  static const std::vector<int> ids = [] {
    std::string text;
    for (int i = 0; i < 8; ++i) text += kText;
    return LoadDefaultModel().tokenizer->Encode(text);
  }();
  return ids;
}

}  // namespace

std::vector<int> TextPrompt(int n, int offset) {
  const std::vector<int>& corpus = Corpus();
  EXPECT_GE(n, 1);
  EXPECT_LE(static_cast<size_t>(offset + n), corpus.size()) << "the test corpus is too short";
  std::vector<int> ids = {LoadDefaultModel().config().bos_token_id};
  ids.insert(ids.end(), corpus.begin() + offset, corpus.begin() + offset + n - 1);
  return ids;
}

std::vector<int> ChatPrompt(const std::string& question) {
  const DefaultModel& m = LoadDefaultModel();
  return EncodePrompt(*m.tokenizer, m.chat_format, question, /*raw=*/false,
                      m.config().bos_token_id);
}

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

KVCacheOptions Kv(KVDType dtype, int block_size) {
  KVCacheOptions kv;
  kv.dtype = dtype;
  kv.block_size = block_size;
  return kv;
}

namespace {
// A KV format's name as a test name allows it ('-' is not).
std::string TestName(KVDType dtype) {
  std::string name = KVDTypeName(dtype);
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}
}  // namespace

std::string KVDTypeParamName(const ::testing::TestParamInfo<KVDType>& info) {
  return TestName(info.param);
}

Request MakeRequest(const RequestSpec& spec, std::shared_ptr<RequestObserver> observer) {
  Request r;
  r.prompt_ids = spec.prompt;
  r.prompt_text = spec.prompt_text;
  r.chat = spec.chat;
  r.sampling = spec.sampling;
  r.seed = spec.seed;
  r.max_new_tokens = spec.max_new_tokens;
  r.stop = spec.stop;
  r.stop_at_eos = spec.stop_at_eos;
  r.session = spec.session;
  r.reset_session = spec.reset_session;
  r.beams = spec.beams;
  r.speculate_k = spec.speculate_k;
  r.lookup_ngram = spec.lookup_ngram;
  r.proposer_source = spec.proposer_source;
  r.observer = std::move(observer);
  return r;
}

std::shared_ptr<WaitingObserver> Submit(ServingLoop& loop, const RequestSpec& spec) {
  auto observer = std::make_shared<WaitingObserver>(nullptr, /*keep_logits=*/true);
  loop.Submit(MakeRequest(spec, observer));
  return observer;
}

Outcome Await(WaitingObserver& observer, std::chrono::seconds timeout) {
  const RequestResult* r = observer.WaitFor(timeout);
  if (r == nullptr) {
    std::fprintf(stderr, "a request did not finish within %lld s: the serving loop hangs\n",
                 static_cast<long long>(timeout.count()));
    std::abort();
  }
  return {*r, observer.logits()};
}

std::vector<Outcome> RunSolo(const std::vector<RequestSpec>& specs, const KVCacheOptions& kv,
                             int threads, int ctx) {
  ServingOptions o;
  o.user_rows = 1;
  for (const RequestSpec& s : specs)
    if (s.beams) o.user_rows = std::max(o.user_rows, s.beams->num_beams);
  o.threads = threads;
  o.ctx = ctx;
  o.kv = kv;
  const DefaultModel& m = LoadDefaultModel();
  ServingLoop loop(*m.model, m.tokenizer.get(), m.chat_format, o);
  std::vector<std::shared_ptr<WaitingObserver>> observers;
  for (const RequestSpec& s : specs) observers.push_back(Submit(loop, s));
  std::vector<Outcome> out;
  for (auto& obs : observers) out.push_back(Await(*obs));
  loop.Shutdown(ShutdownMode::kDrain);
  return out;
}

std::string Describe(const BatchConfig& c) {
  return Cat(c.block_size == 0 ? "contiguous" : Cat("paged ", c.block_size), ", ", c.user_rows,
             c.user_rows == 1 ? " row" : " rows", ", budget ", c.max_batch_tokens, ", ", c.threads,
             c.threads == 1 ? " thread" : " threads");
}

std::vector<Outcome> RunBatched(const std::vector<RequestSpec>& specs, KVDType dtype,
                                const BatchConfig& c) {
  const test::DefaultModel& m = test::LoadDefaultModel();
  ServingOptions o;
  o.user_rows = c.user_rows;
  o.max_batch_tokens = c.max_batch_tokens;
  o.threads = c.threads;
  o.kv.dtype = dtype;
  o.kv.block_size = c.block_size;
  ServingLoop loop(*m.model, m.tokenizer.get(), m.chat_format, o);
  std::vector<std::shared_ptr<WaitingObserver>> observers;
  size_t next = 0;
  int most_active = 0;  // rows seen running at once
  for (size_t group : {1, 3, 4, 8, 16}) {
    if (next > 0) {
      const int64_t sampled = loop.status().tokens_sampled;
      EXPECT_TRUE(test::WaitUntil([&] {
        const ServingStatus s = loop.status();
        most_active = std::max(most_active, s.active_rows);
        return s.tokens_sampled >= sampled + 3 || (s.active_rows == 0 && s.queued == 0);
      }));
    }
    for (size_t i = 0; i < group && next < specs.size(); ++i)
      observers.push_back(test::Submit(loop, specs[next++]));
  }
  EXPECT_EQ(next, specs.size());
  test::WaitUntil([&] {
    const ServingStatus s = loop.status();
    most_active = std::max(most_active, s.active_rows);
    return s.active_rows == 0 && s.queued == 0;
  });
  // The requests really shared batches (at least half of them at once when there are few, as in
  // a sanitizer build).
  EXPECT_GE(most_active, std::min({c.user_rows, 8, static_cast<int>(specs.size()) / 2}));
  std::vector<Outcome> out;
  for (auto& obs : observers) out.push_back(test::Await(*obs));
  loop.Shutdown(ShutdownMode::kDrain);
  const ServingStatus s = loop.status();
  EXPECT_EQ(s.active_rows, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_LE(s.kv_blocks_peak, s.kv_blocks_total);
  return out;
}

void PrintTo(const FormatCase& fc, std::ostream* os) {
  *os << KVDTypeName(fc.dtype) << ": " << Describe(fc.a) << " / " << Describe(fc.b);
}

std::string FormatCaseName(const ::testing::TestParamInfo<FormatCase>& info) {
  return TestName(info.param.dtype);
}

void ExpectSameOutcome(const Outcome& want, const Outcome& got, const std::string& label) {
  EXPECT_EQ(StopReasonName(got.result.reason), std::string(StopReasonName(want.result.reason)))
      << label << ": " << got.result.error;
  EXPECT_EQ(got.result.tokens, want.result.tokens) << label;
  EXPECT_EQ(got.result.text, want.result.text) << label;
  EXPECT_EQ(got.result.prompt_tokens, want.result.prompt_tokens) << label;
  ASSERT_EQ(got.result.sequences.size(), want.result.sequences.size()) << label;
  for (size_t i = 0; i < want.result.sequences.size(); ++i) {
    const BeamSequence& g = got.result.sequences[i];
    const BeamSequence& w = want.result.sequences[i];
    EXPECT_EQ(g.tokens, w.tokens) << label << ": sequence " << i;
    EXPECT_EQ(g.text, w.text) << label << ": sequence " << i;
    EXPECT_EQ(g.score, w.score) << label << ": sequence " << i;
    EXPECT_EQ(g.reason, w.reason) << label << ": sequence " << i;
  }
  ASSERT_EQ(got.logits.size(), want.logits.size()) << label;
  for (size_t t = 0; t < want.logits.size(); ++t) {
    ASSERT_EQ(got.logits[t].size(), want.logits[t].size()) << label;
    if (std::memcmp(got.logits[t].data(), want.logits[t].data(),
                    want.logits[t].size() * sizeof(float)) != 0) {
      size_t i = 0;
      while (std::memcmp(&got.logits[t][i], &want.logits[t][i], sizeof(float)) == 0) ++i;
      ADD_FAILURE() << label << ": logits of token " << t << " differ (first at id " << i << ": "
                    << got.logits[t][i] << " vs " << want.logits[t][i] << ")";
      return;
    }
  }
}

bool WaitUntil(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

int CountThreads() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::atoi(v);
}

int LoopThreads() {
  return EnvInt("WORMCHAT_LOOP_THREADS", 2);
}

std::unique_ptr<ServingLoop> MakeLoop(const ServingOptions& o) {
  const DefaultModel& m = LoadDefaultModel();
  ServingOptions checked = o;
  checked.check_block_counts = true;
  return std::make_unique<ServingLoop>(*m.model, m.tokenizer.get(), m.chat_format, checked);
}

ServingOptions Rows(int user_rows) {
  ServingOptions o;
  o.user_rows = user_rows;
  o.threads = 1;
  return o;
}

RequestSpec GreedyChat(const std::string& question, int max_new_tokens) {
  RequestSpec s;
  s.prompt = ChatPrompt(question);
  s.chat = true;
  s.sampling = Greedy();
  s.max_new_tokens = max_new_tokens;
  return s;
}

Outcome RunOne(ServingLoop& loop, const RequestSpec& spec) {
  return Await(*Submit(loop, spec));
}

RequestSpec Turn1(SessionId session) {
  RequestSpec s;
  s.prompt = ChatPrompt("What is a falcon?");
  s.chat = true;
  s.sampling.temperature = 1.0f;
  s.sampling.top_k = 40;
  s.seed = 42;
  s.max_new_tokens = 6;
  s.stop_at_eos = false;
  s.session = session;
  return s;
}

ChatFormat DefaultChatFormat() {
  return LoadDefaultModel().chat_format.value_or(ChatFormat{});
}

std::unique_ptr<ServingLoop> ConversationLoop(int user_rows, int ctx) {
  const DefaultModel& m = LoadDefaultModel();
  ServingOptions o = Rows(user_rows);
  o.ctx = ctx;
  return std::make_unique<ServingLoop>(*m.model, m.tokenizer.get(), DefaultChatFormat(), o);
}

ConversationSettings SampledSettings(uint64_t seed, int max_new_tokens, int top_k) {
  ConversationSettings s;
  s.sampling.temperature = 0.9f;
  s.sampling.top_k = top_k;
  s.seed = seed;
  s.max_new_tokens = max_new_tokens;
  return s;
}

RequestResult WaitReply(WaitingObserver& observer) {
  const RequestResult* r = observer.WaitFor(std::chrono::milliseconds(120000));
  EXPECT_NE(r, nullptr) << "the reply never ended";
  if (r == nullptr) return {};
  EXPECT_NE(r->reason, StopReason::kError) << r->error;
  return *r;
}

ConversationTurn Say(Conversation& c, const std::string& text) {
  auto observer = std::make_shared<WaitingObserver>();
  c.Send(text, observer);
  WaitReply(*observer);
  EXPECT_FALSE(c.busy());
  return c.turns().back();
}

}  // namespace wc::test
