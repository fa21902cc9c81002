#include "app/model_options.h"

#include "model/config.h"

#include <omp.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "model/generation_defaults.h"
#include "model/gguf/gguf_config.h"
#include "tokenizer/ids_tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/parse.h"

namespace wc {

void AddModelRunOptions(CLI::App* cmd, ModelRunOptions& o) {
  cmd->add_option(
         "--model", o.model_dir,
         "Model directory (config.json, model.safetensors or shards, tokenizer.model or "
         "tokenizer.json), or a GGUF file (or a directory holding one) [default: the model in "
         "assets/]")
      ->transform(ModelPathTransform());
  AddThreadsOption(cmd, o.threads);
  cmd->add_option("--kv-dtype", o.kv_dtype,
                  "KV cache format: auto (the checkpoint's precision: bf16 for bf16 weights, f32 "
                  "for f32 and f16), bf16, f32, int8, fp8-e4m3, fp8-e5m2, bfp8")
      ->capture_default_str();
  cmd->add_option("--kv-scale", o.kv_scale,
                  "int8/fp8 scales: token-head (per token and KV head) or tensor (calibrated)")
      ->capture_default_str();
  cmd->add_option("--kv-block-size", o.kv_block_size,
                  "Paged KV cache with blocks of this many tokens (0 = contiguous)")
      ->capture_default_str();
  cmd->add_option("--ctx", o.ctx, "Context length in tokens (0 = max_position_embeddings)")
      ->capture_default_str();
  cmd->add_option("--lm-head-fractures", o.lm_head_fractures,
                  "Slices the padded LM head is computed in (seed fracture_vocab_factor)")
      ->capture_default_str();
  cmd->add_option("--attention", o.attention,
                  "Attention engine: flash (FlashDecode on the emulated mesh) or reference")
      ->capture_default_str();
  cmd->add_option("--mesh", o.mesh, "Emulated Wormhole mesh: n150, n300, n300x2, t3k, galaxy")
      ->capture_default_str();
  cmd->add_option("--reduction", o.reduction, "FlashDecode reduction: flat or tree")
      ->capture_default_str();
  cmd->add_option("--max-cores-per-head", o.max_cores_per_head,
                  "FlashDecode max_cores_per_head_batch")
      ->capture_default_str();
  cmd->add_option("--k-chunk-size", o.k_chunk_size, "FlashDecode K/V chunk rows (0 = auto)")
      ->capture_default_str();
  cmd->add_option("--matmul-precision", o.matmul_precision,
                  "Activations of BF16 weight matrices: bf16 (rounded, as llama.cpp and the "
                  "Wormhole: AMX tiles where the CPU has them) or f32 (exact products); int8: "
                  "bfp8/bfp4 matrices multiply 8-bit activation blocks in integers (VNNI or "
                  "AVX2; not exact: perplexity in docs/performance.md), BF16 ones as bf16; int7: "
                  "int8 with 7-bit activation blocks (bfp8 prefill on AVX2 without a sign step; "
                  "perplexity in docs/performance.md); "
                  "int16: BF16 matrices as 16-bit integer codes times 12-bit activation blocks "
                  "(vpmaddwd on AVX2; not exact), block-float ones as bf16. F32/F16 weights: f32")
      ->capture_default_str();
  cmd->add_option("--weights", o.weights, kWeightsHelp)->capture_default_str();
  cmd->add_option("--chat-format", o.chat_format,
                  "A chat_format.json framing chat turns, instead of the model's chat_format.json "
                  "or its tokenizer_config.json chat template (docs/models.md)");
}

const char kWeightsHelp[] =
    "Format of the weight matrices: auto (as stored), f32, bf16, bfp8 or bfp4 (Wormhole's block "
    "floats, 8.5 and 4.5 bits a weight), or per group: attn=bfp8,mlp=bfp4,lm_head=bf16 (a group "
    "not named keeps auto). Embeddings and norms stay as stored";

ActivationPrecision ParseMatmulPrecision(const std::string& name) {
  if (name == "bf16") return ActivationPrecision::kBF16;
  if (name == "f32") return ActivationPrecision::kF32;
  if (name == "int8") return ActivationPrecision::kInt8;
  if (name == "int16") return ActivationPrecision::kInt16;
  if (name == "int7") return ActivationPrecision::kInt7;
  throw Error(Cat("--matmul-precision '", name,
                  "' is not supported; choose bf16, f32, int8, int7 or int16"));
}

namespace {

// The spec's check as CLI11 runs it on the text given: "--NAME: must be ACCEPTS, got TEXT".
CLI::Validator RunOptionCheck(const RunOptionSpec& spec) {
  return CLI::Validator(
      [&spec](std::string& text) -> std::string {
        try {
          spec.ParseText(text, spec.name);
        } catch (const Error&) {
          return Cat("must be ", spec.Accepts(), ", got ", text.empty() ? "nothing" : text);
        }
        return {};
      },
      "", spec.name);
}

std::string FlagsOf(const RunOptionSpec& spec, const char* flags) {
  return flags != nullptr ? flags : Cat("--", spec.name);
}

std::string HelpOf(const RunOptionSpec& spec, const std::string& help) {
  std::string h = help.empty() ? spec.help : help;
  if (spec.meaning != nullptr && h.find(spec.meaning) == std::string::npos)
    h += Cat(" (", spec.meaning, ")");
  return h;
}

template <typename T>
CLI::Option* AddChecked(CLI::App* cmd, const RunOptionSpec& spec, T& target,
                        const std::string& help, const char* flags) {
  return cmd->add_option(FlagsOf(spec, flags), target, HelpOf(spec, help))
      ->check(RunOptionCheck(spec))
      ->capture_default_str();
}

}  // namespace

CLI::Option* AddRunOption(CLI::App* cmd, const RunOptionSpec& spec, float& target,
                          const std::string& help, const char* flags) {
  WC_CHECK(spec.kind == RunOptionKind::kNumber, spec.name, " is not a number option");
  return AddChecked(cmd, spec, target, help, flags);
}

CLI::Option* AddRunOption(CLI::App* cmd, const RunOptionSpec& spec, int& target,
                          const std::string& help, const char* flags) {
  WC_CHECK(spec.kind == RunOptionKind::kCount, spec.name, " is not a count option");
  return AddChecked(cmd, spec, target, help, flags);
}

CLI::Option* AddRunOption(CLI::App* cmd, const RunOptionSpec& spec, std::string& target,
                          const std::string& help, const char* flags) {
  WC_CHECK(spec.kind == RunOptionKind::kChoice, spec.name, " is not a choice option");
  return AddChecked(cmd, spec, target, help, flags);
}

CLI::Option* AddRunOption(CLI::App* cmd, const RunOptionSpec& spec, bool& target,
                          const std::string& help, const char* flags) {
  WC_CHECK(spec.kind == RunOptionKind::kSwitch, spec.name, " is not a switch");
  return cmd->add_flag(FlagsOf(spec, flags), target, HelpOf(spec, help));
}

CLI::Option* AddRunOption(CLI::App* cmd, const RunOptionSpec& spec, std::vector<int>& target,
                          const std::string& help, const char* flags) {
  WC_CHECK(spec.kind == RunOptionKind::kCount, spec.name, " is not a count option");
  return AddChecked(cmd, spec, target, help, flags);
}

CLI::Option* AddMaxNewTokensOption(CLI::App* cmd, int& target, const std::string& help) {
  return AddRunOption(cmd, run_option::kMaxNewTokensOption, target, help, "-n,--max-new-tokens");
}

void AddSpeculationOptions(CLI::App* cmd, SpeculationOptions& s) {
  AddRunOption(cmd, run_option::kSpeculate, s.mode);
  AddRunOption(cmd, run_option::kSpeculateK, s.k);
  AddRunOption(cmd, run_option::kLookupNgram, s.lookup_ngram);
  cmd->add_option("--draft-model", s.draft_model,
                  "Speculative decoding: a smaller checkpoint with the model's tokenizer that "
                  "proposes tokens (--speculate draft; given alone, it implies it)")
      ->transform(ModelPathTransform());
}

void ApplySpeculation(const SpeculationOptions& s, Request* r) {
  r->speculate_k = s.RequestK();
  r->lookup_ngram = s.lookup_ngram;
  r->proposer_source = s.source;
}

const char kBeamsDoNotSpeculate[] =
    "--speculate: beam search (--beams) does not speculate; use one or the other";

void AddSamplingOptions(CLI::App* cmd, SamplingParams& s, uint64_t& seed) {
  AddRunOption(cmd, run_option::kTemperature, s.temperature);
  AddRunOption(cmd, run_option::kTopK, s.top_k);
  AddRunOption(cmd, run_option::kTopP, s.top_p);
  cmd->add_option_function<std::string>(
         "--seed",
         [&seed](const std::string& v) {
           if (v == "-1" || v == "random") {
             seed = EntropySeed();
             std::fprintf(stderr, "wormchat: --seed %s: using seed %llu (--seed %llu repeats it)\n",
                          v.c_str(), static_cast<unsigned long long>(seed),
                          static_cast<unsigned long long>(seed));
             return;
           }
           try {
             seed = run_option::kSeed.ParseSeed(v, "--seed");
           } catch (const Error&) {
             throw CLI::ValidationError("--seed", Cat("must be ", run_option::kSeed.Accepts(),
                                                      " or -1 for a random one, got ", v));
           }
         },
         Cat(run_option::kSeed.help, " (-1: a random seed, printed)"))
      ->default_str(std::to_string(seed));
}

void ApplyGenerationDefaults(const CLI::App& cmd, const std::string& model_dir, SamplingParams* s,
                             int* max_new_tokens) {
  const std::string dir = model_dir.empty() ? DefaultModelDir() : model_dir;
  if (!DirExists(dir)) return;  // the model's loading names the problem
  const GenerationDefaults g = ReadGenerationDefaults(dir, false, false);
  auto unset = [&](const char* flag) { return cmd.count(flag) == 0; };
  if (unset("--temperature")) {
    if (g.do_sample && !*g.do_sample)
      s->temperature = 0.0f;
    else if (g.temperature)
      s->temperature = *g.temperature;
  }
  if (unset("--top-k") && g.top_k) s->top_k = *g.top_k;
  if (unset("--top-p") && g.top_p) s->top_p = *g.top_p;
  if (max_new_tokens != nullptr && unset("--max-new-tokens") && g.max_new_tokens)
    *max_new_tokens = *g.max_new_tokens;
}

uint64_t EntropySeed() {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) != static_cast<ssize_t>(sizeof(seed)))
    seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return seed;
}

