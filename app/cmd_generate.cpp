// `wormchat generate`: one prompt in, generated text streamed to stdout.
#include <cstdio>
#include <memory>

#include "app/commands.h"
#include "app/model_options.h"
#include "app/stdout_sink.h"
#include "serving/conversation.h"
#include "util/error.h"

namespace wc {
namespace {

struct GenerateCmdOptions {
  ModelRunOptions run;
  std::string prompt;
  int max_new_tokens = 256;
  SamplingParams sampling;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool raw = false;
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
  KVCache cache(m.model->CacheShape(1, m.ctx), m.kv_dtype);
  Conversation conv(*m.model, cache, 0);
  conv.Feed(ids);
  GenerateOptions g;
  g.max_new_tokens = o.max_new_tokens;
  g.stop = o.stop;
  const bool framed = m.chat_format && !o.raw;
  if (framed) g.stop.insert(g.stop.end(), m.chat_format->stop.begin(), m.chat_format->stop.end());
  g.trim_leading_space = framed;
  Sampler sampler(o.sampling, o.seed);
  StdoutSink sink;
  conv.Generate(*m.tokenizer, g, sampler, sink);
  sink.Write("\n");
  sink.Flush();
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
  cmd->callback([o] { RunGenerate(*o); });
}

}  // namespace wc
