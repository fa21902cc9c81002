// `wormchat convert`: a checkpoint rewritten with its matrices in --weights formats, the
// block-float ones as tt-metal's tiles (model/convert.h; the format: model/converted_checkpoint.h).
#include <cstdio>
#include <memory>
#include <optional>

#include "app/commands/commands.h"
#include "app/model_options.h"
#include "app/progress.h"
#include "model/convert.h"
#include "util/error.h"

namespace wc {
namespace {

struct ConvertCmdOptions {
  std::string weights;
  std::string out;
  std::string model_dir;
  bool allow_requantize = false;
  int threads = 0;
};

void RunConvert(const ConvertCmdOptions& o) {
  ApplyThreads(o.threads);
  const WeightSpec spec = WeightSpec::Parse(o.weights);
  std::optional<Progress> progress;
  const ConvertSummary s = ConvertCheckpoint(
      o.model_dir, o.out, spec,
      [&progress](int64_t done, int64_t total) {
        if (!progress) progress.emplace("convert", total, "bytes");
        progress->Update(done);
      },
      o.allow_requantize);
  if (progress) progress->Finish();
  std::printf("wrote %s: attn %s, mlp %s, lm_head %s%s; %.1f MiB of tensors (from %.1f MiB)\n",
              o.out.c_str(), WeightFormatName(*s.stored.attn), WeightFormatName(*s.stored.mlp),
              WeightFormatName(*s.stored.lm_head),
              s.lm_head_split ? " (the tied head as its own lm_head.weight)" : "",
              static_cast<double>(s.bytes_out) / (1 << 20),
              static_cast<double>(s.bytes_in) / (1 << 20));
  if (s.requantized)
    std::fprintf(
        stderr,
        "warning: quantized GGUF weights were rounded twice (dequantized exactly, then rounded to "
        "--weights %s); --weights f32 keeps them exact\n",
        o.weights.c_str());
  if (s.from_gguf)
    std::printf(
        "note: the GGUF file's tokenizer (tokenizer.ggml.*) is not written; put the model's "
        "tokenizer.json or tokenizer.model in %s, or run it with --ids\n",
        o.out.c_str());
}

}  // namespace

void RegisterConvert(CLI::App& app) {
  auto o = std::make_shared<ConvertCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Write a checkpoint with its matrices in --weights formats (bfp8/bfp4 as tt-metal tiles)");
  cmd->add_option("--weights", o->weights, kWeightsHelp)->required();
  cmd->add_option("--out", o->out, "Output directory (new, or empty)")->required();
  cmd->add_flag("--allow-requantize", o->allow_requantize,
                "Write a quantized GGUF source's matrices in bf16/bfp8/bfp4 anyway (rounds twice)");
  cmd->add_option("MODEL_DIR", o->model_dir, "The checkpoint directory or GGUF file to convert")
      ->required()
      ->transform(ModelPathTransform());
  cmd->add_option("--threads", o->threads, "Host threads (0 = all cores)")
      ->check(CLI::Range(0, kMaxThreads));
  cmd->callback([o] { RunConvert(*o); });
}

}  // namespace wc
