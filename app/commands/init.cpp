// `wormchat init`: a seeded random checkpoint (config.json, model.safetensors, and a tokenizer:
// tokenizer.model or tokenizer.json).
#include <cstdio>
#include <fstream>
#include <memory>

#include "app/commands/commands.h"
#include "app/model_options.h"
#include "app/progress.h"
#include "model/random_checkpoint.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

struct InitCmdOptions {
  std::string preset = "tiny";
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, vocab = 0, ctx = 0;
  std::string dtype = "bf16";
  uint64_t seed = 0;
  std::string tokenizer;  // tokenizer.model or tokenizer.json; default: the default model's
  std::string out;
  bool force = false;
};

void RunInit(const InitCmdOptions& o) {
  ModelConfig c = PresetConfig(o.preset).Resized(o.layers, o.hidden, o.heads, o.kv_heads, o.preset);
  if (o.ctx > 0) c.max_position_embeddings = o.ctx;
  if (o.dtype != "bf16" && o.dtype != "f32")
    throw Error(Cat("--dtype '", o.dtype, "' is not supported; choose bf16 or f32"));
  const DType dtype = o.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  const std::string tok_path =
      o.tokenizer.empty() ? JoinPath(DefaultModelDir(), "tokenizer.model") : o.tokenizer;
  // A JSON file is a Hugging Face tokenizer.json, anything else a sentencepiece model.
  const std::string tok_text = ReadTextFile(tok_path, HfTokenizer::kMaxFileBytes);
  const size_t first = tok_text.find_first_not_of(" \t\r\n");
  const bool hf = first != std::string::npos && tok_text[first] == '{';
  std::unique_ptr<Tokenizer> tok_owned;
  if (hf)
    tok_owned = std::make_unique<HfTokenizer>(tok_text, tok_path);
  else
    tok_owned = std::make_unique<SentencePieceTokenizer>(tok_path);
  const Tokenizer& tok = *tok_owned;
  const char* tok_name = hf ? "tokenizer.json" : "tokenizer.model";
  if (o.vocab > 0) {
    c.vocab_size = o.vocab;
  } else if (o.preset == "tiny") {
    c.vocab_size = tok.piece_count();
  }
  if (c.vocab_size < tok.piece_count())
    throw Error(Cat("--vocab ", c.vocab_size, " is smaller than the tokenizer's ",
                    tok.piece_count(), " pieces (", tok_path, ")"));
  // Special tokens are the tokenizer's: a random model is generated through it.
  if (tok.bos_id() >= 0) c.bos_token_id = tok.bos_id();
  if (tok.eos_id() >= 0) c.eos_token_id = tok.eos_id();
  c.Validate(Cat("wormchat init --preset ", o.preset));
  for (const char* name : {"config.json", "model.safetensors", "model.safetensors.index.json"})
    if (!o.force && FileExists(JoinPath(o.out, name)))
      throw Error(Cat(o.out, " already holds a model (", name,
                      "); pass --force to overwrite it, or choose another --out"));
  Progress progress("init", RandomCheckpointBytes(c, dtype), "bytes");
  WriteRandomCheckpoint(c, dtype, o.seed, o.out,
                        [&progress](int64_t done, int64_t) { progress.Update(done); });
  progress.Finish();
  // The model directory's tokenizer is tokenizer.model if there is one: drop the other kind.
  std::remove(JoinPath(o.out, hf ? "tokenizer.model" : "tokenizer.json").c_str());
  std::ofstream out(JoinPath(o.out, tok_name), std::ios::binary);
  out.write(tok_text.data(), static_cast<std::streamsize>(tok_text.size()));
  if (!out) throw Error(Cat(JoinPath(o.out, tok_name), ": cannot write"));
  std::printf(
      "wrote %s: %d layers, hidden %d, %d heads / %d KV heads, vocab %d, %.1f M parameters, %s\n",
      o.out.c_str(), c.n_layers, c.hidden_size, c.n_head, c.n_kv_heads, c.vocab_size,
      static_cast<double>(c.n_params()) / 1e6, DTypeName(dtype));
}

}  // namespace

void RegisterInit(CLI::App& app) {
  auto o = std::make_shared<InitCmdOptions>();
  CLI::App* cmd =
      app.add_subcommand("init", "Write a seeded random checkpoint for tests and benchmarks");
  cmd->add_option("--preset", o->preset, PresetHelp())->capture_default_str();
  // The ranges are ModelConfig's (model/config.cpp).
  cmd->add_option("--layers", o->layers, "Override the number of layers (1-1024)")
      ->check(CLI::Range(1, 1 << 10));
  cmd->add_option("--hidden", o->hidden,
                  "Override hidden_size (the MLP keeps the preset's width ratio; 1-65536)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--heads", o->heads, "Override the number of query heads (1-4096)")
      ->check(CLI::Range(1, 1 << 12));
  cmd->add_option("--kv-heads", o->kv_heads, "Override the number of KV heads (1-4096)")
      ->check(CLI::Range(1, 1 << 12));
  cmd->add_option("--vocab", o->vocab,
                  "Override vocab_size (>= the tokenizer's pieces; at most 16777216)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--ctx", o->ctx, "Override max_position_embeddings (1-16777216)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--dtype", o->dtype, "Weight dtype: bf16 or f32")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  cmd->add_option("--tokenizer", o->tokenizer,
                  "Tokenizer to copy: a sentencepiece tokenizer.model or a Hugging Face "
                  "tokenizer.json [default: the default model's]");
  cmd->add_option("--out", o->out, "Output directory")->required();
  cmd->add_flag("--force", o->force, "Overwrite a model already in --out");
  int threads = 0;
  cmd->add_option("--threads", threads, "Host threads (unused here)")
      ->check(CLI::Range(0, kMaxThreads));
  cmd->callback([o] { RunInit(*o); });
}

}  // namespace wc
