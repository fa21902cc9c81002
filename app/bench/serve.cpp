// `wormchat bench serve`: the serving loop under synthetic load. Two phases on one loop:
//   decode   R requests at once (R = 1, 8, 32 by default), each generating --gen-len tokens with
//            EOS ignored; aggregate decode tokens/s over the steps in which all R rows decode
//            (after the last one's first token, until the first one ends).
//   load     --requests requests of --prompt-len random tokens and --gen-len new tokens, all at
//            once or arriving at --rate per second (exponential gaps, seeded): time to first
//            token and inter-token latency percentiles, the loop's own share of step time (time
//            outside DecoderModel::Forward), peak KV blocks, peak RSS against weights + KV pool;
//            with --speculate lookup|draft the load's requests speculate and the proposals
//            accepted are reported (compare a run with --speculate off).
// With --http URL no model is loaded: app/bench/http_load.h puts --clients concurrent streamed
// completions (default 16 x (256 prompt ids + 128 new tokens)) on a running OpenAI-compatible
// server (wormchat serve, llama-server) and prints aggregate tokens/s, TTFT and per-client rates.
// The prefix cache against itself (--shared-prefix N, or --compare-prefix-cache): no decode
// phase; the same load (same ids, arrivals and seeds) on a fresh loop with the cache on and on
// another with it off, --repeats times each, alternating which goes first: end-to-end time,
// prompt tokens prefilled and taken from the cache, and the speedup, all measured in this run.
// With --shared-prefix N every prompt is one random N-token prefix followed by its own
// --prompt-len random tokens, and the cache's prefilled tokens are checked against
// N + requests x (prompt_len + block size): the prefix once, then each request's own tokens and
// at most a block of the prefix's partial last block.
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
#include "app/bench/http_load.h"
#include "app/bench/requests.h"
#include "app/bench/serve.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "app/speculation.h"
#include "serving/serving_loop.h"
#include "serving/waiting_observer.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/rng.h"

namespace wc {
namespace {

using Clock = std::chrono::steady_clock;

// --prompt-len's default: 64 random tokens, or with --shared-prefix 32 of each request's own
// after the shared ones.
constexpr int kPromptLen = 64;
constexpr int kSharedPromptLen = 32;

struct BenchServeOptions {
  ModelRunOptions run = ServingRunDefaults();
  int user_rows = 32;
  int max_batch_tokens = 256;
  int requests = 64;
  int prompt_len = kPromptLen;
  int gen_len = 32;
  double rate = 0;  // requests per second; 0 = all at once
  std::vector<int> decode_rows = {1, 8, 32};
  uint64_t seed = 0;
  std::string json;
  int shared_prefix = 0;              // tokens every prompt starts with; 0 = distinct prompts
  bool compare_prefix_cache = false;  // the load with the cache on and off (implied by the above)
  int repeats = 1;                    // runs of each side of the comparison; the median counts
  // Which flags the command line gave (the comparison refuses some and changes one's default).
  bool prompt_len_given = false, decode_rows_given = false, prefix_cache_given = false,
       repeats_given = false;

  SpeculationOptions speculation;  // the load's requests speculate (--speculate lookup|draft)

