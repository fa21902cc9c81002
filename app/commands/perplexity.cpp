// `wormchat perplexity`: teacher-forced perplexity of a text file through the decode path.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/commands/commands.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "app/progress.h"
#include "app/rank_lifecycle.h"
#include "serving/perplexity.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

struct PerplexityCmdOptions {
  ModelRunOptions run;
  std::string text_file;
  bool json = false;
  bool attention_error = false;
};

void RunPerplexity(const PerplexityCmdOptions& o) {
  if (o.attention_error && o.run.tensor_parallel > 1)
    throw Error(
        "--attention-error compares every head's attention; run it without "
        "--tensor-parallel");
  if (FollowUnlessTensorParallelLeader(o.run) == RankRole::kFollowed) return;
  const std::string text = ReadTextFile(o.text_file);
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw Error(Cat(o.text_file, ": is empty; give some text to score"));
  LoadedModel m = LoadModel(o.run, /*need_tokenizer=*/true);
  const std::vector<int> ids =
      EncodePrompt(*m.tokenizer, m.chat_format, text, /*raw=*/true, m.model->config().bos_token_id);
  KVCache cache(m.model->CacheShape(1, m.ctx), m.kv);
  Progress progress("perplexity", static_cast<int64_t>(ids.size()) - 1, "tokens");
  const PerplexityResult r = TeacherForcedPerplexity(
      *m.model, ids, cache, [&progress](int64_t done, int64_t) { progress.Update(done); });
  progress.Finish();
  const std::string scale = HasScale(m.kv.dtype) ? ScaleModeName(m.kv.scale) : "none";
  AttentionError ae;
  if (o.attention_error) {  // the same tokens again, in lockstep with an f32 cache
    KVCache reference(m.model->CacheShape(1, m.ctx), KVDType::kF32);
    KVCache again(m.model->CacheShape(1, m.ctx), m.kv);
    ae = MeasureAttentionError(*m.model, ids, reference, again);
  }
  if (o.json) {
    nlohmann::json j = {{"kv_dtype", KVDTypeName(m.kv.dtype)},
                        {"kv_scale", scale},
                        {"tokens", r.tokens},
                        {"perplexity", r.perplexity()}};
    if (o.attention_error) {
      j["attention_cosine"] = ae.cosine;
      j["attention_max_abs_error"] = ae.max_abs;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s: %lld tokens scored, perplexity %.4f (kv %s, scale %s, context %d)\n",
                o.text_file.c_str(), static_cast<long long>(r.tokens), r.perplexity(),
                KVDTypeName(m.kv.dtype), scale.c_str(), m.ctx);
    if (o.attention_error)
      std::printf(
          "attention output vs an f32 cache: cosine %.8f, max abs error %.3g over %lld "
          "values\n",
          ae.cosine, ae.max_abs, static_cast<long long>(ae.values));
  }
}

}  // namespace

void RegisterPerplexity(CLI::App& app) {
  auto o = std::make_shared<PerplexityCmdOptions>();
  CLI::App* cmd =
      app.add_subcommand("perplexity", "Teacher-forced perplexity of a text, token by token");
  AddModelRunOptions(cmd, o->run);
  AddTensorParallelOption(cmd, o->run);
  cmd->add_option("--text", o->text_file, "Text file to score")->required();
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->add_flag("--attention-error", o->attention_error,
                "Also compare every attention output with those over an f32 cache");
  cmd->callback([o] { RunPerplexity(*o); });
}

}  // namespace wc
