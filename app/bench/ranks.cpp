// `wormchat bench ranks` under mpirun -np R: what R ranks buy over one, each ratio measured in the
// same run (rank 0 alone first, the others waiting at a barrier, then every rank).
//   tensor parallel  the model split across the R ranks (model/tensor_split.h): prefill of
//                    --prompt-len tokens in one pass and --decode steps of one user, against rank
//                    0 running the whole model; weights held and peak resident bytes per rank
//                    (measured right after the slice loads, before anything else); the all-reduce's
//                    calls, bytes and time per decoded token.
//   data parallel    --requests random prompts (--prompt-len tokens, -n new ones, EOS ignored)
//                    through `batch`'s runner (app/batch/batch_runner.h) on every rank's own
//                    serving loop, against rank 0 running them all; records go to a scratch file.
// Ranks on one host share its cores (--threads 0 divides them); more ranks than cores need
// mpirun --oversubscribe, and the figures say so.
#include "app/bench/ranks.h"

#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/batch/batch_runner.h"
#include "app/bench/bounds.h"
#include "app/bench/requests.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "app/progress.h"
#include "dist/communicator.h"
#include "model/tensor_parallel.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/rng.h"

namespace wc {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchRanksOptions {
  ModelRunOptions run = ServingRunDefaults();
  int requests = 64;
  int prompt_len = 64;
  int gen_len = 32;  // -n
  int decode = 64;
  int user_rows = 8;
  uint64_t seed = 0;
  std::string json;
};

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct ForwardFigures {
  double prefill_tok_s = 0, decode_tok_s = 0;
  Communicator::ReduceStats decode_reduce;  // over the decode steps (rank 0's)
};

// Prefill of `prompt` in one pass, then `steps` greedy decode steps of one user: rank 0's side of
// a tensor-parallel model (the cache journals for the followers), or a whole model.
ForwardFigures TimeForward(const DecoderModel& model, const std::vector<int>& prompt, int steps,
                           const KVCacheOptions& kv, Communicator* group) {
  KVCache cache(model.CacheShape(1, static_cast<int>(prompt.size()) + steps + 1), kv);
  TokenBatch b;
  for (size_t i = 0; i < prompt.size(); ++i)
    b.Add(prompt[i], 0, static_cast<int>(i), i + 1 == prompt.size());
  std::vector<float> logits;
  ForwardFigures f;
  auto t0 = Clock::now();
  model.Forward(b, cache, &logits);
  f.prefill_tok_s = prompt.size() / Seconds(t0);
  if (group) group->reset_reduce_stats();
  t0 = Clock::now();
  for (int s = 0; s < steps; ++s) {
    const int next =
        static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    TokenBatch d;
    d.Add(next, 0, static_cast<int>(prompt.size()) + s, true);
    model.Forward(d, cache, &logits);
  }
  f.decode_tok_s = steps / Seconds(t0);
  if (group) f.decode_reduce = group->reduce_stats();
  return f;
}

// Tokens/s of the batch runner over `comm` (each of its ranks running `model` in its own loop).
struct BatchFigures {
  double tok_s = 0;
  std::vector<int> ran_per_rank;
};
BatchFigures TimeBatch(Communicator& comm, const LoadedModel& m, const BenchRanksOptions& o) {
  ServingLoop loop(*m.model, nullptr, std::nullopt,
                   ServingOptionsFor(o.run, m, o.user_rows, /*max_batch_tokens=*/256));
  std::unique_ptr<BatchWriter> writer;
  std::string path;
  if (comm.rank() == 0) {
    char tmpl[] = "/tmp/wormchat-bench-ranks-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) throw Error("bench ranks: cannot make a scratch file in /tmp");
    close(fd);
    path = tmpl;
    writer = std::make_unique<BatchWriter>(path);
  }
  Rng rng(o.seed);
  std::vector<BatchJob> jobs;
  for (int i = 0; i < o.requests; ++i) {
    BatchJob j;
    j.line = i + 1;
    j.custom_id = Cat("r", i);
    j.request = BenchRequest(RandomPrompt(rng, o.prompt_len, m.model->config().vocab_size),
                             o.gen_len, o.seed + static_cast<uint64_t>(i), nullptr);
    jobs.push_back(std::move(j));
  }
  BatchProgress quiet(false, false, o.requests, 0);
  BatchRunner runner(comm, loop, writer.get(), quiet, "bench");
  BatchCounts counts;
  static volatile std::sig_atomic_t never = 0;
  comm.Barrier();
  const auto t0 = Clock::now();
  runner.Run(std::move(jobs), counts, never);
  const double s = Seconds(t0);
  BatchFigures f;
  if (comm.rank() == 0) {
    writer.reset();
    unlink(path.c_str());
    if (counts.failed > 0) throw Error(Cat("bench ranks: ", counts.failed, " requests failed"));
    f.tok_s = static_cast<double>(o.requests) * o.gen_len / s;
    f.ran_per_rank = runner.ran_per_rank();
  }
  return f;
}

void RunBenchRanks(const BenchRanksOptions& o) {
  if (o.requests < 1) throw Error(Cat("--requests must be >= 1, got ", o.requests));
  if (o.prompt_len < 1) throw Error(Cat("--prompt-len must be >= 1, got ", o.prompt_len));
  if (o.gen_len < 1) throw Error(Cat("-n must be >= 1, got ", o.gen_len));
  if (o.decode < 1) throw Error(Cat("--decode must be >= 1, got ", o.decode));
  Communicator& world = World();
  const int ranks = world.size(), rank = world.rank();
  const bool root = rank == 0;
  ApplyThreads(o.run.threads);
  const bool oversubscribed = world.local_size() > static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  ModelRunOptions whole_run = o.run;
  whole_run.tensor_parallel = 1;
  // The prompt, once the first model loaded tells the vocabulary and the context.
  std::vector<int> prompt;
  auto make_prompt = [&](const LoadedModel& m) {
    if (!prompt.empty()) return;
    if (o.prompt_len + o.decode + 1 > m.ctx)
      throw Error(Cat("--prompt-len + --decode = ", o.prompt_len + o.decode,
                      " exceed the context of ", m.ctx, " positions"));
    Rng rng(o.seed);
    prompt = RandomPrompt(rng, o.prompt_len, m.model->config().vocab_size);
  };

  // 1. Tensor parallel first, so each rank's peak resident set is its slice's; then rank 0 alone
  // with the whole model.
  ForwardFigures tp, one;
  std::vector<int64_t> held, peak;
  if (ranks > 1) {
    ModelRunOptions split_run = o.run;
    split_run.tensor_parallel = ranks;
    LoadedModel m = LoadModel(split_run, /*need_tokenizer=*/false);
    held = m.rank_weight_bytes;
    peak = m.rank_peak_rss;
    make_prompt(m);
    if (root)
      tp = TimeForward(*m.model, prompt, o.decode, m.kv, &world);  // then m stops the others
    else
      FollowSteps(*m.model);
  }
  // Rank 0 alone gets every core it may run on (all of the host's under mpirun --bind-to none),
  // as a single process would; the ranks together share them (ApplyThreads).
  const int ranks_threads = omp_get_max_threads();
  const int alone_threads = o.run.threads > 0 ? o.run.threads : omp_get_num_procs();
  {
    LoadedModel m = LoadModel(whole_run, /*need_tokenizer=*/false);
    make_prompt(m);
    world.Barrier();
    omp_set_num_threads(alone_threads);
    if (root) one = TimeForward(*m.model, prompt, o.decode, m.kv, nullptr);
    omp_set_num_threads(ranks_threads);
    world.Barrier();
  }

  // 2. Data parallel: rank 0 alone, then every rank.
  BatchFigures dp_one, dp_all;
  {
    LoadedModel m = LoadModel(whole_run, /*need_tokenizer=*/false);
    const std::unique_ptr<Communicator> alone = MakeSingleProcessCommunicator();
    world.Barrier();
    omp_set_num_threads(alone_threads);
    if (root) dp_one = TimeBatch(*alone, m, o);
    omp_set_num_threads(ranks_threads);
    world.Barrier();
    if (ranks > 1) dp_all = TimeBatch(world, m, o);
  }
  if (!root) return;

  const std::string label =
      Cat(ranks, " rank", ranks == 1 ? "" : "s", " (", world.Describe(), ", ", world.local_size(),
          " on this host with ", sysconf(_SC_NPROCESSORS_ONLN), " cores",
          oversubscribed ? ", OVERSUBSCRIBED: ranks share cores" : "", ")");
  std::printf("bench ranks: %s; 1 rank runs %d threads, %d ranks %d each\n", label.c_str(),
              alone_threads, ranks, ranks_threads);
  if (alone_threads < sysconf(_SC_NPROCESSORS_ONLN) && o.run.threads == 0)
    std::printf(
        "  (rank 0 is bound to %d of the host's cores: run mpirun --bind-to none for a "
        "one-process baseline on the whole host)\n",
        alone_threads);
  std::printf("tensor parallel, one user, prefill %d tokens, %d decode steps\n", o.prompt_len,
              o.decode);
  std::printf("  1 rank    prefill %8.1f tok/s   decode %7.1f tok/s\n", one.prefill_tok_s,
              one.decode_tok_s);
  nlohmann::json j = {{"ranks", ranks},
                      {"local_ranks", world.local_size()},
                      {"cores", sysconf(_SC_NPROCESSORS_ONLN)},
                      {"oversubscribed", oversubscribed},
                      {"one_rank",
                       {{"prefill_tok_s", one.prefill_tok_s},
                        {"decode_tok_s", one.decode_tok_s},
                        {"batch_tok_s", dp_one.tok_s}}}};
  if (ranks > 1) {
    const double per_token = static_cast<double>(o.decode);
    std::printf("  %d ranks   prefill %8.1f tok/s   decode %7.1f tok/s   (%.2fx, %.2fx)\n", ranks,
                tp.prefill_tok_s, tp.decode_tok_s, tp.prefill_tok_s / one.prefill_tok_s,
                tp.decode_tok_s / one.decode_tok_s);
    std::printf(
        "  all-reduce per decoded token: %.0f calls, %.1f KB summed per rank, %.1f us (%.0f%% of "
        "the step)\n",
        tp.decode_reduce.calls / per_token, tp.decode_reduce.bytes / per_token / 1e3,
        tp.decode_reduce.seconds / per_token * 1e6,
        100.0 * tp.decode_reduce.seconds / per_token * tp.decode_tok_s);
    std::printf("  weights held per rank %s MiB; peak resident per rank %s MiB\n",
                MiBList(held).c_str(), MiBList(peak).c_str());
    j["tensor_parallel"] = {{"prefill_tok_s", tp.prefill_tok_s},
                            {"decode_tok_s", tp.decode_tok_s},
                            {"reduce_calls_per_token", tp.decode_reduce.calls / per_token},
                            {"reduce_bytes_per_token", tp.decode_reduce.bytes / per_token},
                            {"reduce_us_per_token", tp.decode_reduce.seconds / per_token * 1e6},
                            {"weight_bytes_held", held},
                            {"peak_rss_bytes", peak}};
  }
  std::printf("data parallel, %d requests of %d + %d tokens, %d user rows a rank\n", o.requests,
              o.prompt_len, o.gen_len, o.user_rows);
  std::printf("  1 rank    %8.1f tok/s\n", dp_one.tok_s);
  if (ranks > 1) {
    std::string ran;
    for (size_t r = 0; r < dp_all.ran_per_rank.size(); ++r)
      ran += Cat(r == 0 ? "" : ", ", dp_all.ran_per_rank[r]);
    std::printf("  %d ranks   %8.1f tok/s   (%.2fx; requests per rank %s)\n", ranks, dp_all.tok_s,
                dp_all.tok_s / dp_one.tok_s, ran.c_str());
    j["data_parallel"] = {{"batch_tok_s", dp_all.tok_s},
                          {"requests_per_rank", dp_all.ran_per_rank}};
  }
  if (!o.json.empty()) WriteJsonOutput(o.json, j.dump(2));
}

}  // namespace

void RegisterBenchRanks(CLI::App* bench) {
  auto o = std::make_shared<BenchRanksOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "ranks",
      "Under mpirun -np R: tensor- and data-parallel speed and per-rank memory against one rank");
  AddModelRunOptions(cmd, o->run);
  cmd->add_option("--requests", o->requests, "Data parallel: requests (random prompts)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--prompt-len", o->prompt_len, "Prompt tokens (random ids)")
      ->capture_default_str();
  cmd->add_option("-n,--gen-len", o->gen_len, "Data parallel: new tokens per request")
      ->capture_default_str();
  cmd->add_option("--decode", o->decode, "Tensor parallel: decode steps of one user")
      ->capture_default_str();
  cmd->add_option("--user-rows", o->user_rows, "Data parallel: user rows of each rank's loop")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the prompts and sampling")->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the figures to this JSON file");
  cmd->callback([o] { RunBenchRanks(*o); });
}

}  // namespace wc
