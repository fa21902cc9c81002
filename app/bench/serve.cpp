// `wormchat bench serve`: the serving loop under synthetic load. Two phases on one loop:
//   decode   R requests at once (R = 1, 8, 32 by default), each generating --gen-len tokens with
//            EOS ignored; aggregate decode tokens/s over the steps in which all R rows decode
//            (after the last one's first token, until the first one ends).
//   load     --requests requests of --prompt-len random tokens and --gen-len new tokens, all at
//            once or arriving at --rate per second (exponential gaps, seeded): time to first
//            token and inter-token latency percentiles, the loop's own share of step time (time
//            outside FalconModel::Forward), peak KV blocks, peak RSS against weights + KV pool.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/bench/bounds.h"
#include "app/bench/requests.h"
#include "app/bench/serve.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "serving/serving_loop.h"
#include "serving/waiting_observer.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/rng.h"

namespace wc {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchServeOptions {
  ModelRunOptions run = ServingRunDefaults();
  int user_rows = 32;
  int max_batch_tokens = 256;
  int requests = 64;
  int prompt_len = 64;
  int gen_len = 32;
  double rate = 0;  // requests per second; 0 = all at once
  std::vector<int> decode_rows = {1, 8, 32};
  uint64_t seed = 0;
  std::string json;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * (v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

void RunBenchServe(const BenchServeOptions& o) {
  if (o.requests < 1) throw Error(Cat("--requests must be >= 1, got ", o.requests));
  if (o.prompt_len < 1) throw Error(Cat("--prompt-len must be >= 1, got ", o.prompt_len));
  if (o.gen_len < 2) throw Error(Cat("--gen-len must be >= 2, got ", o.gen_len));
  if (!(o.rate >= 0) || !std::isfinite(o.rate))
    throw Error(Cat("--rate must be >= 0 requests/s (0 = all at once), got ", o.rate));
  for (int r : o.decode_rows)
    if (r < 1 || r > o.user_rows)
      throw Error(Cat("--decode-rows ", r, " must be in [1, --user-rows ", o.user_rows, "]"));
  LoadedModel m = LoadModel(o.run, /*need_tokenizer=*/false);
  const FalconConfig& c = m.model->config();
  if (o.prompt_len + o.gen_len > m.ctx)
    throw Error(Cat("--prompt-len + --gen-len = ", o.prompt_len + o.gen_len,
                    " exceeds the context of ", m.ctx, "; raise --ctx"));
  const ServingOptions so = ServingOptionsFor(o.run, m, o.user_rows, o.max_batch_tokens);
  ServingLoop loop(*m.model, nullptr, std::nullopt, so);
  const int64_t kv_bytes = loop.kv_bytes();
  const int64_t weight_bytes = m.model->weights().checkpoint->total_bytes();
  std::printf(
      "bench serve: %s (%d layers, hidden %d, vocab %d), %d user rows, %d max batch "
      "tokens, KV %s %s, %d threads\n",
      m.dir.c_str(), c.n_layers, c.hidden_size, c.vocab_size, o.user_rows, o.max_batch_tokens,
      KVDTypeName(so.kv.dtype),
      so.kv.block_size > 0 ? Cat("paged ", so.kv.block_size).c_str() : "contiguous",
      o.run.threads > 0 ? o.run.threads : static_cast<int>(std::thread::hardware_concurrency()));
  std::fflush(stdout);

  nlohmann::json out;
  out["model"] = m.dir;
  out["user_rows"] = o.user_rows;
  out["max_batch_tokens"] = o.max_batch_tokens;
  // Warm-up (page faults of the weights and KV pool, OpenMP's thread pool), not measured.
  DecodeRate(loop, std::min(o.user_rows, 4), 4, c.vocab_size, o.seed + 7);
  // Phase 1: decode throughput by active rows.
  double rate1 = 0;
  for (int rows : o.decode_rows) {
    const double rate = DecodeRate(loop, rows, o.gen_len, c.vocab_size, o.seed + 1000 * rows);
    if (rows == 1) rate1 = rate;
    std::printf("decode  %2d rows: %9.1f tokens/s aggregate (%.1f per row)", rows, rate,
                rate / rows);
    if (rows != 1 && rate1 > 0) std::printf(", %.2fx 1 row", rate / rate1);
    std::printf("\n");
    std::fflush(stdout);
    out["decode_tokens_per_s"][std::to_string(rows)] = rate;
  }

  // Phase 2: the load.
  const ServingStatus before = loop.status();
  Rng rng(o.seed);
  const Clock::time_point t0 = Clock::now();
  std::vector<std::shared_ptr<TimingObserver>> obs;
  std::vector<double> submit_times;
  double next_arrival = 0;
  for (int i = 0; i < o.requests; ++i) {
    if (o.rate > 0) {
      const double now = std::chrono::duration<double>(Clock::now() - t0).count();
      if (next_arrival > now)
        std::this_thread::sleep_for(std::chrono::duration<double>(next_arrival - now));
      next_arrival += -std::log(1.0 - rng.Uniform()) / o.rate;
    }
    obs.push_back(std::make_shared<TimingObserver>(t0));
    submit_times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    loop.Submit(BenchRequest(RandomPrompt(rng, o.prompt_len, c.vocab_size), o.gen_len, o.seed + i,
                             obs.back()));
  }
  WaitAll(obs);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const ServingStatus after = loop.status();
  std::vector<double> ttft, itl;
  int64_t generated = 0;
  for (size_t i = 0; i < obs.size(); ++i) {
    const auto& t = obs[i]->times();
    generated += static_cast<int64_t>(t.size());
    ttft.push_back(t.front() - submit_times[i]);
    for (size_t k = 1; k < t.size(); ++k) itl.push_back(t[k] - t[k - 1]);
  }
  const double step_s = after.step_s - before.step_s,
               forward_s = after.forward_s - before.forward_s;
  const double overhead = step_s > 0 ? (step_s - forward_s) / step_s : 0;
  const int64_t rss = PeakRssBytes();
  std::printf(
      "load    %d requests x (%d prompt + %d new tokens), %s: %.1f s, %.1f tokens/s "
      "generated\n",
      o.requests, o.prompt_len, o.gen_len,
      o.rate > 0 ? Cat(o.rate, " req/s").c_str() : "all at once", wall, generated / wall);
  std::printf("  time to first token  p50 %8.1f ms   p95 %8.1f ms\n", 1e3 * Percentile(ttft, 0.5),
              1e3 * Percentile(ttft, 0.95));
  std::printf("  inter-token latency  p50 %8.1f ms   p95 %8.1f ms\n", 1e3 * Percentile(itl, 0.5),
              1e3 * Percentile(itl, 0.95));
  std::printf("  loop overhead        %.2f%% of step time (%.3f of %.3f s outside Forward)\n",
              100 * overhead, step_s - forward_s, step_s);
  std::printf("  KV blocks            peak %d of %d\n", after.kv_blocks_peak,
              after.kv_blocks_total);
  std::printf(
      "  prefix cache         %s: %lld hits, %lld cached prompt tokens, %lld prefilled, "
      "%lld evictions, %d blocks held\n",
      so.prefix_cache && so.kv.block_size > 0 ? "on" : "off",
      static_cast<long long>(after.prefix_hits - before.prefix_hits),
      static_cast<long long>(after.prefix_cached_tokens - before.prefix_cached_tokens),
      static_cast<long long>(after.tokens_prefilled - before.tokens_prefilled),
      static_cast<long long>(after.prefix_evictions - before.prefix_evictions),
      after.prefix_blocks);
  std::printf("  peak RSS             %.1f MiB = weights %.1f + KV pool %.1f + %.1f MiB\n",
              rss / 1048576.0, weight_bytes / 1048576.0, kv_bytes / 1048576.0,
              (rss - weight_bytes - kv_bytes) / 1048576.0);
  out["load"] = {
      {"requests", o.requests},
      {"prompt_len", o.prompt_len},
      {"gen_len", o.gen_len},
      {"rate", o.rate},
      {"wall_s", wall},
      {"generated_tokens_per_s", generated / wall},
      {"ttft_ms", {{"p50", 1e3 * Percentile(ttft, 0.5)}, {"p95", 1e3 * Percentile(ttft, 0.95)}}},
      {"itl_ms", {{"p50", 1e3 * Percentile(itl, 0.5)}, {"p95", 1e3 * Percentile(itl, 0.95)}}},
      {"loop_overhead", overhead},
      {"kv_blocks_peak", after.kv_blocks_peak},
      {"kv_blocks_total", after.kv_blocks_total},
      {"prefix_cache",
       {{"hits", after.prefix_hits - before.prefix_hits},
        {"cached_tokens", after.prefix_cached_tokens - before.prefix_cached_tokens},
        {"prefilled_tokens", after.tokens_prefilled - before.tokens_prefilled},
        {"evictions", after.prefix_evictions - before.prefix_evictions},
        {"blocks", after.prefix_blocks}}}};
  out["memory"] = {{"peak_rss_bytes", rss},
                   {"weight_bytes", weight_bytes},
                   {"kv_pool_bytes", kv_bytes},
                   {"other_bytes", rss - weight_bytes - kv_bytes}};
  loop.Shutdown(ShutdownMode::kDrain);
  if (!o.json.empty()) WriteJsonOutput(o.json, out.dump(2));
}

}  // namespace

void RegisterBenchServe(CLI::App* bench) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "serve",
      "The serving loop under synthetic load: decode tokens/s by active rows, latency, "
      "overhead, memory");
  AddModelRunOptions(cmd, o->run);
  AddKVBlocksOption(cmd, o->run);
  cmd->add_option("--user-rows", o->user_rows, "User rows of the loop")->capture_default_str();
  cmd->add_option("--max-batch-tokens", o->max_batch_tokens, "Tokens per forward call")
      ->capture_default_str();
  cmd->add_option("--requests", o->requests, "Requests in the load phase (1-100000)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--prompt-len", o->prompt_len, "Prompt tokens per request (random ids)")
      ->capture_default_str();
  cmd->add_option("--gen-len", o->gen_len, "New tokens per request (EOS ignored)")
      ->capture_default_str();
  cmd->add_option("--rate", o->rate, "Arrivals per second in the load phase (0 = all at once)")
      ->capture_default_str();
  cmd->add_option("--decode-rows", o->decode_rows,
                  "Active-row counts to measure aggregate decode speed at (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the prompts, arrivals and sampling")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the figures to this JSON file");
  cmd->callback([o] { RunBenchServe(*o); });
}

}  // namespace wc
