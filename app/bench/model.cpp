// `wormchat bench model`: the model's speed on this machine against the machine's own bounds,
// measured in the same run (issue 16). Through the serving loop, as every front end runs it:
//   prefill   one prompt of --prompt-len random ids in one forward pass (llama-bench -p);
//   decode    one row generating --gen-len tokens (llama-bench -n);
//   batched   R rows decoding together (--decode-rows), aggregate tokens/s;
//   speculation  with --speculate: one row's greedy decode with and without speculative decoding
//             (app/bench/speculation.h).
// Bounds: the read bandwidth decode's own stream gets (DecodeReadProbe, app/bench/bounds.h: the
// packed weights read in the decode's order and pattern on its threads, the best of passes run
// before and after each decode run, since this machine's bus moves between ~34 and ~62 GB/s within
// minutes) and the f32 FMA / bf16 dot-product peak (kernels/peak.h). Decode reads every weight once
// per step (the embedding table only one row) plus the KV rows so far: bound = R tokens per (bytes
// / bandwidth). Prefill and batched decode do 2 FLOPs per weight per token (and attention's 4 *
// head_dim per query head per position; a prefill's LM head runs for its last token only): bound =
// tokens per (FLOPs / FMA peak), and batched decode takes the lower of its two bounds. Each figure
// is the median of --repeats runs. A figure above its bound is flagged in the output and the JSON
// (exceeds_bound), never printed as a bare >100%.
#include "app/bench/model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/bench/bounds.h"
#include "app/bench/requests.h"
#include "app/bench/speculation.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_profile.h"
#include "kernels/matmul.h"
#include "kernels/peak.h"
#include "serving/serving_loop.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/openmp_thread.h"
#include "util/rng.h"

