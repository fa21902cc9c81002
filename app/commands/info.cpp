// `wormchat info`: parameters, weight bytes and KV-cache bytes of a model or a preset shape.
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/commands/commands.h"
#include "app/model_options.h"
#include "model/checkpoint.h"
#include "model/converted_checkpoint.h"
#include "model/fingerprint.h"
#include "model/gguf/gguf_config.h"
#include "model/gguf/gguf_file.h"
#include "model/lm_head.h"
#include "model/tensor_split.h"
#include "model/tensor_table.h"
#include "model/weight_spec.h"
#include "model/weights.h"
#include "util/error.h"

namespace wc {
namespace {

struct InfoCmdOptions {
  std::string model_dir;
  std::string model_arg;  // the positional MODEL (the same as --model)
  std::string preset;
  int users = 1;
  int ctx = 0;
  std::string kv_dtype = "bf16";
  std::string kv_scale = "token-head";
  int tensor_parallel = 1;
  int lm_head_fractures = 8;
  std::string weights = "auto";
  bool json = false;
};

std::string MiB(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  std::string s = buf;
  if (s.size() > 7 && s.compare(s.size() - 7, 7, ".00 MiB") == 0) s.erase(s.size() - 7, 3);
  return s;
}

// A GGUF file's facts beside the config: its version, architecture and context length keys, and
// each tensor type's count and bytes (in the type table's numbering order).
struct GgufFacts {
  uint32_t version = 0;
  std::string architecture;
  int64_t context_length = 0;  // {arch}.context_length, or 0 when absent
  struct TypeCount {
    std::string name;
    int64_t tensors = 0, bytes = 0;
  };
  std::vector<TypeCount> types;
};

GgufFacts ReadGgufFacts(const std::string& path) {
  const std::shared_ptr<const GgufFile> g = OpenGgufFile(path);
  GgufFacts f;
  f.version = g->contents().version;
  f.architecture = g->String("general.architecture");
  const std::string ctx_key = f.architecture + ".context_length";
  if (g->Find(ctx_key) != nullptr) f.context_length = g->Int(ctx_key);
  std::map<uint32_t, GgufFacts::TypeCount> by_type;
  for (const GgufTensor& t : g->contents().tensors) {
    GgufFacts::TypeCount& n = by_type[t.type_id];
    n.name = GgmlTypeName(t.type_id);
    ++n.tensors;
    n.bytes += static_cast<int64_t>(t.n_bytes);
  }
  for (const auto& [id, n] : by_type) f.types.push_back(n);
  return f;
}

void RunInfo(InfoCmdOptions o) {
  if (!o.model_arg.empty()) {
    if (!o.model_dir.empty() || !o.preset.empty())
      throw Error("info: give the model once (MODEL or --model), without --preset");
    o.model_dir = o.model_arg;
  }
  if (o.users < 1) throw Error(Cat("--users must be >= 1, got ", o.users));
  if (o.ctx < 0) throw Error(Cat("--ctx must be >= 0, got ", o.ctx));
  const KVDType kv_dtype = ParseKVDType(o.kv_dtype);
  const WeightSpec spec = WeightSpec::Parse(o.weights);
  ModelConfig c;
  std::string source, weight_dtype, fingerprint;
  int64_t weight_bytes = 0;
  // attn, mlp, lm_head as stored
  WeightFormat stored[3] = {WeightFormat::kBF16, WeightFormat::kBF16, WeightFormat::kBF16};
  std::optional<WeightSpec> converted;  // a converted checkpoint's wormchat_weights
  std::optional<GgufFacts> gguf;        // a GGUF file's
  WeightSpec effective = spec;          // --weights with the converted bfp groups as stored
  if (!o.preset.empty()) {
    c = PresetConfig(o.preset);
    source = "preset " + o.preset;
    weight_dtype = "BF16 (as the preset would be stored)";
    weight_bytes = c.n_params() * 2;
  } else {
    const std::string dir = o.model_dir.empty() ? DefaultModelDir() : o.model_dir;
    c = LoadConfig(dir);
    const auto ck = Checkpoint::Open(dir, c);
    if (IsGgufModel(dir)) gguf = ReadGgufFacts(dir);
    source = dir;
    weight_dtype = ck->dtype_summary();
    weight_bytes = static_cast<int64_t>(ck->total_bytes());
    converted = ReadStoredWeightFormats(dir);
    effective = EffectiveWeightSpec(converted, spec, dir);
    // Each group's stored format: its first matrix's (the LM head's, or the embeddings' when
    // tied), named by the architecture's table.
    const std::vector<TensorEntry> table = ModelTensors(c);
    const std::map<std::string, WeightGroup> groups = MatrixGroups(c);
    for (WeightGroup g : kWeightGroups) {
      const int i = static_cast<int>(g);
      std::string name = table.front().name;  // the LM head tied: the embeddings
      std::vector<int64_t> shape = table.front().shape;
      if (g == WeightGroup::kLmHead) {
        for (const auto& [n, group] : groups)
          if (group == g && ck->Has(n)) name = n;
      } else {
        for (const TensorEntry& e : table)
          if (e.layer == 0 && GroupOfRole(e.role) == g) {
            name = e.name;
            shape = e.shape;
            break;
          }
      }
      // A quantized GGUF group: its type, held as stored (kernels/gemm/quant/quant_panels.h).
      const TensorInfo& t = ck->Raw(name);
      stored[i] = converted && IsBfp(*converted->Of(g)) ? *converted->Of(g)
                  : t.readable                          ? FormatOfDType(ck->Get(name, shape).dtype)
                                                        : FormatOf(*GgmlQuantNamed(t.dtype_name));
    }
    fingerprint = ModelFingerprint(dir, /*with_kv_scales=*/false);
  }
  KVCacheShape shape;
  shape.n_layers = c.n_layers;
  shape.user_rows = o.users;
  shape.n_kv_heads = c.n_kv_heads;
  shape.max_seq = o.ctx > 0 ? o.ctx : c.max_position_embeddings;
  shape.head_dim = c.head_dim();
  const ScaleMode scale = ParseScaleMode(o.kv_scale);
  const int64_t per_token = KVBytesPerToken(shape, kv_dtype, scale);
  const int64_t layer_k = KVBytesPerLayerK(shape, kv_dtype, scale);
  const int64_t total = 2 * layer_k * c.n_layers;
  const int pad = FracturedLMHead::kPadMultiple;
  const int padded_vocab = (c.vocab_size + pad - 1) / pad * pad;
  // The groups' formats (--weights) and what they take, whole and on each rank.
  WeightFormat formats[3];
  for (WeightGroup g : kWeightGroups)
    formats[static_cast<int>(g)] = effective.Of(g).value_or(stored[static_cast<int>(g)]);
  CheckBfpSlices(c, o.lm_head_fractures, o.tensor_parallel, effective);
  const WeightGroupBytes whole_groups =
      RankWeightGroupBytes(c, TensorSplit::Whole(c, o.lm_head_fractures), formats);
  // --tensor-parallel R: what each rank would hold (model/tensor_split.h).
  struct RankBytes {
    WeightGroupBytes weights;
    int64_t kv;
  };
  std::vector<RankBytes> ranks;
  if (o.tensor_parallel > 1)
    for (int r = 0; r < o.tensor_parallel; ++r) {
      const TensorSplit s = TensorSplit::Make(c, o.lm_head_fractures, r, o.tensor_parallel);
      KVCacheShape rank_shape = shape;
      rank_shape.n_kv_heads = s.n_kv_heads();
      ranks.push_back({RankWeightGroupBytes(c, s, formats),
                       2 * KVBytesPerLayerK(rank_shape, kv_dtype, scale) * c.n_layers});
    }
  const int64_t whole_held = whole_groups.total();
  auto group_json = [&](const WeightGroupBytes& b) {
    return nlohmann::json{
        {"attn", b.attn}, {"mlp", b.mlp}, {"lm_head", b.lm_head}, {"vectors", b.vectors}};
  };
  if (o.json) {
    nlohmann::json j = {{"source", source},
                        {"architecture", ArchitectureOf(c.arch).name},
                        {"hf_class", ArchitectureOf(c.arch).hf_class},
                        {"layout", c.LayoutSummary()},
                        {"n_layers", c.n_layers},
                        {"hidden_size", c.hidden_size},
                        {"n_head", c.n_head},
                        {"n_kv_heads", c.n_kv_heads},
                        {"head_dim", c.head_dim()},
                        {"ffn_hidden_size", c.ffn_hidden_size},
                        {"vocab_size", c.vocab_size},
                        {"padded_vocab", padded_vocab},
                        {"parameters", c.n_params()},
                        {"weight_bytes", weight_bytes},
                        {"weight_dtype", weight_dtype},
                        {"kv_dtype", KVDTypeName(kv_dtype)},
                        {"users", o.users},
                        {"ctx", shape.max_seq},
                        {"kv_bytes_per_token", per_token},
                        {"kv_bytes_per_layer_k", layer_k},
                        {"kv_bytes_per_layer_v", layer_k},
                        {"kv_bytes_per_layer", 2 * layer_k},
                        {"kv_bytes_total", total}};
    if (!fingerprint.empty()) j["fingerprint"] = fingerprint;
    if (gguf) {
      nlohmann::json types = nlohmann::json::object();
      for (const GgufFacts::TypeCount& t : gguf->types)
        types[t.name] = {{"tensors", t.tensors}, {"bytes", t.bytes}};
      j["gguf"] = {{"version", gguf->version},
                   {"architecture", gguf->architecture},
                   {"context_length", gguf->context_length},
                   {"tensor_types", types}};
    }
    j["weight_bytes_held"] = whole_held;
    j["weights"] = spec.ToString();
    if (converted)
      j["stored_weights"] = {{"attn", WeightFormatName(*converted->attn)},
                             {"mlp", WeightFormatName(*converted->mlp)},
                             {"lm_head", WeightFormatName(*converted->lm_head)}};
    j["weight_formats"] = {{"attn", WeightFormatName(formats[0])},
                           {"mlp", WeightFormatName(formats[1])},
                           {"lm_head", WeightFormatName(formats[2])}};
    j["weight_bytes_by_group"] = group_json(whole_groups);
    if (!ranks.empty()) {
      nlohmann::json per_rank = nlohmann::json::array();
      for (const RankBytes& r : ranks)
        per_rank.push_back({{"weight_bytes_held", r.weights.total()},
                            {"weight_bytes_by_group", group_json(r.weights)},
                            {"kv_bytes_total", r.kv}});
      j["tensor_parallel"] = {{"ranks", o.tensor_parallel}, {"per_rank", per_rank}};
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("model        %s\n", source.c_str());
  if (!fingerprint.empty())
    std::printf("fingerprint  %s (as transcripts record it; kv_scales.json aside)\n",
                fingerprint.c_str());
  std::printf("architecture %s (%s): %s\n", ArchitectureOf(c.arch).name,
              ArchitectureOf(c.arch).hf_class, ArchitectureOf(c.arch).summary);
  std::printf("layout       %s\n", c.LayoutSummary().c_str());
  std::printf(
      "shape        %d layers, hidden %d, %d query heads / %d KV heads, head_dim %d, ffn %d\n",
      c.n_layers, c.hidden_size, c.n_head, c.n_kv_heads, c.head_dim(), c.ffn_hidden_size);
  std::printf("vocabulary   %d (LM head padded to %d rows)\n", c.vocab_size, padded_vocab);
  std::printf("parameters   %.3f B (%lld)\n", static_cast<double>(c.n_params()) / 1e9,
              static_cast<long long>(c.n_params()));
  std::printf("weights      %s, %s\n", MiB(weight_bytes).c_str(), weight_dtype.c_str());
  if (gguf) {
    std::printf("gguf         v%u, %s, context length %lld\n", gguf->version,
                gguf->architecture.c_str(), static_cast<long long>(gguf->context_length));
    std::printf("  %-9s %7s %12s\n", "type", "tensors", "bytes");
    for (const GgufFacts::TypeCount& t : gguf->types)
      std::printf("  %-9s %7lld %12lld (%s)\n", t.name.c_str(), static_cast<long long>(t.tensors),
                  static_cast<long long>(t.bytes), MiB(t.bytes).c_str());
  }
  if (converted)
    std::printf("stored       attn %s, mlp %s, lm_head %s (converted: wormchat convert)\n",
                WeightFormatName(*converted->attn), WeightFormatName(*converted->mlp),
                WeightFormatName(*converted->lm_head));
  // Held matrices per group: one column for one process, one per rank with --tensor-parallel.
  std::printf("held         --weights %s: %s (bfp: 32x32 tiles of 1088 / 576 bytes)\n",
              spec.ToString().c_str(), MiB(whole_held).c_str());
  std::printf("  %-9s %-6s %12s", "group", "format", "1 process");
  for (size_t r = 0; r < ranks.size(); ++r) std::printf(" %12s", Cat("rank ", r).c_str());
  std::printf("\n");
  const char* names[4] = {"attn", "mlp", "lm_head", "vectors"};
  for (int g = 0; g < 4; ++g) {
    auto pick = [g](const WeightGroupBytes& b) {
      return g == 0 ? b.attn : g == 1 ? b.mlp : g == 2 ? b.lm_head : b.vectors;
    };
    std::printf("  %-9s %-6s %12s", names[g], g < 3 ? WeightFormatName(formats[g]) : "f32",
                MiB(pick(whole_groups)).c_str());
    for (const RankBytes& r : ranks) std::printf(" %12s", MiB(pick(r.weights)).c_str());
    std::printf("\n");
  }
  std::printf("KV cache     %s, %lld bytes per token (K+V, all layers)\n", KVDTypeName(kv_dtype),
              static_cast<long long>(per_token));
  std::printf("  per layer  K %s + V %s = %s for %d users x %d positions\n", MiB(layer_k).c_str(),
              MiB(layer_k).c_str(), MiB(2 * layer_k).c_str(), o.users, shape.max_seq);
  std::printf("  total      %s for all %d layers\n", MiB(total).c_str(), c.n_layers);
  if (ranks.empty()) return;
  std::printf(
      "tensor parallel over %d ranks (each holds 1/%d of the heads, MLP and LM head; the "
      "embeddings are read from the checkpoint's mapping):\n",
      o.tensor_parallel, o.tensor_parallel);
  std::printf("  1 process  weights %s held, KV cache %s\n", MiB(whole_held).c_str(),
              MiB(total).c_str());
  for (size_t r = 0; r < ranks.size(); ++r)
    std::printf("  rank %-5zu weights %s held, KV cache %s\n", r,
                MiB(ranks[r].weights.total()).c_str(), MiB(ranks[r].kv).c_str());
}

}  // namespace

void RegisterInfo(CLI::App& app) {
  auto o = std::make_shared<InfoCmdOptions>();
  CLI::App* cmd = app.add_subcommand("info", "Parameters, weight bytes and KV-cache bytes");
  auto* model = cmd->add_option("--model", o->model_dir,
                                "Model directory or GGUF file [default: assets model]")
                    ->transform(ModelPathTransform());
  auto* preset = cmd->add_option("--preset", o->preset, PresetHelp());
  model->excludes(preset);
  cmd->add_option("MODEL", o->model_arg, "The model, as --model gives it")
      ->transform(ModelPathTransform());
  cmd->add_option("--users", o->users, "Concurrent user rows")->capture_default_str();
  cmd->add_option("--ctx", o->ctx, "Positions per user (0 = max_position_embeddings)");
  cmd->add_option("--kv-dtype", o->kv_dtype,
                  "KV cache format: bf16, f32, int8, fp8-e4m3, fp8-e5m2, bfp8")
      ->capture_default_str();
  cmd->add_option("--kv-scale", o->kv_scale, "int8/fp8 scales: token-head or tensor")
      ->capture_default_str();
  cmd->add_option("--tensor-parallel", o->tensor_parallel,
                  "Also print what each of R tensor-parallel ranks would hold")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--lm-head-fractures", o->lm_head_fractures,
                  "LM-head fractures (shared out among the tensor-parallel ranks)")
      ->capture_default_str();
  cmd->add_option("--weights", o->weights, kWeightsHelp)->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON");
  int threads = 0;
  cmd->add_option("--threads", threads, "Host threads (unused here)")
      ->check(CLI::Range(0, kMaxThreads));
  cmd->callback([o] { RunInfo(*o); });
}

}  // namespace wc
