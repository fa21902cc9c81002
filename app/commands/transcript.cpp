// `wormchat transcript record|replay|update` (issue 14): conversations recorded with everything
// that decides their tokens (serving/transcript.h), replayed token for token as regression tests,
// and rewritten after an intended change.
//
// Exit codes: 0 all passed (or written); 1 a reply differed; 2 a transcript is malformed,
// unreadable, or for another model (fingerprint mismatch) - each named with its file and line.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/commands/commands.h"
#include "app/model_options.h"
#include "app/speculation.h"
#include "app/transcript/conversation_runner.h"
#include "app/transcript/run_header.h"
#include "app/transcript/turn_diff.h"
#include "model/config.h"
#include "model/fingerprint.h"
#include "model/weight_spec.h"
#include "serving/transcript.h"
#include "serving/turns_file.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

struct RecordCmdOptions {
  ModelRunOptions run = ServingRunDefaults();
  std::string turns;  // --turns: the user's side (serving/turns_file.h)
  std::string out;    // --out
  int max_new_tokens = kDefaultMaxNewTokens;
  SamplingParams sampling;
  uint64_t seed = 0;  // as generate and chat: a sampled first turn is generate's reply
  int beams = 0;      // 0: sample
  BeamParams beam;
  std::string system;
};

// replay and update.
struct ReplayCmdOptions {
  std::vector<std::string> files;
  int threads = 0;
  std::string model;  // --model: instead of the header's model line
  // --weights (replay): the spec the transcripts must have been recorded with; empty: any
  std::string weights;
  // --prefix-cache, --prefix-cache-dir, --prefix-cache-dir-max-mb (they change no token: not in
  // the header): a suite of transcripts that share a system prompt computes it once per machine.
  std::string prefix_cache = "on";
  std::string prefix_cache_dir;
  int64_t prefix_cache_dir_max_mb = 1024;
};

enum class Outcome { kPassed, kFailed };

void RunRecord(const RecordCmdOptions& o) {
  const std::vector<TurnsFileStep> steps = ParseTurnsFile(ReadTextFile(o.turns), o.turns);
  ConversationSettings settings;
  settings.sampling = o.sampling;
  settings.seed = o.seed;
  if (o.max_new_tokens < 1) throw Error(Cat("-n must be >= 1, got ", o.max_new_tokens));
  settings.max_new_tokens = o.max_new_tokens;
  if (o.beams != 0) {
    settings.beams = o.beam;
    settings.beams->num_beams = o.beams;
  }
  settings.system = o.system;
  // The /set lines checked (and the widest beam search found) before the model loads.
  int rows = UserRowsFor(settings, {});
  ConversationSettings s = settings;
  for (const TurnsFileStep& step : steps) {
    if (step.kind != TurnsFileStep::Kind::kSet) continue;
    try {
      ApplySetting(s, step.text, step.value);
    } catch (const Error& e) {
      throw Error(Cat(o.turns, ":", step.line, ": ", e.what()));
    }
    if (s.beams) rows = std::max(rows, s.beams->num_beams);
  }
  ConversationRunner runner(o.run, settings, rows);
  Conversation& c = runner.conversation();
  for (const TurnsFileStep& step : steps) {
    try {
      if (step.kind == TurnsFileStep::Kind::kReset) {
        c.Reset();
      } else if (step.kind == TurnsFileStep::Kind::kSet) {
        ConversationSettings next = c.settings();
        ApplySetting(next, step.text, step.value);
        c.set_settings(next);
      } else {
        runner.Say(step.text);
      }
    } catch (const Error& e) {
      throw Error(Cat(o.turns, ":", step.line, ": ", e.what()));
    }
  }
  const Transcript t = MakeTranscript(o.run, runner.model(), settings, c.turns());
  WriteTranscriptFile(o.out, t);
  std::printf("wrote %s: %zu turns\n", o.out.c_str(), t.turns.size());
}

