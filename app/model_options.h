// Options every model-running command shares: their flags, their checks and the defaults they
// take from the model directory. The loading they drive is app/model_loader.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kvcache/kv_cache.h"
#include "model/decoder_model.h"
#include "serving/run_options.h"
#include "serving/sampler.h"
#include "serving/serving_loop.h"

namespace wc {

// Speculative decoding's flags (issue 34): --speculate off|lookup, --speculate-k, --lookup-ngram.
struct SpeculationOptions {
  // off, lookup (prompt lookup: serving/proposer.h) or draft (a draft model:
  // serving/draft_proposer.h). Defaults, ranges and why lookup is the default:
  // serving/run_options.h.
  std::string mode = run_option::kSpeculate.default_choice;
  int k = static_cast<int>(run_option::kSpeculateK.default_number);              // --speculate-k
  int lookup_ngram = static_cast<int>(run_option::kLookupNgram.default_number);  // --lookup-ngram
  std::string draft_model;  // --draft-model DIR (--speculate draft)
  // The draft model's proposer, once loaded (app/speculation.h's LoadDraftModel); null otherwise.
  std::shared_ptr<ProposerSource> source;
  // A speculation flag was given on the command line (CheckSpeculation): asked for, not the
  // default, so asking for it with beam search is an error while the default just steps aside.
  bool given = false;
  // Request::speculate_k: 0 when off.
  int RequestK() const { return mode == "off" ? 0 : k; }
};

struct ModelRunOptions {
  std::string model_dir;                // --model (default: the model shipped in assets/)
  int threads = 0;                      // --threads (0 = all cores)
  std::string kv_dtype = "auto";        // --kv-dtype (auto: the checkpoint's, ResolveKVDType)
  std::string kv_scale = "token-head";  // --kv-scale
  int kv_block_size = 0;                // --kv-block-size (0 = contiguous)
  int kv_blocks = 0;                    // --kv-blocks (serving commands; 0 = full context per row)
  std::string prefix_cache = "on";      // --prefix-cache on|off (serving commands, paged KV)
  std::string prefix_cache_dir;         // --prefix-cache-dir DIR (empty: memory only)
  int64_t prefix_cache_dir_max_mb = 1024;  // --prefix-cache-dir-max-mb
  int ctx = 0;                             // --ctx (0 = the model's max_position_embeddings)
  int lm_head_fractures = 8;               // --lm-head-fractures
  std::string attention = "flash";  // --attention: flash (FlashDecode on the mesh) | reference
  std::string mesh = "n150";        // --mesh
  std::string reduction = "tree";   // --reduction
  int max_cores_per_head = 16;      // --max-cores-per-head
  int k_chunk_size = 0;             // --k-chunk-size (0 = auto)
  std::string matmul_precision = "bf16";  // --matmul-precision: bf16 | f32 | int8 / int7 (bfp
                                          // only) | int16 (BF16 only)
  std::string weights = "auto";           // --weights SPEC (model/weight_spec.h)
  // --chat-format FILE: a chat_format.json that frames turns instead of the model directory's
  // chat_format.json or its tokenizer_config.json chat template (model/chat/chat_format.h).
  std::string chat_format;
  // --ids (chat, batch, transcript record): text in and out is token ids written out ("5 17 9"),
  // fed without chat framing (tokenizer/ids_tokenizer.h); no tokenizer.model needed.
  bool ids = false;
  // --tensor-parallel R (chat, generate, batch, perplexity): under mpirun -np R, each rank holds
  // 1/R of the model (model/tensor_split.h); rank 0 runs the command, the others follow.
  int tensor_parallel = 1;
  // --speculate, --speculate-k, --lookup-ngram (AddSpeculationOptions) on the commands that decode
  // (generate, chat, batch, transcript record): how replies are decoded, never which tokens.
  SpeculationOptions speculation;
};

// ModelRunOptions as the serving-loop commands (generate, chat, batch) start them: paged KV.
inline ModelRunOptions ServingRunDefaults() {
  ModelRunOptions o;
  o.kv_block_size = kServingBlockSize;
  return o;
}

// Registers --model, --threads, --kv-dtype, --ctx, --lm-head-fractures on `cmd`.
void AddModelRunOptions(CLI::App* cmd, ModelRunOptions& o);
// The --weights flag's help (shared with info).
extern const char kWeightsHelp[];
// The ActivationPrecision named by --matmul-precision (bf16, f32, int8, int7 or int16); throws
// wc::Error
// otherwise.
ActivationPrecision ParseMatmulPrecision(const std::string& name);

// Registers --ids (ModelRunOptions::ids) on chat, batch and transcript record.
void AddIdsFlag(CLI::App* cmd, ModelRunOptions& o);
// Registers a run option (serving/run_options.h) on `cmd` as --NAME, or as `flags` when given
// ("-n,--max-new-tokens"): the spec's help unless `help` is given, the target's value now as the
// default shown, and the spec's check, so a bad value is the one line "--NAME: must be ACCEPTS,
// got VALUE" at parse time. A kSwitch option is a flag (bool target).
CLI::Option* AddRunOption(CLI::App* cmd, const RunOptionSpec& spec, float& target,
                          const std::string& help = "", const char* flags = nullptr);
CLI::Option* AddRunOption(CLI::App* cmd, const RunOptionSpec& spec, int& target,
                          const std::string& help = "", const char* flags = nullptr);
CLI::Option* AddRunOption(CLI::App* cmd, const RunOptionSpec& spec, std::string& target,
                          const std::string& help = "", const char* flags = nullptr);
CLI::Option* AddRunOption(CLI::App* cmd, const RunOptionSpec& spec, bool& target,
                          const std::string& help = "", const char* flags = nullptr);
// A list, each value checked (bench's --speculate-k 4 8: each measured).
CLI::Option* AddRunOption(CLI::App* cmd, const RunOptionSpec& spec, std::vector<int>& target,
                          const std::string& help = "", const char* flags = nullptr);
// -n,--max-new-tokens with `help`.
CLI::Option* AddMaxNewTokensOption(CLI::App* cmd, int& target, const std::string& help);

// Registers --temperature, --top-k, --top-p, --seed. --seed takes a whole number in [0, 2^64) or
// -1 / "random": a seed from the system's entropy, printed to stderr so the run can be repeated.
void AddSamplingOptions(CLI::App* cmd, SamplingParams& s, uint64_t& seed);

// Registers the four flags; bad values are one-line errors naming the flag.
void AddSpeculationOptions(CLI::App* cmd, SpeculationOptions& s);
// The one place a command's speculation options reach a request: sets r->speculate_k (0 when off),
// r->lookup_ngram and the draft's proposer (s.source). Every front end (generate, chat, batch,
// transcripts) goes through it. A beam request (r->beams set) does not speculate; the front ends
// refuse the pair with one line (below).
void ApplySpeculation(const SpeculationOptions& s, Request* r);
// The one line a front end gives when beam search and speculation are both asked for.
extern const char kBeamsDoNotSpeculate[];
// The sampling settings and -n (`max_new_tokens`) the user did not give on `cmd`, taken from the
// model directory's generation_config.json where it states them (model/generation_defaults.h):
// do_sample false is greedy. `model_dir` empty: the default model.
void ApplyGenerationDefaults(const CLI::App& cmd, const std::string& model_dir, SamplingParams* s,
                             int* max_new_tokens);
// A seed from the system's entropy (getrandom).
uint64_t EntropySeed();

// The default model directory (assets/default-model). Throws wc::Error if it is missing.
std::string DefaultModelDir();

// The transform every --model (and --draft-model, convert's MODEL_DIR) runs: a directory holding
// one *.gguf and no config.json becomes that file (model/gguf/gguf_config.h's ModelPath); a
// directory holding several is an error naming them.
CLI::Validator ModelPathTransform();
// More threads than this is a typo, not a machine (each OpenMP thread has its own stack; 100,000
// of them crash the runtime).
inline constexpr int kMaxThreads = 1024;
// Registers --threads (0 = all cores, at most kMaxThreads) on a command that runs the model.
void AddThreadsOption(CLI::App* cmd, int& threads);
// Applies --threads (OpenMP). Throws wc::Error outside [0, kMaxThreads].
void ApplyThreads(int threads);

// Registers --tensor-parallel on a command that runs under mpirun with a model split across ranks.
void AddTensorParallelOption(CLI::App* cmd, ModelRunOptions& o);

// --kv-dtype NAME, where "auto" (the default, vLLM's convention) is the checkpoint's own precision:
// bf16 weights -> bf16 KV, f32 -> f32, and f16 -> f32 (no f16 KV format; f32 holds f16 exactly).
KVDType ResolveKVDType(const std::string& name, DType weights);
// Accepts what ResolveKVDType does (a format name or "auto"); throws wc::Error naming --kv-dtype.
void CheckKVDTypeName(const std::string& name);

// A flag's token ids, written as "1 2 3" (tokenizer/ids_tokenizer.h's ParseTokenIds). Throws
// wc::Error naming `flag` for a word that is not an id, an id outside the vocabulary, or no ids at
// all.
std::vector<int> ParseIdsFlag(const std::string& text, int vocab, const std::string& flag);
// Registers --kv-blocks (the paged pool's size) and --prefix-cache on a serving command.
void AddKVBlocksOption(CLI::App* cmd, ModelRunOptions& o);
// Registers --prefix-cache, --prefix-cache-dir and --prefix-cache-dir-max-mb (serving commands
// without --kv-blocks: generate, chat).
void AddPrefixCacheOption(CLI::App* cmd, ModelRunOptions& o);

// --preset's help text: every architecture's presets (model/config.h).
std::string PresetHelp();

}  // namespace wc
