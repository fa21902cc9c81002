// `wormchat serve`: the serving loop behind the OpenAI HTTP API (app/serve/api_server.h).
//
// Shutdown: SIGINT or SIGTERM stops accepting (new connections are refused, a request on an open
// connection gets 503) and lets running requests finish; --drain-s after the signal, any still
// running are cancelled. Then the loop drains its queue and the process exits with status 0.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "app/commands/commands.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "app/openai/api_key_file.h"
#include "app/rank_lifecycle.h"
#include "app/serve/api_server.h"
#include "app/speculation.h"
#include "mesh/attention_meter.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

struct ServeCmdOptions {
  ModelRunOptions run = ServingRunDefaults();
  ApiServerOptions api;
  std::string api_key_file;
  int user_rows = 32;
  int max_batch_tokens = 256;
  int max_new_tokens = kDefaultMaxNewTokens;
  // OpenAI's defaults for what a request leaves out (ApiServerOptions::defaults).
  SamplingParams sampling = ApiServerOptions().defaults.sampling;
  uint64_t seed = 0;
  double drain_s = 30;
};

std::string ModelId(const std::string& dir) {
  std::string id = std::filesystem::path(dir).filename().string();
  if (id.empty()) id = std::filesystem::path(dir).parent_path().filename().string();
  return id.empty() ? "wormchat" : id;
}

// The stop signal received (SIGINT or SIGTERM), or 0. Set by the handler on whichever thread
// the signal lands: a handler, not a blocked mask and sigwait, because under mpirun
// (--tensor-parallel) MPI's own threads start before this command runs and would take the default
// action - the rank killed - for a signal they did not block.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);  // async-signal-safe

void OnStopSignal(int sig) {
  g_stop_signal.store(sig);
}

void RunServe(ServeCmdOptions& o) {
  // Before MPI may start: every rank holds on to SIGINT and SIGTERM (mpirun forwards them to all).
  // The leader drains on it; a follower ends when its leader does.
  struct sigaction stop {};
  stop.sa_handler = OnStopSignal;
  stop.sa_flags = SA_RESTART;  // a read or write under way goes on; the watcher looks every 50 ms
  sigemptyset(&stop.sa_mask);
  sigaction(SIGINT, &stop, nullptr);
  sigaction(SIGTERM, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal
  if (FollowUnlessTensorParallelLeader(o.run) == RankRole::kFollowed) return;
  o.sampling.Validate();
  if (o.max_new_tokens < 1) throw Error(Cat("-n must be >= 1, got ", o.max_new_tokens));
  if (!o.api_key_file.empty()) o.api.api_key = ReadApiKeyFile(o.api_key_file);

  LoadedModel m = LoadModel(o.run, /*need_tokenizer=*/true);
  const ModelConfig& c = m.model->config();
  SpeculationOptions speculation = o.run.speculation;
  LoadDraftModel(speculation, o.run, m, o.user_rows);
  // The emulated mesh's attention time, for the streamed replies' figures (server_figures.h): one
  // performance-model estimate per FlashDecode op, as the chat's status bar runs. Outlives the
  // loop, before whose first Forward it is installed.
  AttentionMeter meter;
  m.model->set_flash_decode_observer(&meter);
  ServingLoop loop(*m.model, m.tokenizer.get(), m.chat_format,
                   ServingOptionsFor(o.run, m, o.user_rows, o.max_batch_tokens));
  ApiModel model;
  model.id = ModelId(m.dir);
  model.framing =
      RequestFraming{m.tokenizer.get(), &m.chat_format, c.bos_token_id, c.eos_token_id, m.ctx,
                     c.vocab_size,      o.run.ids};
  model.created = static_cast<int64_t>(std::time(nullptr));
  o.api.defaults.max_tokens = o.max_new_tokens;
  o.api.defaults.sampling = o.sampling;
  o.api.defaults.seed = o.seed;
  o.api.decorate = [speculation](Request* r) { ApplySpeculation(speculation, r); };
  o.api.figures.model = m.model.get();
  o.api.figures.mesh = o.run.mesh;
  o.api.figures.meter = &meter;
  ApiServer server(loop, model, o.api);
  const int port = server.Bind();
  std::fprintf(stderr,
               "wormchat serve: listening on http://%s:%d (model %s, %d user rows, context %d%s)\n",
               o.api.host.c_str(), port, model.id.c_str(), o.user_rows, m.ctx,
               o.api.api_key.empty() ? "" : ", API key required");
  std::fflush(stderr);

  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const int sig = g_stop_signal.load();
      if (sig != SIGINT && sig != SIGTERM) continue;
      std::fprintf(stderr, "wormchat serve: %s: finishing running requests (up to %.0f s)\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM", o.drain_s);
      server.Stop();
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::duration<double>(o.drain_s);
      while (!done && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (!done) loop.Shutdown(ShutdownMode::kCancel);  // the rest end as cancelled
      return;
    }
  });
  server.Listen();
  done = true;
  watcher.join();
  loop.Shutdown(ShutdownMode::kDrain);
  std::fprintf(stderr, "wormchat serve: stopped\n");
}

}  // namespace