  bool Compare() const { return shared_prefix > 0 || compare_prefix_cache; }
};

// The figures of one load phase, from the first submission to the last request's last token.
struct LoadRun {
  double wall_s = 0;
  int64_t generated = 0;          // tokens sampled for the load's requests
  std::vector<double> ttft, itl;  // seconds: per request, per pair of consecutive tokens
  int64_t spec_proposed = 0, spec_accepted = 0;  // speculative decoding, summed over requests
  ServingStatus before, after;                   // the loop's status around the load
  int64_t Delta(int64_t ServingStatus::*f) const { return after.*f - before.*f; }
};

// Puts --requests requests through `loop` and waits for them all. Request i's prompt is `prefix`
// followed by --prompt-len random ids in [3, vocab); it generates --gen-len tokens (EOS ignored)
// with seed --seed + i; all arrive at once, or at --rate with exponential gaps. The ids and gaps
// come from --seed alone, in the same order on every call: every call puts the same load.
LoadRun RunLoad(ServingLoop& loop, const BenchServeOptions& o, const std::vector<int>& prefix,
                int vocab) {
  LoadRun run;
  run.before = loop.status();
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
    std::vector<int> prompt = prefix;
    const std::vector<int> own = RandomPrompt(rng, o.prompt_len, vocab);
    prompt.insert(prompt.end(), own.begin(), own.end());
    obs.push_back(std::make_shared<TimingObserver>(t0));
    submit_times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    Request r = BenchRequest(std::move(prompt), o.gen_len, o.seed + i, obs.back());
    ApplySpeculation(o.speculation, &r);
    loop.Submit(std::move(r));
  }
  WaitAll(obs);
  run.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  run.after = loop.status();
  for (size_t i = 0; i < obs.size(); ++i) {
    const auto& t = obs[i]->times();
    run.generated += static_cast<int64_t>(t.size());
    run.ttft.push_back(t.front() - submit_times[i]);
    const RequestResult& result = obs[i]->Wait();
    run.spec_proposed += result.spec_proposed;
    run.spec_accepted += result.spec_accepted;
    for (size_t k = 1; k < t.size(); ++k) run.itl.push_back(t[k] - t[k - 1]);
  }
  return run;
}

// Warm-up, not measured: page faults of the weights and the loop's KV pool, OpenMP's thread pool.
// Up to 4 requests of 8 random tokens generating 4 each, at once. Throws wc::Error if one fails
// (the loop's message: e.g. a pool too small for any request).
void WarmUp(ServingLoop& loop, int vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::shared_ptr<TimingObserver>> obs;
  for (int i = 0; i < std::min(loop.user_rows(), 4); ++i) {
    obs.push_back(std::make_shared<TimingObserver>(BenchClock::now()));
    loop.Submit(BenchRequest(RandomPrompt(rng, 8, vocab), 4, seed + i, obs.back()));
  }
  WaitAll(obs);
}

nlohmann::json PercentilesMs(const std::vector<double>& v) {
  return {{"p50", 1e3 * Percentile(v, 0.5)}, {"p95", 1e3 * Percentile(v, 0.95)}};
}

std::string Arrivals(const BenchServeOptions& o) {
  return o.rate > 0 ? Cat(o.rate, " req/s") : std::string("all at once");
}

// The flags' own checks, before the model loads. Throws wc::Error naming the flag.
void CheckOptions(const BenchServeOptions& o) {
  if (o.requests < 1) throw Error(Cat("--requests must be >= 1, got ", o.requests));
  if (o.prompt_len < 1) throw Error(Cat("--prompt-len must be >= 1, got ", o.prompt_len));
  if (o.gen_len < 2) throw Error(Cat("--gen-len must be >= 2, got ", o.gen_len));
  if (!(o.rate >= 0) || !std::isfinite(o.rate))
    throw Error(Cat("--rate must be >= 0 requests/s (0 = all at once), got ", o.rate));
  if (o.shared_prefix < 0)
    throw Error(Cat("--shared-prefix must be >= 0 tokens (0 = every prompt distinct), got ",
                    o.shared_prefix));
  if (o.repeats < 1) throw Error(Cat("--repeats must be >= 1, got ", o.repeats));
  const std::string mode =
      o.shared_prefix > 0 ? Cat("--shared-prefix ", o.shared_prefix) : "--compare-prefix-cache";
  if (o.Compare()) {
    if (o.prefix_cache_given)
      throw Error(Cat("--prefix-cache ", o.run.prefix_cache, ": ", mode,
                      " runs the load with the prefix cache on and again with it off; drop "
                      "--prefix-cache"));
    if (o.decode_rows_given) {
      std::string rows;
      for (int r : o.decode_rows) rows += Cat(rows.empty() ? "" : ",", r);
      throw Error(Cat("--decode-rows ", rows, ": ", mode,
                      " runs no decode phase (only the load, cache on and off); drop "
                      "--decode-rows"));
    }
    if (!o.run.prefix_cache_dir.empty())
      throw Error(Cat("--prefix-cache-dir ", o.run.prefix_cache_dir, ": ", mode,
                      " compares the in-memory prefix cache, empty at the start of every run; "
                      "drop --prefix-cache-dir"));
    if (o.run.kv_block_size == 0)
      throw Error(Cat("--kv-block-size 0 is contiguous KV, which has no prefix cache; ", mode,
                      " needs paged KV (--kv-block-size > 0)"));
  } else {
    if (o.repeats_given)
      throw Error(Cat("--repeats ", o.repeats,
                      " counts the runs of --shared-prefix or --compare-prefix-cache; give one"));
    for (int r : o.decode_rows)
      if (r < 1 || r > o.user_rows)
        throw Error(Cat("--decode-rows ", r, " must be in [1, --user-rows ", o.user_rows, "]"));
  }
}

void PrintHeader(const LoadedModel& m, const BenchServeOptions& o, const ServingOptions& so) {
  const ModelConfig& c = m.model->config();
  std::printf(
      "bench serve: %s (%d layers, hidden %d, vocab %d), %d user rows, %d max batch "
      "tokens, KV %s %s, %d threads\n",
      m.dir.c_str(), c.n_layers, c.hidden_size, c.vocab_size, o.user_rows, o.max_batch_tokens,
      KVDTypeName(so.kv.dtype),
      so.kv.block_size > 0 ? Cat("paged ", so.kv.block_size).c_str() : "contiguous",
      o.run.threads > 0 ? o.run.threads : static_cast<int>(std::thread::hardware_concurrency()));
  std::fflush(stdout);
}

// The decode phase, then the load, on one loop with the options' prefix cache.
void RunPlain(const LoadedModel& m, const BenchServeOptions& o, nlohmann::json& out) {
  const ModelConfig& c = m.model->config();
  const ServingOptions so = ServingOptionsFor(o.run, m, o.user_rows, o.max_batch_tokens);
  ServingLoop loop(*m.model, nullptr, std::nullopt, so);
  const int64_t kv_bytes = loop.kv_bytes();
  const int64_t weight_bytes = m.model->weights().checkpoint->total_bytes();
  PrintHeader(m, o, so);
  WarmUp(loop, c.vocab_size, o.seed + 7);
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
  const LoadRun r = RunLoad(loop, o, {}, c.vocab_size);
  const double wall = r.wall_s;
  const double step_s = r.after.step_s - r.before.step_s,
               forward_s = r.after.forward_s - r.before.forward_s;
  const double overhead = step_s > 0 ? (step_s - forward_s) / step_s : 0;
  const int64_t rss = PeakRssBytes();
  std::printf(
      "load    %d requests x (%d prompt + %d new tokens), %s: %.1f s, %.1f tokens/s "
      "generated\n",
      o.requests, o.prompt_len, o.gen_len, Arrivals(o).c_str(), wall, r.generated / wall);
  std::printf("  time to first token  p50 %8.1f ms   p95 %8.1f ms\n", 1e3 * Percentile(r.ttft, 0.5),
              1e3 * Percentile(r.ttft, 0.95));
  std::printf("  inter-token latency  p50 %8.1f ms   p95 %8.1f ms\n", 1e3 * Percentile(r.itl, 0.5),
              1e3 * Percentile(r.itl, 0.95));
  if (o.speculation.RequestK() > 0)
    std::printf("  speculation          %s: %lld/%lld proposed tokens accepted\n",
                DescribeSpeculation(o.speculation).c_str(), static_cast<long long>(r.spec_accepted),
                static_cast<long long>(r.spec_proposed));
  std::printf("  loop overhead        %.2f%% of step time (%.3f of %.3f s outside Forward)\n",
              100 * overhead, step_s - forward_s, step_s);
  std::printf("  KV blocks            peak %d of %d\n", r.after.kv_blocks_peak,
              r.after.kv_blocks_total);
  std::printf(
      "  prefix cache         %s: %lld hits, %lld cached prompt tokens, %lld prefilled, "
      "%lld evictions, %d blocks held\n",
      so.prefix_cache && so.kv.block_size > 0 ? "on" : "off",
      static_cast<long long>(r.Delta(&ServingStatus::prefix_hits)),
      static_cast<long long>(r.Delta(&ServingStatus::prefix_cached_tokens)),
      static_cast<long long>(r.Delta(&ServingStatus::tokens_prefilled)),
      static_cast<long long>(r.Delta(&ServingStatus::prefix_evictions)), r.after.prefix_blocks);
  std::printf("  peak RSS             %.1f MiB = weights %.1f + KV pool %.1f + %.1f MiB\n",
              rss / 1048576.0, weight_bytes / 1048576.0, kv_bytes / 1048576.0,
              (rss - weight_bytes - kv_bytes) / 1048576.0);
  out["load"] = {{"requests", o.requests},
                 {"prompt_len", o.prompt_len},
                 {"gen_len", o.gen_len},
                 {"rate", o.rate},
                 {"wall_s", wall},
                 {"generated_tokens_per_s", r.generated / wall},
                 {"ttft_ms", PercentilesMs(r.ttft)},
                 {"itl_ms", PercentilesMs(r.itl)},
                 {"loop_overhead", overhead},
                 {"speculation",
                  {{"mode", o.speculation.mode},
                   {"k", o.speculation.RequestK()},
                   {"proposed", r.spec_proposed},
                   {"accepted", r.spec_accepted}}},
                 {"kv_blocks_peak", r.after.kv_blocks_peak},
                 {"kv_blocks_total", r.after.kv_blocks_total},
                 {"prefix_cache",
                  {{"hits", r.Delta(&ServingStatus::prefix_hits)},
                   {"cached_tokens", r.Delta(&ServingStatus::prefix_cached_tokens)},
                   {"prefilled_tokens", r.Delta(&ServingStatus::tokens_prefilled)},
                   {"evictions", r.Delta(&ServingStatus::prefix_evictions)},
                   {"blocks", r.after.prefix_blocks}}}};
  out["memory"] = {{"peak_rss_bytes", rss},
                   {"weight_bytes", weight_bytes},
                   {"kv_pool_bytes", kv_bytes},
                   {"other_bytes", rss - weight_bytes - kv_bytes}};
  loop.Shutdown(ShutdownMode::kDrain);
}

// The runs of one side of the comparison (prefix cache on, or off).
struct Side {
  bool cache = false;
  std::vector<LoadRun> runs;

