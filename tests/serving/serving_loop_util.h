// Shared by the serving loop's tests: the default model loaded once per process, request specs,
// solo reference runs, bit-exact comparison of outcomes, and small polling helpers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kvcache/kv_cache.h"
#include "model/chat/chat_format.h"
#include "model/decoder_model.h"
#include "serving/conversation.h"
#include "serving/serving_loop.h"
#include "serving/waiting_observer.h"
#include "tokenizer/tokenizer.h"

namespace wc::test {

// assets/default-model with its tokenizer and chat format, loaded on first use (throws wc::Error
// naming the directory if it is missing: the tests fail, never skip).
struct DefaultModel {
  std::unique_ptr<DecoderModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatFormat> chat_format;
  const ModelConfig& config() const { return model->config(); }
};
const DefaultModel& LoadDefaultModel();
// LoadDefaultModel(), as the serving tests spell it.
inline const DefaultModel& M() {
  return LoadDefaultModel();
}

// [bos] + n - 1 tokens of a fixed English text starting at token `offset` (n >= 1, n <= 1024).
std::vector<int> TextPrompt(int n, int offset = 0);
// A question framed as a first chat turn ([bos] + "User: ...\nAssistant:"), for Request::chat.
std::vector<int> ChatPrompt(const std::string& question);

// Everything a test varies about a request; Submit turns it into a Request.
struct RequestSpec {
  std::vector<int> prompt;
  std::string prompt_text;  // used when prompt is empty
  bool chat = false;
  SamplingParams sampling;
  uint64_t seed = 0;
  int max_new_tokens = 16;
  std::vector<std::string> stop;
  bool stop_at_eos = true;
  SessionId session = 0;
  bool reset_session = false;
  std::optional<BeamParams> beams;
  int speculate_k = 0;  // Request::speculate_k: 0 off
  int lookup_ngram = 3;
  std::shared_ptr<ProposerSource> proposer_source;  // null: prompt lookup
};

SamplingParams Greedy();
// KV options of one format and layout (block_size 0: contiguous).
KVCacheOptions Kv(KVDType dtype, int block_size);
// A test parameterized by KV format: its name ("fp8_e4m3"; '-' is not allowed).
std::string KVDTypeParamName(const ::testing::TestParamInfo<KVDType>& info);
Request MakeRequest(const RequestSpec& spec, std::shared_ptr<RequestObserver> observer);
// Submits with a WaitingObserver that keeps the logits.
std::shared_ptr<WaitingObserver> Submit(ServingLoop& loop, const RequestSpec& spec);

struct Outcome {
  RequestResult result;
  std::vector<std::vector<float>> logits;  // [tokens][vocab]
};
// Waits for the request (aborting the process after `timeout`: a hung loop must not hang CI).
Outcome Await(WaitingObserver& observer, std::chrono::seconds timeout = std::chrono::seconds(300));

// Every spec run alone: a loop with one user row (as many as the widest beam request), the
// requests queued one after another.
std::vector<Outcome> RunSolo(const std::vector<RequestSpec>& specs, const KVCacheOptions& kv,
                             int threads = 1, int ctx = 0);

// One batched configuration of the invariance tests.
struct BatchConfig {
  int block_size;  // 0: contiguous
  int user_rows;
  int max_batch_tokens;
  int threads;
};
// "paged 16, 32 rows, budget 7, 1 thread".
std::string Describe(const BatchConfig& c);
// One KV format and the two batched configurations an invariance test runs it in.
struct FormatCase {
  KVDType dtype;
  BatchConfig a, b;
};
// How gtest names a case in its output (instead of a byte dump).
void PrintTo(const FormatCase& fc, std::ostream* os);
// The parameterized test's name of a case: the format, '-' as '_'.
std::string FormatCaseName(const ::testing::TestParamInfo<FormatCase>& info);
// Runs `specs` in one loop, submitting them in groups of 1, 3, 4, 8 and 16, each group once the
// requests before it have sampled a few more tokens (so most requests join a batch that is already
// running, some mid-prefill of a long prompt). Expects that the rows were shared and that every
// block is back at the end.
std::vector<Outcome> RunBatched(const std::vector<RequestSpec>& specs, KVDType dtype,
                                const BatchConfig& c);

// Bit-identical tokens, reason, text, logits (memcmp) and beam sequences (scores compared
// exactly); `label` names the case in failures.
void ExpectSameOutcome(const Outcome& want, const Outcome& got, const std::string& label);

// Polls `cond` every millisecond until it holds or `timeout` passes; returns whether it held.
bool WaitUntil(const std::function<bool()>& cond,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(60000));

// Entries of /proc/self/task: the process's threads.
int CountThreads();
// An environment variable as an int, or `fallback` when unset or empty.
int EnvInt(const char* name, int fallback);
// ServingOptions::threads for the concurrency tests: $WORMCHAT_LOOP_THREADS, default 2. The TSan
// run sets 1 (libgomp is not instrumented, so its team threads would only bring false reports).
int LoopThreads();

// ---- Shared by the request-level tests (serving_loop_test.cpp, serving_loop_session_test.cpp)
// ----

// A loop on the default model, its running block counts checked against a rescan after every
// step (ServingOptions::check_block_counts: a difference fails every request).
std::unique_ptr<ServingLoop> MakeLoop(const ServingOptions& o);
// Options with `user_rows` rows and one OpenMP thread.
ServingOptions Rows(int user_rows);
// A greedy chat-framed request.
RequestSpec GreedyChat(const std::string& question, int max_new_tokens);
// Submits and waits.
Outcome RunOne(ServingLoop& loop, const RequestSpec& spec);
// A session's sampled first turn (6 tokens, EOS ignored).
RequestSpec Turn1(SessionId session);

// ---- Shared by the conversation tests (conversation_test.cpp, conversation_undo_test.cpp) ----

// The default model's chat format (an empty one if it has none).
ChatFormat DefaultChatFormat();
// A loop on the default model framing with DefaultChatFormat: `user_rows` rows, one OpenMP
// thread, `ctx` positions (0: the model's).
std::unique_ptr<ServingLoop> ConversationLoop(int user_rows, int ctx = 0);
// Settings sampling at temperature 0.9 from `seed`, top_k the sampler's default unless given.
ConversationSettings SampledSettings(uint64_t seed, int max_new_tokens,
                                     int top_k = SamplingParams().top_k);
// Waits for the reply started with `observer`, expecting it to end without an error; its result.
RequestResult WaitReply(WaitingObserver& observer);
// Sends `text` and waits for the reply (expecting no error, and the conversation idle after it);
// returns the recorded turn.
ConversationTurn Say(Conversation& c, const std::string& text);

}  // namespace wc::test
