// `wormchat generate`: one prompt in (text or token ids), generated text streamed to stdout - or
// beam search's best hypotheses, as text or JSON.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/cli_errors.h"
#include "app/commands/commands.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "app/progress.h"
#include "app/rank_lifecycle.h"
#include "app/speculation.h"
#include "app/stdout_sink.h"
#include "mesh/attention_meter.h"
#include "meshmodel/model_estimate.h"
#include "serving/serving_loop.h"
#include "serving/waiting_observer.h"
#include "util/error.h"

namespace wc {
namespace {

struct GenerateCmdOptions {
  ModelRunOptions run = ServingRunDefaults();
  std::string prompt;
  std::string ids;  // --ids: raw token ids instead of --prompt
  int max_new_tokens = kDefaultMaxNewTokens;
  SamplingParams sampling;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool raw = false;
  bool stats = false;
  int beams = 0;  // 0: sample; else beam search of this many beams
  BeamParams beam;
  bool json = false;
};

// Keeps the sum of the log-softmax (temperature 1) of the sampled tokens: a sampled sequence's
// score, as a beam hypothesis's before its length penalty.
// Only when asked (`score`): a pass over the vocabulary per token is not free.
class ScoringObserver : public WaitingObserver {
 public:
  ScoringObserver(TextSink* sink, bool score) : WaitingObserver(sink), score_tokens_(score) {}
  void OnToken(int token, const float* logits, int vocab) override {
    if (!score_tokens_) return;
    double max = logits[0];
    for (int t = 1; t < vocab; ++t) max = std::max(max, static_cast<double>(logits[t]));
    double sum = 0;
    for (int t = 0; t < vocab; ++t) sum += std::exp(logits[t] - max);
    score_ += logits[token] - max - std::log(sum);
  }
  double score() const { return score_; }