// The run options of `t` with the command line's overrides.
ModelRunOptions RunOptionsFor(const Transcript& t, const ReplayCmdOptions& o) {
  ModelRunOptions run = RunOptionsFromTranscript(t);
  if (!o.weights.empty()) {
    const std::string want = WeightSpec::Parse(o.weights).ToString();
    if (want != run.weights) {
      int line = 0;
      for (const TranscriptOption& entry : t.run)
        if (entry.key == "weights") line = entry.line;
      throw Error(Cat(t.path, line > 0 ? Cat(":", line) : std::string(),
                      ": recorded with --weights ", run.weights, ", replayed with --weights ", want,
                      " (the weight formats decide the tokens; replay without --weights to use the "
                      "header's)"));
    }
  }
  run.threads = o.threads;
  if (!o.model.empty()) run.model_dir = o.model;
  run.prefix_cache = o.prefix_cache;
  run.prefix_cache_dir = o.prefix_cache_dir;
  run.prefix_cache_dir_max_mb = o.prefix_cache_dir_max_mb;
  return run;
}

// A chat kept by `wormchat chat --server URL` holds the server's text, not token ids: nothing to
// replay or update.
void RefuseServerChat(const Transcript& t) {
  if (!t.server.empty())
    throw Error(Cat(t.path, ":", t.server_line, ": a chat kept from the server ", t.server,
                    ": its replies came as text, with no token ids to replay (continue it with "
                    "`wormchat chat --server URL --resume NAME`)"));
}

// Replays turn i of `t` (read from t.path); a failure names the file, the turn's line and number.
ConversationTurn ReplayTurn(ConversationRunner& runner, const Transcript& t, size_t i) {
  try {
    return runner.Replay(t.turns[i]);
  } catch (const Error& e) {
    throw Error(Cat(t.path, ":", t.turn_lines[i], ": turn ", i + 1, ": ", e.what()));
  }
}

Outcome ReplayFile(const std::string& path, const ReplayCmdOptions& o) {
  const Transcript t = ReadTranscriptFile(path);
  RefuseServerChat(t);
  const ModelRunOptions run = RunOptionsFor(t, o);
  const std::string dir = run.model_dir.empty() ? DefaultModelDir() : run.model_dir;
  if (!t.architecture.empty()) {  // before the fingerprint: the plainer of the two mismatches
    const ArchitectureInfo& arch = ArchitectureOf(LoadConfig(dir).arch);
    if (t.architecture != arch.name)
      throw Error(Cat(path, ":", t.architecture_line, ": recorded on a ", t.architecture,
                      " model, but ", dir, " is ", arch.name, " (", arch.hf_class,
                      "); pass --model with the model it was recorded on"));
  }
  if (t.model_size >= 0) {  // recorded on a GGUF file: its size first, the plainer mismatch
    const int64_t size = GgufModelSize(dir);
    if (size != t.model_size)
      throw Error(Cat(path, ":", t.model_size_line, ": recorded on a GGUF file of ", t.model_size,
                      " bytes, but ", dir,
                      size < 0 ? std::string(" is a model directory") : Cat(" has ", size),
                      " (pass --model with the model it was recorded on)"));
  }
  const std::string fingerprint = ModelFingerprint(dir, run.kv_scale == "tensor");
  if (fingerprint != t.fingerprint)
    throw Error(Cat(path, ":", t.fingerprint_line, ": recorded on another model: fingerprint ",
                    t.fingerprint, ", but ", dir, " has ", fingerprint,
                    " (pass --model with the model it was recorded on, or run `wormchat "
                    "transcript update` after an intended change)"));
  ConversationRunner runner(run, t.settings, UserRowsFor(t.settings, t.turns));
  for (size_t i = 0; i < t.turns.size(); ++i) {
    const ConversationTurn got = ReplayTurn(runner, t, i);
    const std::string diff = DescribeDifference(t.turns[i], got, *runner.model().tokenizer);
    if (!diff.empty()) {
      std::printf("%s: turn %zu, %s\n", path.c_str(), i + 1, diff.c_str());
      const std::string note = KvKernelsNote(t, runner.model());
      if (!note.empty()) std::printf("  %s\n", note.c_str());
      return Outcome::kFailed;
    }
  }
  // With the header's speculation on, how it went (it changes no token, only the speed).
  const std::string speculation = run.speculation.RequestK() > 0
                                      ? Cat("; speculation: ", runner.spec_accepted(), "/",
                                            runner.spec_proposed(), " proposed tokens accepted")
                                      : std::string();
  std::printf("%s: passed (%zu turn%s; %lld prompt tokens, %lld from the prefix cache%s)\n",
              path.c_str(), t.turns.size(), t.turns.size() == 1 ? "" : "s",
              static_cast<long long>(runner.prompt_tokens()),
              static_cast<long long>(runner.cached_tokens()), speculation.c_str());
  return Outcome::kPassed;
}