void RegisterServe(CLI::App& app) {
  auto o = std::make_shared<ServeCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve the model over the OpenAI HTTP API (/v1/chat/completions, /v1/completions)");
  AddModelRunOptions(cmd, o->run);
  AddTensorParallelOption(cmd, o->run);
  AddIdsFlag(cmd, o->run);
  AddKVBlocksOption(cmd, o->run);
  cmd->add_option("--host", o->api.host, "Address to listen on (all interfaces: 0.0.0.0)")
      ->capture_default_str();
  cmd->add_option("--port", o->api.port, "Port to listen on (0: any free port, printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  auto* key = cmd->add_option("--api-key", o->api.api_key,
                              "Require Authorization: Bearer KEY on every route but /health");
  auto* key_file = cmd->add_option("--api-key-file", o->api_key_file,
                                   "Read --api-key from this file (one line), keeping it off the "
                                   "command line");
  key->excludes(key_file);
  key_file->excludes(key);
  cmd->add_option("--cors", o->api.cors_origin,
                  "Answer browsers from this origin (Access-Control-Allow-Origin); off by default");
  cmd->add_option("--user-rows", o->user_rows, "Requests running at once")->capture_default_str();
  cmd->add_option("--max-batch-tokens", o->max_batch_tokens, "Tokens per forward pass (>= 1)")
      ->capture_default_str();
  cmd->add_option("--max-queue", o->api.max_queue,
                  "Requests that may wait for a row; more get 429 with Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--max-body-bytes", o->api.max_body_bytes,
                  "Largest request body; a larger one gets 413")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30));
  cmd->add_option("--max-messages", o->api.max_messages, "Most messages in one chat request")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-connections", o->api.max_connections,
                  "Connections served at once (HTTP threads)")
      ->capture_default_str()
      ->check(CLI::Range(4, 4096));
  cmd->add_option("--request-timeout-s", o->api.request_timeout_s,
                  "Seconds a whole request (headers and body) may take to arrive, from when its "
                  "first byte could be sent; slower clients are dropped (408). Never limits a "
                  "reply")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--drain-s", o->drain_s,
                  "On SIGTERM or SIGINT, seconds running requests may take to finish")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  AddMaxNewTokensOption(cmd, o->max_new_tokens,
                        "Most tokens per reply when a request gives no max_tokens");
  AddSamplingOptions(cmd, o->sampling, o->seed);
  AddSpeculationOptions(cmd, o->run.speculation);
  cmd->callback([o, cmd] {
    ApplyGenerationDefaults(*cmd, o->run.model_dir, &o->sampling, &o->max_new_tokens);
    CheckSpeculation(*cmd, o->run.speculation, /*beams=*/0);
    RunServe(*o);
  });
}

}  // namespace wc