  double MedianWall() const {
    std::vector<double> w;
    for (const LoadRun& r : runs) w.push_back(r.wall_s);
    return Percentile(w, 0.5);
  }
  int64_t MaxPrefilled() const {
    int64_t most = 0;
    for (const LoadRun& r : runs) most = std::max(most, r.Delta(&ServingStatus::tokens_prefilled));
    return most;
  }
  nlohmann::json Json() const {
    nlohmann::json j;
    j["wall_s_median"] = MedianWall();
    j["prefilled_tokens_max"] = MaxPrefilled();
    j["runs"] = nlohmann::json::array();
    for (const LoadRun& r : runs)
      j["runs"].push_back({{"wall_s", r.wall_s},
                           {"prefilled_tokens", r.Delta(&ServingStatus::tokens_prefilled)},
                           {"cached_tokens", r.Delta(&ServingStatus::prefix_cached_tokens)},
                           {"hits", r.Delta(&ServingStatus::prefix_hits)},
                           {"evictions", r.Delta(&ServingStatus::prefix_evictions)},
                           {"blocks", r.after.prefix_blocks},
                           {"generated_tokens_per_s", r.generated / r.wall_s},
                           {"ttft_ms", PercentilesMs(r.ttft)},
                           {"itl_ms", PercentilesMs(r.itl)}});
    return j;
  }
};

// The load with the prefix cache on and off, each run on a fresh loop (the cache starts empty).
void RunCompare(const LoadedModel& m, const BenchServeOptions& o, nlohmann::json& out) {
  const ModelConfig& c = m.model->config();
  ModelRunOptions run_on = o.run, run_off = o.run;
  run_on.prefix_cache = "on";
  run_off.prefix_cache = "off";
  const ServingOptions so_on = ServingOptionsFor(run_on, m, o.user_rows, o.max_batch_tokens);
  const ServingOptions so_off = ServingOptionsFor(run_off, m, o.user_rows, o.max_batch_tokens);
  const int block = so_on.kv.block_size;
  Rng prefix_rng(o.seed ^ 0x7072656669780000ull);  // "prefix": not the load's own stream
  const std::vector<int> prefix = RandomPrompt(prefix_rng, o.shared_prefix, c.vocab_size);
  // Printed once the first loop has taken the options (a bad one ends the run with no output).
  auto print_header = [&] {
    PrintHeader(m, o, so_on);
    if (o.shared_prefix > 0)
      std::printf("load    %d requests x (%d shared + %d own prompt tokens + %d new tokens), %s",
                  o.requests, o.shared_prefix, o.prompt_len, o.gen_len, Arrivals(o).c_str());
    else
      std::printf("load    %d requests x (%d distinct prompt tokens + %d new tokens), %s",
                  o.requests, o.prompt_len, o.gen_len, Arrivals(o).c_str());
    std::printf("; prefix cache on and off, a fresh loop each, %d run%s each\n", o.repeats,
                o.repeats == 1 ? "" : "s");
    std::printf(
        "  run  cache  end to end s  prefilled  cached  hits  evictions  TTFT p50 ms  "
        "generated tokens/s\n");
    std::fflush(stdout);
  };
  Side on{true, {}}, off{false, {}};
  for (int rep = 0; rep < o.repeats; ++rep) {
    for (int k = 0; k < 2; ++k) {
      Side& side = (k == rep % 2) ? on : off;  // on first in even runs, off first in odd ones
      ServingLoop loop(*m.model, nullptr, std::nullopt, side.cache ? so_on : so_off);
      if (on.runs.empty() && off.runs.empty()) print_header();
      WarmUp(loop, c.vocab_size, o.seed + 7);
      side.runs.push_back(RunLoad(loop, o, prefix, c.vocab_size));
      loop.Shutdown(ShutdownMode::kDrain);
      const LoadRun& r = side.runs.back();
      std::printf("  %3d  %-5s  %12.2f  %9lld  %6lld  %4lld  %9lld  %11.1f  %18.1f\n", rep + 1,
                  side.cache ? "on" : "off", r.wall_s,
                  static_cast<long long>(r.Delta(&ServingStatus::tokens_prefilled)),
                  static_cast<long long>(r.Delta(&ServingStatus::prefix_cached_tokens)),
                  static_cast<long long>(r.Delta(&ServingStatus::prefix_hits)),
                  static_cast<long long>(r.Delta(&ServingStatus::prefix_evictions)),
                  1e3 * Percentile(r.ttft, 0.5), r.generated / r.wall_s);
      std::fflush(stdout);
    }
  }
  const double t_on = on.MedianWall(), t_off = off.MedianWall();
  const double speedup = t_off / t_on;
  std::printf("  end to end (median): %.2f s with the cache, %.2f s without: %.2fx", t_on, t_off,
              speedup);
  if (o.shared_prefix == 0) std::printf(" (time with the cache %+.1f%%)", 100 * (t_on / t_off - 1));
  std::printf("\n");
  nlohmann::json j = {{"shared_prefix", o.shared_prefix},
                      {"requests", o.requests},
                      {"prompt_len", o.prompt_len},
                      {"gen_len", o.gen_len},
                      {"rate", o.rate},
                      {"block_size", block},
                      {"repeats", o.repeats},
                      {"on", on.Json()},
                      {"off", off.Json()},
                      {"speedup", speedup}};
  if (o.shared_prefix > 0) {
    const int64_t bound = o.shared_prefix + int64_t{o.requests} * (o.prompt_len + block);
    const int64_t prefilled = on.MaxPrefilled();
    const bool held = prefilled <= bound;
    std::printf(
        "  prefilled with the cache: %lld tokens%s %s N + requests x (prompt-len + block size) "
        "= %d + %d x (%d + %d) = %lld: bound %s\n",
        static_cast<long long>(prefilled), o.repeats > 1 ? " (the most of its runs)" : "",
        held ? "<=" : ">", o.shared_prefix, o.requests, o.prompt_len, block,
        static_cast<long long>(bound), held ? "held" : "NOT HELD");
    j["prefilled_bound"] = bound;
    j["bound_held"] = held;
  }
  out["prefix_cache_compare"] = j;
  out["memory"] = {{"peak_rss_bytes", PeakRssBytes()},
                   {"weight_bytes", m.model->weights().checkpoint->total_bytes()}};
}

void RunBenchServe(BenchServeOptions o) {
  if (o.shared_prefix > 0 && !o.prompt_len_given) o.prompt_len = kSharedPromptLen;
  CheckOptions(o);
  LoadedModel m = LoadModel(o.run, /*need_tokenizer=*/false);
  LoadDraftModel(o.speculation, o.run, m, o.user_rows);
  const int64_t need = int64_t{o.shared_prefix} + o.prompt_len + o.gen_len;
  if (need > m.ctx) {
    if (o.shared_prefix > 0)
      throw Error(Cat("--shared-prefix ", o.shared_prefix, " + --prompt-len ", o.prompt_len,
                      " + --gen-len ", o.gen_len, " = ", need, " exceeds the context of ", m.ctx,
                      "; lower them or raise --ctx"));
    throw Error(Cat("--prompt-len + --gen-len = ", need, " exceeds the context of ", m.ctx,
                    "; raise --ctx"));
  }
  nlohmann::json out;
  out["model"] = m.dir;
  out["user_rows"] = o.user_rows;
  out["max_batch_tokens"] = o.max_batch_tokens;
  if (o.Compare())
    RunCompare(m, o, out);
  else
    RunPlain(m, o, out);
  if (!o.json.empty()) WriteJsonOutput(o.json, out.dump(2));
}

}  // namespace