// Re-runs every turn and rewrites the file if anything changed. Returns whether it did.
bool UpdateFile(const std::string& path, const ReplayCmdOptions& o) {
  const std::string before = ReadTextFile(path);
  const Transcript t = ParseTranscript(before, path);
  RefuseServerChat(t);
  const ModelRunOptions run = RunOptionsFor(t, o);
  ConversationRunner runner(run, t.settings, UserRowsFor(t.settings, t.turns));
  std::string changed;
  for (size_t i = 0; i < t.turns.size(); ++i) {
    const ConversationTurn got = ReplayTurn(runner, t, i);
    if (!DescribeDifference(t.turns[i], got, *runner.model().tokenizer).empty())
      changed += Cat(changed.empty() ? "" : ", ", i + 1);
  }
  const Transcript updated =
      MakeTranscript(run, runner.model(), t.settings, runner.conversation().turns());
  if (FormatTranscript(updated) == before) {
    std::printf("%s: unchanged\n", path.c_str());
    return false;
  }
  WriteTranscriptFile(path, updated);
  std::string what = changed.empty() ? "no reply changed" : Cat("changed turns: ", changed);
  if (updated.fingerprint != t.fingerprint)
    what += Cat("; fingerprint ", t.fingerprint, " -> ", updated.fingerprint);
  std::printf("%s: rewritten (%s)\n", path.c_str(), what.c_str());
  return true;
}

// Runs `each` over the files and counts those it returns true for; an error is reported on stderr
// (named with the file), counted in `errors`, and the other files go on.
template <typename Each>
int ForEachFile(const std::vector<std::string>& files, Each each, int& errors) {
  int ok = 0;
  for (const std::string& path : files) {
    try {
      ok += each(path) ? 1 : 0;
    } catch (const Error& e) {
      std::string message = e.what();
      if (message.rfind(path, 0) != 0) message = Cat(path, ": ", message);
      std::fflush(stdout);
      std::fprintf(stderr, "wormchat: error: %s\n", message.c_str());
      ++errors;
    }
  }
  return ok;
}

void RunReplay(const ReplayCmdOptions& o) {
  int errors = 0;
  const int passed = ForEachFile(
      o.files, [&o](const std::string& path) { return ReplayFile(path, o) == Outcome::kPassed; },
      errors);
  const int failed = static_cast<int>(o.files.size()) - passed;
  std::printf("%d passed, %d failed\n", passed, failed);
  std::fflush(stdout);
  if (errors > 0) throw CLI::RuntimeError(2);
  if (failed > 0) throw CLI::RuntimeError(1);
}

void RunUpdate(const ReplayCmdOptions& o) {
  int errors = 0;
  const int rewritten = ForEachFile(
      o.files, [&o](const std::string& path) { return UpdateFile(path, o); }, errors);
  std::printf("%d rewritten, %d unchanged\n", rewritten,
              static_cast<int>(o.files.size()) - rewritten - errors);
  std::fflush(stdout);
  if (errors > 0) throw CLI::RuntimeError(2);
}

