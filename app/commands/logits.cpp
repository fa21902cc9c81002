// `wormchat logits`: the logits of every position as a float32 .npy [n_tokens, vocab_size].
#include <memory>

#include "app/cli_errors.h"
#include "app/commands/commands.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "util/error.h"
#include "util/npy.h"

namespace wc {
namespace {

struct LogitsCmdOptions {
  ModelRunOptions run;
  std::string prompt;
  std::string ids;
  std::string out;
  bool raw = false;
};

void RunLogits(const LogitsCmdOptions& o) {
  LoadedModel m = LoadModel(o.run, /*need_tokenizer=*/!o.prompt.empty());
  const ModelConfig& c = m.model->config();
  const std::vector<int> ids =
      o.prompt.empty() ? ParseIdsFlag(o.ids, c.vocab_size, "--ids")
                       : EncodePrompt(*m.tokenizer, m.chat_format, o.prompt, o.raw, c.bos_token_id);
  if (ids.empty()) throw Error("--prompt encodes to no tokens");
  if (static_cast<int>(ids.size()) > m.ctx)
    throw Error(Cat(o.prompt.empty() ? "--ids" : "--prompt", ": ", ids.size(),
                    " tokens are longer than the context of ", m.ctx, " tokens; raise --ctx"));
  KVCache cache(m.model->CacheShape(1, m.ctx), m.kv);
  const int64_t vocab = c.vocab_size, n = static_cast<int64_t>(ids.size());
  std::vector<float> all(static_cast<size_t>(n * vocab));  // [n_tokens, vocab_size]
  const int64_t chunk = 256;
  std::vector<float> logits;
  for (int64_t begin = 0; begin < n; begin += chunk) {
    TokenBatch batch;
    for (int64_t i = begin; i < std::min(n, begin + chunk); ++i)
      batch.Add(ids[i], 0, static_cast<int>(i), true);
    m.model->Forward(batch, cache, &logits);
    std::copy(logits.begin(), logits.end(), all.begin() + begin * vocab);
  }
  WriteNpyF32(o.out, {n, vocab}, all.data());
}

}  // namespace

void RegisterLogits(CLI::App& app) {
  auto o = std::make_shared<LogitsCmdOptions>();
  CLI::App* cmd = app.add_subcommand("logits", "Write the logits of every position to a .npy file");
  AddModelRunOptions(cmd, o->run);
  auto* prompt = cmd->add_option("--prompt", o->prompt, "Text, tokenized as `generate` does");
  auto* ids = cmd->add_option("--ids", o->ids, "Token ids, e.g. \"1 2 3\", used exactly (no BOS)");
  prompt->excludes(ids);
  ids->excludes(prompt);
  cmd->add_option("--out", o->out, "Output .npy: float32 [n_tokens, vocab_size]")->required();
  cmd->add_flag("--raw", o->raw, "With --prompt: no chat framing");
  cmd->callback([o, prompt, ids] {
    if (prompt->count() == 0 && ids->count() == 0)
      throw UsageError("logits needs --prompt or --ids");
    RunLogits(*o);
  });
}

}  // namespace wc