CLI::Validator ModelPathTransform() {
  return CLI::Validator(
      [](std::string& path) {
        try {
          path = ModelPath(path);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      },
      "", "model path");
}

std::string DefaultModelDir() {
  const std::string dir = JoinPath(WORMCHAT_ASSETS_DIR, "default-model");
  if (!DirExists(dir))
    throw Error(Cat(dir,
                    ": the default model is missing; pass --model DIR with a Hugging Face "
                    "checkpoint (Falcon or Falcon3)"));
  return dir;
}

void AddIdsFlag(CLI::App* cmd, ModelRunOptions& o) {
  cmd->add_flag("--ids", o.ids,
                "Token ids in and out: messages and prompts are ids written out (\"5 17 9\"), fed "
                "without chat framing; replies print as ids. Needs no tokenizer");
}

void AddThreadsOption(CLI::App* cmd, int& threads) {
  cmd->add_option("--threads", threads,
                  Cat("Host threads (0 = all cores, shared among the host's ranks under mpirun; "
                      "at most ",
                      kMaxThreads, ")"))
      ->check(CLI::Range(0, kMaxThreads))
      ->capture_default_str();
}

void ApplyThreads(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    throw Error(Cat("--threads must be in [0, ", kMaxThreads, "] (0 = all cores), got ", threads));
  if (threads > 0) {
    omp_set_num_threads(threads);
    return;
  }
  // Ranks on one host share its cores (Open MPI binds a rank to a core when there are few ranks;
  // then this rank sees only that core).
  const int local_ranks = World().local_size();
  if (local_ranks > 1) omp_set_num_threads(std::max(1, omp_get_num_procs() / local_ranks));
}

void AddTensorParallelOption(CLI::App* cmd, ModelRunOptions& o) {
  cmd->add_option("--tensor-parallel", o.tensor_parallel,
                  "Split the model across the R ranks of mpirun -np R: each loads 1/R of the "
                  "weights (KV-head groups, MLP, LM-head fractures); rank 0 runs the command")
      ->capture_default_str();
}

void AddKVBlocksOption(CLI::App* cmd, ModelRunOptions& o) {
  cmd->add_option("--kv-blocks", o.kv_blocks,
                  "Paged KV pool size in blocks, shared by all user rows (0 = every row's full "
                  "context)")
      ->capture_default_str();
  AddPrefixCacheOption(cmd, o);
}

void AddPrefixCacheOption(CLI::App* cmd, ModelRunOptions& o) {
  cmd->add_option("--prefix-cache", o.prefix_cache,
                  "on: keep full KV blocks after their request and reuse them for every request "
                  "that starts with the same tokens (paged KV); off: prefill every prompt whole")
      ->capture_default_str();
  cmd->add_option("--prefix-cache-dir", o.prefix_cache_dir,
                  "Also keep the prefix cache's blocks in files under DIR (created if missing) and "
                  "map them in on later runs instead of prefilling");
  cmd->add_option("--prefix-cache-dir-max-mb", o.prefix_cache_dir_max_mb,
                  "Size cap of --prefix-cache-dir in MiB: the oldest files are deleted past it")
      ->capture_default_str();
}

KVDType ResolveKVDType(const std::string& name, DType weights) {
  if (name != "auto") return ParseKVDType(name);
  return weights == DType::kBF16 ? KVDType::kBF16 : KVDType::kF32;
}

void CheckKVDTypeName(const std::string& name) {
  if (name == "auto") return;
  try {
    ParseKVDType(name);
  } catch (const Error&) {
    throw Error(Cat("--kv-dtype '", name,
                    "' is not supported; choose auto, bf16, f32, int8, fp8-e4m3, fp8-e5m2 or "
                    "bfp8"));
  }
}

std::vector<int> ParseIdsFlag(const std::string& text, int vocab, const std::string& flag) {
  std::vector<int> ids = ParseTokenIds(text, vocab, flag);
  if (ids.empty()) throw Error(Cat(flag, ": no token ids given"));
  return ids;
}

std::string PresetHelp() {
  std::string s = "Shape preset:";
  for (const std::string& n : PresetNames()) s += " " + n;
  return s;
}

}  // namespace wc