namespace wc {
namespace {

struct BenchModelOptions {
  ModelRunOptions run = ServingRunDefaults();
  int prompt_len = 512;
  int gen_len = 128;
  std::vector<int> decode_rows = {1, 8, 32};
  int repeats = 3;
  uint64_t seed = 0;
  std::string json;
  BenchSpeculationOptions speculation;
};

// The measured peak of a kernel's instructions on this machine, and their name.
struct ComputeBound {
  double peak;
  const char* name;
};
ComputeBound BoundOf(GemmPeak p, const PeakFlops& peak) {
  switch (p) {
    case GemmPeak::kAmxBf16:
      return {peak.amx_bf16, "AMX bf16"};
    case GemmPeak::kInt8Dot:
      return {peak.int8_avx2, "int8 AVX2"};
    case GemmPeak::kBf16Dot:
      return {peak.bf16_dot, "bf16 dot"};
    case GemmPeak::kInt8Vnni:
      return {peak.int8_vnni, "int8 VNNI"};
    case GemmPeak::kInt16Dot:
      return {peak.int16_avx2, "int16 AVX2"};
    default:
      return {peak.f32_fma, "f32 FMA"};
  }
}

// Prints each GEMM's time a pass, its rate and that rate's share of the peak of the instructions
// its kernel runs, then the pass's time outside the GEMMs (attention, norms, the serving loop);
// returns the same as JSON. `entries` were recorded over `passes` passes taking `seconds` in all.
nlohmann::json PrintGemmProfile(const std::vector<GemmProfileEntry>& entries, double seconds,
                                int passes, const PeakFlops& peak) {
  nlohmann::json out = nlohmann::json::array();
  size_t width = 6;
  for (const GemmProfileEntry& e : entries) width = std::max(width, e.matrix.size());
  std::printf("  %-*s %8s %9s %9s  %-18s kernel\n", static_cast<int>(width), "matrix", "ms/pass",
              "GFLOP/s", "of peak", "peak");
  double gemm_seconds = 0;
  for (const GemmProfileEntry& e : entries) {
    const ComputeBound b = BoundOf(e.peak, peak);
    const double rate = e.seconds > 0 ? e.flops / e.seconds : 0;
    gemm_seconds += e.seconds;
    std::printf("  %-*s %8.1f %9.1f %8.0f%%  %-18s %s\n", static_cast<int>(width), e.matrix.c_str(),
                1e3 * e.seconds / passes, rate / 1e9, b.peak > 0 ? 100 * rate / b.peak : 0.0,
                Cat(b.name, " ", b.peak / 1e9).substr(0, 18).c_str(), e.kernel.c_str());
    out.push_back({{"matrix", e.matrix},
                   {"kernel", e.kernel},
                   {"peak", b.name},
                   {"peak_gflops", b.peak / 1e9},
                   {"calls_per_pass", static_cast<double>(e.calls) / passes},
                   {"ms_per_pass", 1e3 * e.seconds / passes},
                   {"gflops", rate / 1e9},
                   {"fraction_of_peak", b.peak > 0 ? rate / b.peak : 0.0}});
  }
  std::printf("  %-*s %8.1f %9s %8.0f%%  of the pass\n", static_cast<int>(width), "GEMMs",
              1e3 * gemm_seconds / passes, "", seconds > 0 ? 100 * gemm_seconds / seconds : 0.0);
  std::printf("  %-*s %8.1f %9s %8.0f%%  of the pass (attention, norms, the loop)\n",
              static_cast<int>(width), "other", 1e3 * (seconds - gemm_seconds) / passes, "",
              seconds > 0 ? 100 * (seconds - gemm_seconds) / seconds : 0.0);
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One request of `prompt` random tokens generating `gen` (EOS ignored); its result.
RequestResult RunOne(ServingLoop& loop, int prompt, int gen, int vocab, Rng& rng) {
  auto obs = std::make_shared<TimingObserver>(BenchClock::now());
  loop.Submit(BenchRequest(RandomPrompt(rng, prompt, vocab), gen, rng.Next(), obs));
  WaitAll({obs});
  return obs->Wait();
}

struct ModelShape {
  double matmul_params = 0;       // weights a token multiplies through, LM head included
  double lm_head_params = 0;      // of which the LM head's
  double weight_bytes_step = 0;   // bytes a decode step reads: every packed matrix as held
  double kv_bytes_per_pos = 0;    // K and V bytes per position, every layer
  double attn_flops_per_pos = 0;  // per query token per attended position, every layer
};

ModelShape ShapeOf(const LoadedModel& m) {
  const ModelConfig& c = m.model->config();
  const ModelWeights& w = m.model->weights();
  ModelShape s;
  double bytes = 0;
  // The packed matrices as held and streamed (a bfp matrix's tiles: 8.5 / 4.5 bits a weight).
  for (const LayerWeights& l : w.layers) {
    for (const Linear* lin : l.Linears()) {
      const PackedMatrix* p = &lin->p;
      s.matmul_params += static_cast<double>(p->rows()) * p->cols();
      bytes += static_cast<double>(p->bytes());
    }
  }
  s.lm_head_params = static_cast<double>(w.lm_head_p.rows()) * w.lm_head_p.cols();
  s.matmul_params += s.lm_head_params;
  bytes += static_cast<double>(w.lm_head_p.bytes());
  s.weight_bytes_step = bytes;
  s.kv_bytes_per_pos =
      static_cast<double>(KVBytesPerToken(m.model->CacheShape(1, m.ctx), m.kv.dtype, m.kv.scale));
  s.attn_flops_per_pos = 4.0 * c.n_layers * c.n_head * c.head_dim();
  return s;
}

struct WeightsMemory {
  int64_t weights = 0;   // held packed weights and vectors (ModelWeights::HeldBytes)
  int64_t kv_pool = 0;   // the KV pool reserved (its pages resident as rows fill)
  int64_t rss = 0;       // resident now
  int64_t peak_rss = 0;  // peak so far
};

WeightsMemory MemoryOf(const LoadedModel& m, const ServingLoop& loop) {
  return {m.model->weights().HeldBytes(), loop.kv_bytes(), RssBytes(), PeakRssBytes()};
}

// "<what> peak RSS X MiB = weights W + KV pool K + E MiB (RSS now R)", or "within" when the
// pool's untouched pages keep the peak under weights + pool.
void PrintMemory(const char* what, const WeightsMemory& s) {
  constexpr double kMiB = 1048576.0;
  const double over = static_cast<double>(s.peak_rss - s.weights - s.kv_pool);
  if (over >= 0) {
    std::printf("%s peak RSS %.1f MiB = weights %.1f + KV pool %.1f + %.1f MiB (RSS now %.1f)\n",
                what, s.peak_rss / kMiB, s.weights / kMiB, s.kv_pool / kMiB, over / kMiB,
                s.rss / kMiB);
  } else {
    std::printf(
        "%s peak RSS %.1f MiB, within weights %.1f + KV pool %.1f MiB (the pool's untouched pages "
        "are not resident; RSS now %.1f)\n",
        what, s.peak_rss / kMiB, s.weights / kMiB, s.kv_pool / kMiB, s.rss / kMiB);
  }
}

void RunBenchModel(const BenchModelOptions& o) {
  if (o.prompt_len < 1) throw Error(Cat("--prompt-len must be >= 1, got ", o.prompt_len));
  if (o.gen_len < 2) throw Error(Cat("--gen-len must be >= 2, got ", o.gen_len));
  if (o.repeats < 1) throw Error(Cat("--repeats must be >= 1, got ", o.repeats));
  int max_rows = 1;
  for (int r : o.decode_rows) {
    if (r < 1 || r > 256) throw Error(Cat("--decode-rows ", r, " must be in [1, 256]"));
    max_rows = std::max(max_rows, r);
  }
  // The compute peaks, on the threads the run uses; the read bound is measured on the loaded
  // weights themselves (no buffer of its own, so nothing adds to the peak RSS reported below).
  ApplyThreads(o.run.threads);
  // The peak, the probe and its passes run their parallel regions on threads of their own, so the
  // serving loop's workers spin at barriers as they do outside a benchmark (util/openmp_thread.h).
  PeakFlops peak;
  const bool int16 = ParseMatmulPrecision(o.run.matmul_precision) == ActivationPrecision::kInt16;
  RunInOwnOpenMPPool([&] { peak = MeasurePeakFlops(0.1, int16); });
  LoadedModel m = LoadModel(o.run, /*need_tokenizer=*/o.speculation.NeedsTokenizer());
  if (o.speculation.print_workload) {
    std::printf("%s", ExtractPromptText(m).c_str());
    return;
  }
  const ModelConfig& c = m.model->config();
  if (o.prompt_len + 1 > m.ctx || 8 + o.gen_len > m.ctx)
    throw Error(Cat("--prompt-len ", o.prompt_len, " and --gen-len ", o.gen_len,
                    " must fit the context of ", m.ctx, "; raise --ctx"));
  // One prefill pass takes the whole prompt (llama-bench's ubatch is 512).
  ServingLoop loop(*m.model, nullptr, std::nullopt,
                   ServingOptionsFor(o.run, m, max_rows, std::max(o.prompt_len, max_rows)));
  const ModelShape shape = ShapeOf(m);
  const int threads = BenchThreads(o.run.threads);
  const PackedMatrix& qkv = m.model->weights().layers[0].Linears()[0]->p;
  const char* kernel = GemmKernelName(qkv);
  std::printf(
      "bench model: %s (%d layers, hidden %d, vocab %d, %s weights, --weights %s), KV %s, %d "
      "threads, %s, matmul %s\n",
      m.dir.c_str(), c.n_layers, c.hidden_size, c.vocab_size,
      m.model->weights().packed_formats().c_str(), m.model->options().weights.ToString().c_str(),
      KVDTypeName(m.kv.dtype), threads, SimdTargetName(), kernel);
  // The compute bound of the instructions a call of n tokens runs on (the format table's kernel:
  // AMX, BF16 dot products, the integer products of GGML's blocks, else f32 FMAs).
  const auto compute_for = [&](int64_t n_tokens) {
    return BoundOf(GemmPeakOf(qkv, n_tokens), peak);
  };
  const auto rate = [](double r, const char* unit) {
    return r > 0 ? Cat(r / 1e9, " ", unit) : std::string("none");
  };
  std::printf(
      "machine: f32 FMA %.1f GFLOP/s, bf16 dot %s, AMX bf16 %s, int8 AVX2 %s, int8 VNNI %s%s\n",
      peak.f32_fma / 1e9, rate(peak.bf16_dot, "GFLOP/s").c_str(),
      rate(peak.amx_bf16, "GFLOP/s").c_str(), rate(peak.int8_avx2, "GOP/s").c_str(),
      rate(peak.int8_vnni, "GOP/s").c_str(),
      int16 ? Cat(", int16 AVX2 ", rate(peak.int16_avx2, "GOP/s")).c_str() : "");
  const WeightsMemory mem = MemoryOf(m, loop);
  PrintMemory("memory after load:", mem);
  std::fflush(stdout);

  Rng rng(o.seed);
  DecodeRate(loop, std::min(max_rows, 4), 4, c.vocab_size, rng.Next());  // warm-up: page faults
  std::optional<DecodeReadProbe> made;
  RunInOwnOpenMPPool([&] { made.emplace(DecodeWeightStreams(m.model->weights()), threads); });
  DecodeReadProbe& probe = *made;
  const auto pass = [&probe] { RunInOwnOpenMPPool([&probe] { probe.Pass(); }); };
  for (int i = 0; i < 3; ++i) pass();
  nlohmann::json out = {{"model", m.dir},
                        {"threads", threads},
                        {"simd", SimdTargetName()},
                        {"matmul_kernel", kernel},
                        {"weights_dtype", DTypeName(m.model->weights().matrix_dtype())},
                        {"weights_formats", m.model->weights().packed_formats()},
                        {"weights", m.model->options().weights.ToString()},
                        {"weight_bytes_step", shape.weight_bytes_step},
                        {"kv_dtype", KVDTypeName(m.kv.dtype)},
                        {"f32_fma_gflops", peak.f32_fma / 1e9},
                        {"bf16_dot_gflops", peak.bf16_dot / 1e9},
                        {"amx_bf16_gflops", peak.amx_bf16 / 1e9},
                        {"int8_avx2_gops", peak.int8_avx2 / 1e9},
                        {"int8_vnni_gops", peak.int8_vnni / 1e9},
                        {"int16_avx2_gops", peak.int16_avx2 / 1e9}};

  // Prefill, each GEMM call timed (kernels/gemm/gemm_profile.h).
  std::vector<double> prefill;
  std::vector<GemmProfileEntry> prefill_gemms;
  double prefill_seconds = 0;
  {
    const GemmProfile profile;
    for (int i = 0; i < o.repeats; ++i) {
      const RequestResult r = RunOne(loop, o.prompt_len, 1, c.vocab_size, rng);
      prefill.push_back(o.prompt_len / (r.t_first_token - r.t_admit));
      prefill_seconds += r.t_first_token - r.t_admit;
    }
    prefill_gemms = profile.Entries();
  }
  // Per prompt token: the layers' weights and attention over the positions before it; the LM head
  // runs for the last token only.
  const double prefill_flops = 2.0 * (shape.matmul_params - shape.lm_head_params) +
                               shape.attn_flops_per_pos * (o.prompt_len + 1) / 2.0 +
                               2.0 * shape.lm_head_params / o.prompt_len;
  const ComputeBound prefill_compute = compute_for(o.prompt_len);
  const double prefill_bound = prefill_compute.peak / prefill_flops;
  const double prefill_rate = Median(prefill);
  std::printf("prefill %4d tokens: %9.1f tokens/s  (%.0f%% of the %s bound %.1f)\n", o.prompt_len,
              prefill_rate, 100 * prefill_rate / prefill_bound, prefill_compute.name,
              prefill_bound);
  out["prefill"] = {{"tokens", o.prompt_len},
                    {"tokens_per_s", prefill_rate},
                    {"bound_tokens_per_s", prefill_bound},
                    {"fraction_of_bound", prefill_rate / prefill_bound},
                    {"gemms", PrintGemmProfile(prefill_gemms, prefill_seconds, o.repeats, peak)}};

  // Decode, one row and batched: a probe pass before and after each run, so the bound is the best
  // rate the bus gave the weights' stream over the whole measurement.
  std::vector<std::vector<double>> rates(o.decode_rows.size());
  for (size_t d = 0; d < o.decode_rows.size(); ++d) {
    for (int i = 0; i < o.repeats; ++i) {
      pass();
      rates[d].push_back(DecodeRate(loop, o.decode_rows[d], o.gen_len, c.vocab_size, rng.Next()));
      pass();
    }
  }
  const double read_gbps = probe.best() / 1e9;
  std::printf("read bound %.1f GB/s: %s\n", read_gbps, probe.Describe().c_str());
  out["read_gbps"] = read_gbps;
  out["read_probe"] = {{"bytes", probe.bytes()},
                       {"passes", probe.passes()},
                       {"threads", probe.threads()},
                       {"transparent_huge_pages", TransparentHugePages()},
                       {"anon_huge_page_bytes", AnonHugePageBytes()},
                       {"description", probe.Describe()}};
  double rate1 = 0;
  int exceeded = 0;
  for (size_t d = 0; d < o.decode_rows.size(); ++d) {
    const int rows = o.decode_rows[d];
    const double rate = Median(rates[d]);
    const double fastest = *std::max_element(rates[d].begin(), rates[d].end());
    if (rows == 1) rate1 = rate;
    const double avg_pos = 8 + o.gen_len / 2.0;
    const double step_bytes = shape.weight_bytes_step + rows * avg_pos * shape.kv_bytes_per_pos;
    const double bw_bound = rows * read_gbps * 1e9 / step_bytes;
    const ComputeBound compute = compute_for(rows);
    const double fma_bound =
        compute.peak / (2.0 * shape.matmul_params + shape.attn_flops_per_pos * avg_pos);
    const double bound = std::min(bw_bound, fma_bound);
    // Any run, not only the median, above the bound means the bound was not one in this run.
    const bool exceeds = fastest > bound;
    exceeded += exceeds ? 1 : 0;
    std::printf("decode  %2d row%s:   %9.1f tokens/s  (%.0f%% of the %s bound %.1f)", rows,
                rows == 1 ? " " : "s", rate, 100 * rate / bound,
                bw_bound <= fma_bound ? "bandwidth" : compute.name, bound);
    if (rows != 1 && rate1 > 0) std::printf(", %.2fx 1 row", rate / rate1);
    if (exceeds)
      std::printf("  EXCEEDS ITS BOUND: a run reached %.1f tokens/s (%.0f%%)", fastest,
                  100 * fastest / bound);
    std::printf("\n");
    out["decode"].push_back({{"rows", rows},
                             {"tokens_per_s", rate},
                             {"fastest_tokens_per_s", fastest},
                             {"bandwidth_bound_tokens_per_s", bw_bound},
                             {"fma_bound_tokens_per_s", fma_bound},
                             {"fraction_of_bound", rate / bound},
                             {"exceeds_bound", exceeds}});
  }
  if (exceeded > 0)
    std::printf(
        "warning: %d decode figure%s above %s bound: the machine read faster during a run than in "
        "any probe pass, so those fractions are not against a true bound\n",
        exceeded, exceeded == 1 ? " is" : "s are", exceeded == 1 ? "its" : "their");
  out["bound_exceeded"] = exceeded > 0;
  if (o.speculation.on())
    RunBenchSpeculation(o.speculation, o.run, m, loop, max_rows, o.prompt_len, o.gen_len, o.repeats,
                        rng, &out);
  PrintMemory("memory:", MemoryOf(m, loop));
  out["memory"] = {{"peak_rss_bytes", PeakRssBytes()},
                   {"rss_after_load_bytes", mem.rss},
                   {"peak_rss_after_load_bytes", mem.peak_rss},
                   {"weight_bytes", mem.weights},
                   {"kv_pool_bytes", mem.kv_pool}};
  loop.Shutdown(ShutdownMode::kDrain);
  if (!o.json.empty()) WriteJsonOutput(o.json, out.dump(2));
}

}  // namespace

void RegisterBenchModel(CLI::App* bench) {
  auto o = std::make_shared<BenchModelOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "model",
      "Prefill, decode and batched decode tokens/s against this machine's bandwidth and FMA "
      "bounds, measured in the same run");
  AddModelRunOptions(cmd, o->run);
  cmd->add_option("--prompt-len", o->prompt_len, "Prefill: prompt tokens, in one pass (1-65536)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--gen-len", o->gen_len, "Decode: new tokens per row (2-65536)")
      ->check(CLI::Range(2, 65536))
      ->capture_default_str();
  cmd->add_option("--decode-rows", o->decode_rows,
                  "Rows decoding together, each measured (comma-separated, 1-256)")
      ->delimiter(',')
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "Runs of each measurement; the median counts (1-100)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random prompts")->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the figures to this JSON file");
  AddBenchSpeculationOptions(cmd, o->speculation);
  cmd->callback([o, cmd] {
    CheckBenchSpeculation(*cmd, o->speculation);
    RunBenchModel(*o);
  });
}

}  // namespace wc