void AddReplayOptions(CLI::App* cmd, ReplayCmdOptions& o) {
  cmd->add_option("files", o.files, "Transcript files")->required();
  AddThreadsOption(cmd, o.threads);
  cmd->add_option("--model", o.model,
                  "Model directory instead of the one each transcript's header names")
      ->transform(ModelPathTransform());
  cmd->add_option("--prefix-cache", o.prefix_cache,
                  "on: reuse the KV blocks of prompts already computed (as the serving commands); "
                  "off: prefill every turn whole")
      ->capture_default_str();
  cmd->add_option("--prefix-cache-dir", o.prefix_cache_dir,
                  "Keep the prefix cache's blocks in files under DIR and map them in on later "
                  "runs: transcripts sharing a system prompt compute it once per machine");
  cmd->add_option("--prefix-cache-dir-max-mb", o.prefix_cache_dir_max_mb,
                  "Size cap of --prefix-cache-dir in MiB: the oldest files are deleted past it")
      ->capture_default_str();
}

}  // namespace

void RegisterTranscript(CLI::App& app) {
  CLI::App* tr = app.add_subcommand(
      "transcript", "Record conversations and replay them token for token (regression tests)");
  tr->require_subcommand(1);

  auto r = std::make_shared<RecordCmdOptions>();
  CLI::App* record = tr->add_subcommand(
      "record", "Run each user turn of a file through one conversation and write a transcript");
  record
      ->add_option("--turns", r->turns,
                   "User turns: one per line, \"\"\" opens and closes a multi-line one; /reset "
                   "and /set KEY VALUE between them")
      ->required();
  record->add_option("--out", r->out, "The transcript to write")->required();
  AddModelRunOptions(record, r->run);
  AddIdsFlag(record, r->run);
  AddKVBlocksOption(record, r->run);
  AddMaxNewTokensOption(record, r->max_new_tokens, "Most tokens per reply");
  AddSamplingOptions(record, r->sampling, r->seed);
  auto* beams = AddRunOption(record, run_option::kBeams, r->beams);
  AddRunOption(record, run_option::kLengthPenalty, r->beam.length_penalty)->needs(beams);
  AddRunOption(record, run_option::kEarlyStopping, r->beam.early_stopping)->needs(beams);
  record->add_option("--system", r->system, "System prompt (needs the model's chat format)");
  AddSpeculationOptions(record, r->run.speculation);
  record->callback([r, beams, record] {
    ApplyGenerationDefaults(*record, r->run.model_dir, &r->sampling, &r->max_new_tokens);
    if (beams->count() > 0 && (r->beams < 1 || r->beams > kMaxBeams))
      throw Error(
          Cat("--beams must be in 1-", kMaxBeams, " (leave it out to sample), got ", r->beams));
    CheckSpeculation(*record, r->run.speculation, r->beams);
    RunRecord(*r);
  });

  auto p = std::make_shared<ReplayCmdOptions>();
  CLI::App* replay = tr->add_subcommand(
      "replay",
      "Replay transcripts with their headers' settings and check every reply token for token "
      "(exit 1: a reply differed; 2: a file is malformed or for another model)");
  AddReplayOptions(replay, *p);
  replay->add_option("--weights", p->weights,
                     "Check that each transcript was recorded with this --weights spec (another "
                     "is a mismatch, exit 2); the header's spec is what runs");
  replay->callback([p] { RunReplay(*p); });

  auto u = std::make_shared<ReplayCmdOptions>();
  CLI::App* update = tr->add_subcommand(
      "update", "Re-run transcripts and rewrite their expected replies (after an intended change)");
  AddReplayOptions(update, *u);
  update->callback([u] { RunUpdate(*u); });
}

}  // namespace wc
