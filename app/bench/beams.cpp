// `wormchat bench beams` (issue 13): for each beam width W of --beams, one beam request of
// --prompt-tokens seeded random ids and --new-tokens new tokens (EOS ignored, so every step runs)
// goes alone through one serving loop of max(W) user rows. From its RequestResult:
//   prefill  t_first_token - t_admit: the prompt, fed once in the leader row, and the search's
//            first step, taken on the prefill's logits (it gives the first new token)
//   decode   t_finish - t_first_token: the other new_tokens - 1 steps, W rows each; tokens/s per
//            beam = (new_tokens - 1) / decode s, over all beams W times that
//   held     result.kv_bytes_peak: the most KV bytes the beams held at once (a shared block once)
//   bound    the target: prompt + W x new tokens, plus W blocks
//   naive    W copies of prompt + new tokens, each rounded up to whole blocks
// Then the two targets with the measured values: held <= bound at every W, and W = 4's
// tokens/s over all beams >= 3x W = 1's. It prints figures; it never fails on them.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app/bench/beams.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "serving/serving_loop.h"
#include "serving/waiting_observer.h"
#include "util/error.h"
#include "util/rng.h"

namespace wc {
namespace {

struct BenchBeamsOptions {
  ModelRunOptions run = ServingRunDefaults();
  int prompt_tokens = 1024;
  int new_tokens = 64;
  std::vector<int> beams = {1, 2, 4, 8};
};

constexpr uint64_t kPromptSeed = 13;
constexpr int kFirstId = 3;    // ids below are special in Falcon-style vocabularies (bos 1, eos 2)
constexpr int kWarmupLen = 8;  // prompt tokens of the unmeasured warm-up request

// One measured row of the table.
struct BeamFigures {
  int w = 0;
  int generated = 0;  // new tokens of the best sequence (= --new-tokens: EOS is ignored)
  double prefill_s = 0, decode_s = 0;
  int64_t held = 0, bound = 0, naive = 0;  // KV bytes
  // Decode tokens/s of one beam: the generated tokens after the first, over the decode time.
  double PerBeam() const { return decode_s > 0 ? (generated - 1) / decode_s : 0; }
  double AllBeams() const { return w * PerBeam(); }
};

// `len` ids drawn by a fixed seed from [kFirstId, vocab), never `eos`: the same prompt every run.
std::vector<int> SeededPrompt(int len, int vocab, int eos) {
  Rng rng(kPromptSeed);
  std::vector<int> ids;
  while (static_cast<int>(ids.size()) < len) {
    const int id =
        kFirstId + static_cast<int>(rng.Next() % static_cast<uint64_t>(vocab - kFirstId));
    if (id != eos) ids.push_back(id);
  }
  return ids;
}

// Runs one beam request of `w` beams alone on `loop` and returns its result. Throws wc::Error
// when the loop refuses or fails it (e.g. a --kv-blocks pool too small for W beams).
RequestResult RunBeamRequest(ServingLoop& loop, const std::vector<int>& prompt, int new_tokens,
                             int w) {
  Request r;
  r.prompt_ids = prompt;
  r.max_new_tokens = new_tokens;
  r.stop_at_eos = false;  // fixed lengths: every step runs
  BeamParams b;
  b.num_beams = w;
  r.beams = b;
  auto observer = std::make_shared<WaitingObserver>();
  r.observer = observer;
  loop.Submit(std::move(r));
  RequestResult result = observer->Wait();
  if (result.reason == StopReason::kError)
    throw Error(Cat("bench beams: the request of ", w, " beams failed: ", result.error));
  if (result.sequences.empty())
    throw Error(Cat("bench beams: the request of ", w, " beams returned no sequence"));
  return result;
}

// n tokens rounded up to whole blocks of `block_size` (0: contiguous, no rounding).
int64_t RoundUpToBlocks(int64_t n, int block_size) {
  return block_size > 0 ? (n + block_size - 1) / block_size * block_size : n;
}

void ValidateOptions(const BenchBeamsOptions& o) {
  if (o.beams.empty()) throw Error("--beams needs at least one beam width");
  for (int w : o.beams)
    if (w < 1 || w > kMaxBeams)
      throw Error(
          Cat("--beams ", w, " is out of range; each width must be in [1, ", kMaxBeams, "]"));
  if (o.prompt_tokens < 1) throw Error(Cat("--prompt-tokens must be >= 1, got ", o.prompt_tokens));
  if (o.new_tokens < 2)
    throw Error(
        Cat("--new-tokens must be >= 2 (the first comes from the prefill; decode is the "
            "rest), got ",
            o.new_tokens));
}

void PrintTargets(const std::vector<BeamFigures>& rows) {
  double worst = 0;  // largest held / bound
  std::string over;  // the widths whose held bytes exceed the bound
  for (const BeamFigures& f : rows) {
    worst = std::max(worst, static_cast<double>(f.held) / static_cast<double>(f.bound));
    if (f.held > f.bound) over += Cat(over.empty() ? "" : ", ", f.w);
  }
  std::printf(
      "target  KV held <= prompt + W x new tokens + W blocks, every W: %s (held/bound at "
      "most %.3f)\n",
      over.empty() ? "met" : Cat("NOT met at W = ", over).c_str(), worst);
  const BeamFigures *one = nullptr, *four = nullptr;
  for (const BeamFigures& f : rows) {
    if (f.w == 1 && one == nullptr) one = &f;
    if (f.w == 4 && four == nullptr) four = &f;
  }
  if (one == nullptr || four == nullptr || one->AllBeams() <= 0) {
    std::printf(
        "target  W = 4 tokens/s over all beams >= 3x W = 1: not measured (--beams needs "
        "1 and 4)\n");
    return;
  }
  const double ratio = four->AllBeams() / one->AllBeams();
  std::printf(
      "target  W = 4 tokens/s over all beams >= 3x W = 1: %.2fx (%.2f vs %.2f tokens/s): "
      "%s\n",
      ratio, four->AllBeams(), one->AllBeams(), ratio >= 3.0 ? "met" : "NOT met");
}

void RunBenchBeams(const BenchBeamsOptions& o) {
  ValidateOptions(o);
  LoadedModel m = LoadModel(o.run, /*need_tokenizer=*/false);
  const ModelConfig& c = m.model->config();
  if (o.prompt_tokens >= m.ctx)
    throw Error(Cat("--prompt-tokens ", o.prompt_tokens, " must be below the context of ", m.ctx,
                    " tokens (--ctx)"));
  if (o.prompt_tokens + o.new_tokens > m.ctx)
    throw Error(Cat("--prompt-tokens + --new-tokens = ", o.prompt_tokens + o.new_tokens,
                    " exceeds the context of ", m.ctx, " tokens; lower one or raise --ctx"));
  if (c.vocab_size <= kFirstId + 1)
    throw Error(Cat(m.dir, ": vocab_size ", c.vocab_size, " is too small for a random prompt"));
  const int max_w = *std::max_element(o.beams.begin(), o.beams.end());
  const ServingOptions so = ServingOptionsFor(o.run, m, max_w);
  ServingLoop loop(*m.model, nullptr, std::nullopt, so);
  const int bs = so.kv.block_size;
  const int64_t per_token =
      KVBytesPerToken(m.model->CacheShape(1, m.ctx), so.kv.dtype, so.kv.scale);
  const int threads =
      o.run.threads > 0 ? o.run.threads : static_cast<int>(std::thread::hardware_concurrency());
  std::printf(
      "bench beams: %s (%d layers, hidden %d, vocab %d), %d user rows, KV %s %s, %lld "
      "bytes per token, %d threads\n",
      m.dir.c_str(), c.n_layers, c.hidden_size, c.vocab_size, max_w, KVDTypeName(so.kv.dtype),
      bs > 0 ? Cat("paged (", bs, "-token blocks)").c_str() : "contiguous",
      static_cast<long long>(per_token), threads);
  std::printf(
      "  prompt %d tokens (seeded random ids), %d new tokens per beam, EOS ignored; "
      "decode covers the %d steps after the first new token (the prefill's logits give "
      "it), and tokens/s count those %d tokens per beam\n",
      o.prompt_tokens, o.new_tokens, o.new_tokens - 1, o.new_tokens - 1);
  std::fflush(stdout);

  const std::vector<int> prompt = SeededPrompt(o.prompt_tokens, c.vocab_size, c.eos_token_id);
  // Warm-up (page faults of the weights and KV pool, OpenMP's thread pool), not measured.
  RunBeamRequest(
      loop,
      std::vector<int>(prompt.begin(), prompt.begin() + std::min(o.prompt_tokens, kWarmupLen)), 2,
      max_w);

  std::printf("%4s %10s %9s %11s %12s %12s %12s %12s %10s\n", "W", "prefill s", "decode s",
              "tok/s/beam", "tok/s beams", "KV held B", "bound B", "naive B", "held/naive");
  std::vector<BeamFigures> rows;
  for (int w : o.beams) {
    const RequestResult r = RunBeamRequest(loop, prompt, o.new_tokens, w);
    BeamFigures f;
    f.w = w;
    f.generated = static_cast<int>(r.sequences.front().tokens.size());
    f.prefill_s = r.t_first_token - r.t_admit;
    f.decode_s = r.t_finish - r.t_first_token;
    f.held = r.kv_bytes_peak;
    const int64_t p = o.prompt_tokens, g = f.generated;
    f.bound = (p + w * g + static_cast<int64_t>(w) * bs) * per_token;
    f.naive = w * RoundUpToBlocks(p + g, bs) * per_token;
    std::printf("%4d %10.3f %9.3f %11.2f %12.2f %12lld %12lld %12lld %10.3f\n", w, f.prefill_s,
                f.decode_s, f.PerBeam(), f.AllBeams(), static_cast<long long>(f.held),
                static_cast<long long>(f.bound), static_cast<long long>(f.naive),
                static_cast<double>(f.held) / static_cast<double>(f.naive));
    std::fflush(stdout);
    rows.push_back(f);
  }
  loop.Shutdown(ShutdownMode::kDrain);
  PrintTargets(rows);
}

}  // namespace

void RegisterBenchBeams(CLI::App* bench) {
  auto o = std::make_shared<BenchBeamsOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "beams",
      "Beam requests through the serving loop: tokens/s per beam and the KV bytes held by W "
      "beams sharing one prompt, against the bound and W naive copies");
  AddModelRunOptions(cmd, o->run);
  AddKVBlocksOption(cmd, o->run);
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "Prompt tokens (seeded random ids)")
      ->capture_default_str();
  cmd->add_option("--new-tokens", o->new_tokens, "New tokens per beam (EOS ignored)")
      ->capture_default_str();
  cmd->add_option(
         "--beams", o->beams,
         Cat("Beam widths W to measure, one request each (comma-separated, 1..", kMaxBeams, ")"))
      ->delimiter(',')
      ->capture_default_str();
  cmd->callback([o] { RunBenchBeams(*o); });
}

}  // namespace wc