void RegisterBenchServe(CLI::App* bench) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "serve",
      "The serving loop under synthetic load: decode tokens/s by active rows, latency, "
      "overhead, memory; or the prefix cache on against off (--shared-prefix, "
      "--compare-prefix-cache)");
  AddModelRunOptions(cmd, o->run);
  AddKVBlocksOption(cmd, o->run);
  cmd->add_option("--user-rows", o->user_rows, "User rows of the loop")->capture_default_str();
  cmd->add_option("--max-batch-tokens", o->max_batch_tokens, "Tokens per forward call")
      ->capture_default_str();
  cmd->add_option("--requests", o->requests, "Requests in the load phase (1-100000)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--prompt-len", o->prompt_len,
                  "Prompt tokens per request (random ids); with --shared-prefix, each request's "
                  "own tokens after the shared ones (default 32 then)")
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
  cmd->add_option("--shared-prefix", o->shared_prefix,
                  "Every prompt starts with the same N random tokens, then --prompt-len of its "
                  "own: the load runs with the prefix cache on and off (no decode phase), and "
                  "the cache's prefilled tokens are checked against N + requests x (prompt-len + "
                  "block size); 0 = distinct prompts")
      ->capture_default_str();
  cmd->add_flag("--compare-prefix-cache", o->compare_prefix_cache,
                "Run the load (distinct prompts) with the prefix cache on and off, a fresh loop "
                "each, and print the ratio (no decode phase)");
  cmd->add_option("--repeats", o->repeats,
                  "With --shared-prefix or --compare-prefix-cache: runs of each side, "
                  "alternating which goes first; the median counts (1-100)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the figures to this JSON file");
  AddSpeculationOptions(cmd, o->speculation);
  auto http = std::make_shared<HttpLoadOptions>();
  auto id_range = std::make_shared<std::vector<int>>(std::vector<int>{http->id_min, http->id_max});
  cmd->add_option("--http", http->url,
                  "Load a running OpenAI-compatible server at this URL (http://host:port: "
                  "wormchat serve, llama-server) instead of an in-process loop: --clients "
                  "streamed /v1/completions at once (--prompt-len ids, default 256; --gen-len, "
                  "default 128; greedy, ignore_eos)");
  cmd->add_option("--clients", http->clients, "With --http: concurrent clients (1-1024)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--id-range", *id_range,
                  "With --http: prompt token ids are drawn from [MIN,MAX) (past special tokens)")
      ->delimiter(',')
      ->expected(2)
      ->capture_default_str();
  cmd->add_option("--warmup", http->warmup,
                  "With --http: unmeasured short requests before the load")
      ->capture_default_str();
  cmd->callback([o, cmd, http, id_range] {
    if (!http->url.empty()) {
      HttpLoadOptions h = *http;
      h.id_min = (*id_range)[0];
      h.id_max = (*id_range)[1];
      h.seed = o->seed;
      h.json = o->json;
      if (cmd->count("--prompt-len") > 0) h.prompt_len = o->prompt_len;
      if (cmd->count("--gen-len") > 0) h.gen_len = o->gen_len;
      PrintHttpLoad(h, RunHttpLoad(h));
      return;
    }
    CheckSpeculation(*cmd, o->speculation);
    BenchServeOptions given = *o;
    given.prompt_len_given = cmd->count("--prompt-len") > 0;
    given.decode_rows_given = cmd->count("--decode-rows") > 0;
    given.prefix_cache_given = cmd->count("--prefix-cache") > 0;
    given.repeats_given = cmd->count("--repeats") > 0;
    RunBenchServe(given);
  });
}

}  // namespace wc
