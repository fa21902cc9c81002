// `wormchat generate`: one prompt in, generated text streamed to stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "app/commands.h"
#include "app/model_options.h"
#include "app/stdout_sink.h"
#include "serving/serving_loop.h"
#include "serving/waiting_observer.h"
#include "util/error.h"

namespace wc {
namespace {

struct GenerateCmdOptions {
  ModelRunOptions run = ServingRunDefaults();
  std::string prompt;
  int max_new_tokens = 256;
  SamplingParams sampling;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool raw = false;
  bool stats = false;
};

void RunGenerate(const GenerateCmdOptions& o) {
  o.sampling.Validate();
  if (o.max_new_tokens < 0) throw Error(Cat("-n must be >= 0, got ", o.max_new_tokens));
  LoadedModel m = LoadModel(o.run, /*need_tokenizer=*/true);
  const FalconConfig& c = m.model->config();
  const std::vector<int> ids =
      EncodePrompt(*m.tokenizer, m.chat_format, o.prompt, o.raw, c.bos_token_id);
  if (ids.empty()) throw Error("--prompt is empty; give some text");
  if (static_cast<int>(ids.size()) >= m.ctx)
    throw Error(Cat("--prompt is ", ids.size(), " tokens, too long for the context of ", m.ctx,
                    " tokens; shorten it or raise --ctx"));
  ServingLoop loop(*m.model, m.tokenizer.get(), m.chat_format,
                   ServingOptionsFor(o.run, m, /*user_rows=*/1));
  Request r;
  r.prompt_ids = ids;
  r.chat = !o.raw;
  r.sampling = o.sampling;
  r.seed = o.seed;
  r.max_new_tokens = o.max_new_tokens;
  r.stop = o.stop;
  StdoutSink sink;
  auto observer = std::make_shared<WaitingObserver>(&sink);
  r.observer = observer;
  loop.Submit(std::move(r));
  const RequestResult res = observer->Wait();
  loop.Shutdown(ShutdownMode::kDrain);
  if (res.reason == StopReason::kError) throw Error(res.error);
  sink.Write("\n");
  sink.Flush();
  if (o.stats) {
    const double prefill_s = res.t_first_token > 0 ? res.t_first_token - res.t_admit : 0;
    const double decode_s =
        res.t_finish - (res.t_first_token > 0 ? res.t_first_token : res.t_admit);
    const auto& at = m.model->attention_totals();
    std::fprintf(stderr,
                 "prompt %zu tokens in %.3f s (%.1f tok/s); generated %zu tokens in %.3f s "
                 "(%.1f tok/s); stop: %s; attention: %s, %lld ops, %.1f MB K/V read, %.1f KB "
                 "NoC, up to %lld cores, %.1f us emulated on the mesh\n",
                 ids.size(), prefill_s, ids.size() / std::max(prefill_s, 1e-9), res.tokens.size(),
                 decode_s, res.tokens.size() / std::max(decode_s, 1e-9), StopReasonName(res.reason),
                 m.model->options().attention == AttentionImpl::kFlashDecode
                     ? ("FlashDecode on " + m.model->options().mesh).c_str()
                     : "reference",
                 static_cast<long long>(at.ops), at.dram_bytes / 1e6, at.noc_bytes / 1e3,
                 static_cast<long long>(at.max_cores_used), at.emulated_us);
  }
}

}  // namespace

void RegisterGenerate(CLI::App& app) {
  auto o = std::make_shared<GenerateCmdOptions>();
  CLI::App* cmd =
      app.add_subcommand("generate", "Generate a reply to one prompt, streamed to stdout");
  AddModelRunOptions(cmd, o->run);
  cmd->add_option("--prompt", o->prompt, "The prompt text")->required();
  cmd->add_option("-n,--max-new-tokens", o->max_new_tokens, "Most tokens to generate")
      ->capture_default_str();
  AddSamplingOptions(cmd, o->sampling, o->seed);
  cmd->add_option("--stop", o->stop, "Stop string (repeatable); the text before it is kept");
  cmd->add_flag("--raw", o->raw, "Feed the prompt as it is, without the chat format's framing");
  cmd->add_flag("--stats", o->stats, "Print speed and emulated-attention figures to stderr");
  cmd->callback([o] { RunGenerate(*o); });
}

}  // namespace wc