 private:
  bool score_tokens_;
  double score_ = 0;
};

// kv_bytes_per_token: one token's K and V, every layer; block_size: paged blocks (0: contiguous).
void PrintStats(const GenerateCmdOptions& o, const LoadedModel& m, const AttentionTotals& at,
                const RequestResult& res, int64_t kv_bytes_per_token, int block_size) {
  // The prompt's time is the prefill's whatever -n is: up to the first token, or - with none
  // generated (-n 0) - the whole request.
  const bool sampled = res.t_first_token > 0;
  const double prefill_s = (sampled ? res.t_first_token : res.t_finish) - res.t_admit;
  const double decode_s = sampled ? res.t_finish - res.t_first_token : 0;
  // A rate over no tokens, or over a time too short to measure, is not printed as a number.
  auto rate = [](double tokens, double seconds) -> std::string {
    if (tokens <= 0 || seconds < 1e-4) return "- tok/s";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f tok/s", tokens / seconds);
    return buf;
  };
  std::fprintf(stderr,
               "prompt %d tokens (%d from the prefix cache) in %.3f s (%s); generated %zu tokens "
               "in %.3f s (%s); stop: %s; attention: %s, %lld ops, %.1f MB K/V read, %.1f KB "
               "NoC, up to %lld cores, %.1f us emulated on the mesh\n",
               res.prompt_tokens, res.cached_tokens, prefill_s,
               rate(res.prompt_tokens - res.cached_tokens, prefill_s).c_str(), res.tokens.size(),
               decode_s, rate(static_cast<double>(res.tokens.size()), decode_s).c_str(),
               StopReasonName(res.reason),
               m.model->options().attention == AttentionImpl::kFlashDecode
                   ? ("FlashDecode on " + m.model->options().mesh).c_str()
                   : "reference",
               static_cast<long long>(at.ops), at.dram_bytes / 1e6, at.noc_bytes / 1e3,
               static_cast<long long>(at.max_cores_used), at.emulated_us);
  const int ctx = res.prompt_tokens + static_cast<int>(res.tokens.size());
  std::fprintf(stderr, "whole model: %.1f us/token on %s (%s, one user at %d cached positions)\n",
               WholeModelUsPerToken(*m.model, m.kv.dtype, m.model->options().mesh, 1, ctx),
               m.model->options().mesh.c_str(), WholeModelGraph(m.model->config()).c_str(), ctx);
  if (!m.rank_weight_bytes.empty()) {
    int64_t total = 0;
    for (int64_t b : m.rank_weight_bytes) total += b;
    std::fprintf(stderr,
                 "tensor parallel: %zu ranks hold %s MiB of weights (%.1f MiB in all); peak "
                 "resident %s MiB\n",
                 m.rank_weight_bytes.size(), MiBList(m.rank_weight_bytes).c_str(),
                 total / 1048576.0, MiBList(m.rank_peak_rss).c_str());
  }
  if (res.spec_proposed > 0 || o.run.speculation.RequestK() > 0)
    std::fprintf(stderr, "speculation: %d/%d proposed tokens accepted (%s)\n", res.spec_accepted,
                 res.spec_proposed, DescribeSpeculation(o.run.speculation).c_str());
  if (o.beams > 0) {
    int64_t longest = 0;
    for (const BeamSequence& s : res.sequences)
      longest = std::max<int64_t>(longest, static_cast<int64_t>(s.tokens.size()));
    int64_t per_beam = res.prompt_tokens + longest;  // tokens a beam's own copy would hold
    if (block_size > 0) per_beam = (per_beam + block_size - 1) / block_size * block_size;
    std::fprintf(stderr,
                 "beams %d: KV held at most %.2f MiB (a copy of the prompt per beam would hold "
                 "%.2f MiB)\n",
                 o.beams, res.kv_bytes_peak / 1048576.0,
                 o.beams * per_beam * kv_bytes_per_token / 1048576.0);
  }
}

void RunGenerate(const GenerateCmdOptions& o) {
  if (FollowUnlessTensorParallelLeader(o.run) == RankRole::kFollowed) return;
  if (o.beams == 0) o.sampling.Validate();
  if (o.max_new_tokens < 0) throw Error(Cat("-n must be >= 0, got ", o.max_new_tokens));
  BeamParams beam = o.beam;
  beam.num_beams = o.beams;
  if (o.beams != 0) beam.Validate();  // before the model loads
  const bool by_ids = !o.ids.empty();
  if (!by_ids && o.prompt.find_first_not_of(" \t\r\n") == std::string::npos)
    throw Error("--prompt is empty; give some text");
  for (const std::string& s : o.stop)
    if (s.empty()) throw Error("--stop is empty: it would end every reply at once; give some text");
  if (by_ids && !o.stop.empty())
    throw Error("--stop matches text, but with --ids the reply is token ids; drop --stop");
  LoadedModel m = LoadModel(o.run, /*need_tokenizer=*/!by_ids);
  const ModelConfig& c = m.model->config();
  const std::vector<int> ids =
      by_ids ? ParseIdsFlag(o.ids, c.vocab_size, "--ids")
             : EncodePrompt(*m.tokenizer, m.chat_format, o.prompt, o.raw, c.bos_token_id);
  if (ids.empty()) throw Error("--prompt is empty; give some text");
  if (static_cast<int>(ids.size()) >= m.ctx)
    throw Error(Cat(by_ids ? "--ids" : "--prompt", " is ", ids.size(),
                    " tokens, too long for the context of ", m.ctx,
                    " tokens; shorten it or raise --ctx"));
  const ServingOptions so = ServingOptionsFor(o.run, m, /*user_rows=*/std::max(1, o.beams));
  AttentionMeter meter;  // the emulated mesh's attention figures (--stats)
  m.model->set_flash_decode_observer(&meter);
  SpeculationOptions speculation = o.run.speculation;
  LoadDraftModel(speculation, o.run, m, so.user_rows);
  ServingLoop loop(*m.model, m.tokenizer.get(), m.chat_format, so);
  Request r;
  r.prompt_ids = ids;
  r.chat = !o.raw && !by_ids;
  r.sampling = o.sampling;
  r.seed = o.seed;
  r.max_new_tokens = o.max_new_tokens;
  r.stop = o.stop;
  if (o.beams != 0) r.beams = beam;
  ApplySpeculation(speculation, &r);
  // Text streams as it is generated, unless it is printed at the end (JSON, several sequences, or
  // no tokenizer to spell it).
  const bool stream = !o.json && m.tokenizer != nullptr && beam.num_return == 1;
  StdoutSink sink;
  // A sampled sequence's score is printed only in JSON (beam hypotheses bring their own).
  auto observer =
      std::make_shared<ScoringObserver>(stream ? &sink : nullptr, o.json && o.beams == 0);
  r.observer = observer;
  loop.Submit(std::move(r));
  const RequestResult res = observer->Wait();
  loop.Shutdown(ShutdownMode::kDrain);
  if (res.reason == StopReason::kError) throw Error(res.error);

  std::vector<BeamSequence> sequences = res.sequences;
  if (o.beams == 0) {  // the sampled sequence
    BeamSequence s;
    s.tokens = res.tokens;
    s.text = res.text;
    s.score = observer->score();
    s.reason = res.reason;
    sequences.push_back(std::move(s));
  }
  if (o.json) {
    nlohmann::json out = {{"sequences", nlohmann::json::array()}};
    for (const BeamSequence& s : sequences)
      out["sequences"].push_back({{"text", s.text},
                                  {"ids", s.tokens},
                                  {"score", s.score},
                                  {"finish_reason", FinishReasonName(s.reason)}});
    sink.Write(out.dump() + "\n");
  } else if (stream) {
    sink.Write("\n");
  } else {
    for (size_t i = 0; i < sequences.size(); ++i) {
      const BeamSequence& s = sequences[i];
      if (sequences.size() > 1)
        sink.Write(Cat("[", i + 1, "] score ", s.score, ", ", FinishReasonName(s.reason), "\n"));
      if (m.tokenizer != nullptr) {
        sink.Write(s.text + "\n");
      } else {  // no tokenizer: the ids
        std::string line;
        for (int t : s.tokens) line += Cat(line.empty() ? "" : " ", t);
        sink.Write(line + "\n");
      }
    }
  }
  sink.Flush();
  if (o.stats)
    PrintStats(o, m, meter.totals(), res,
               KVBytesPerToken(m.model->CacheShape(1, m.ctx), so.kv.dtype, so.kv.scale),
               so.kv.block_size);
}

}  // namespace

void RegisterGenerate(CLI::App& app) {
  auto o = std::make_shared<GenerateCmdOptions>();
  CLI::App* cmd =
      app.add_subcommand("generate", "Generate a reply to one prompt, streamed to stdout");
  AddModelRunOptions(cmd, o->run);
  AddTensorParallelOption(cmd, o->run);
  AddPrefixCacheOption(cmd, o->run);
  auto* prompt = cmd->add_option("--prompt", o->prompt, "The prompt text");
  auto* ids = cmd->add_option("--ids", o->ids,
                              "Token ids instead of --prompt, e.g. \"1 2 3\", fed exactly (no BOS, "
                              "no chat framing)");
  prompt->excludes(ids);
  ids->excludes(prompt);
  AddMaxNewTokensOption(cmd, o->max_new_tokens, "Most tokens to generate");
  AddSamplingOptions(cmd, o->sampling, o->seed);
  auto* beams = AddRunOption(cmd, run_option::kBeams, o->beams,
                             "Beam search with W beams instead of sampling: deterministic, the "
                             "sampling options are ignored");
  AddRunOption(cmd, run_option::kLengthPenalty, o->beam.length_penalty)->needs(beams);
  AddRunOption(cmd, run_option::kEarlyStopping, o->beam.early_stopping)->needs(beams);
  cmd->add_option("--num-return", o->beam.num_return,
                  "Beam search: how many hypotheses to print, best first (at most --beams)")
      ->capture_default_str()
      ->needs(beams);
  cmd->add_flag("--json", o->json,
                "Print one JSON object: {\"sequences\": [{\"text\", \"ids\", \"score\", "
                "\"finish_reason\"}]}");
  cmd->add_option("--stop", o->stop, "Stop string (repeatable); the text before it is kept");
  cmd->add_flag("--raw", o->raw, "Feed the prompt as it is, without the chat format's framing");
  cmd->add_flag("--stats", o->stats, "Print speed and emulated-attention figures to stderr");
  AddSpeculationOptions(cmd, o->run.speculation);
  cmd->callback([o, prompt, ids, beams, cmd] {
    ApplyGenerationDefaults(*cmd, o->run.model_dir, &o->sampling, &o->max_new_tokens);
    if (prompt->count() == 0 && ids->count() == 0)
      throw UsageError("generate needs --prompt or --ids");
    if (beams->count() > 0 && o->beams == 0)
      throw Error(Cat("--beams must be in 1-", kMaxBeams, " (leave it out to sample), got 0"));
    CheckSpeculation(*cmd, o->run.speculation, o->beams);
    RunGenerate(*o);
  });
}

}  // namespace wc
