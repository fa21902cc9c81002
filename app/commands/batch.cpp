// `wormchat batch`: a file of requests (the OpenAI Batch API's JSONL, or one prompt per line) run
// through the serving loop, one JSONL record per request written durably as it finishes, so a
// killed run resumes where it stopped. The pieces live in app/batch/.
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>

#include "app/batch/batch_input.h"
#include "app/batch/batch_output.h"
#include "app/batch/batch_progress.h"
#include "app/batch/batch_request.h"
#include "app/batch/batch_runner.h"
#include "app/commands/commands.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "app/rank_lifecycle.h"
#include "app/speculation.h"
#include "dist/communicator.h"
#include "dist/exchange.h"
#include "serving/serving_loop.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

struct BatchCmdOptions {
  ModelRunOptions run = ServingRunDefaults();
  std::string input;                          // -i (- = stdin)
  std::string output;                         // -o
  int max_new_tokens = kDefaultMaxNewTokens;  // -n: max_tokens of requests that give none
  SamplingParams sampling;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  int user_rows = 32;
  int max_batch_tokens = 256;
  std::string format = "auto";
  bool quiet = false;
};

volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) {
  g_signal = sig;
}

std::string ReadInput(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  try {
    return ReadTextFile(path);
  } catch (const Error& e) {
    throw Error(Cat("-i ", path, ": cannot read the input (", e.what(), ")"));
  }
}

// The body's "model": the model directory's base name.
std::string ModelName(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

void RunBatch(const BatchCmdOptions& o) {
  // Data parallel: the ranks share out the requests; tensor parallel: the ranks share one model,
  // and rank 0 alone runs the batch.
  if (FollowUnlessTensorParallelLeader(o.run) == RankRole::kFollowed) return;
  const std::unique_ptr<Communicator> one_rank = MakeSingleProcessCommunicator();
  Communicator& comm = o.run.tensor_parallel > 1 ? *one_rank : World();
  const bool root = comm.rank() == 0;
  o.sampling.Validate();
  if (o.max_new_tokens < 0) throw Error(Cat("-n must be >= 0, got ", o.max_new_tokens));
  for (const std::string& s : o.stop)
    if (s.empty()) throw Error("--stop must not be empty");
  if (o.run.ids && !o.stop.empty())
    throw Error("--stop matches text, but with --ids replies are token ids; drop --stop");
  if (o.output == "-")
    throw Error("-o must name a file (not -): records are fsynced there and a rerun resumes it");
  const BatchFormat format_flag = ParseBatchFormat(o.format);
  // Rank 0 reads the input (under mpirun only it has stdin) and owns the output.
  std::string text;
  std::unique_ptr<BatchWriter> writer;
  if (root) {
    text = ReadInput(o.input);
    writer = std::make_unique<BatchWriter>(o.output);
  }
  BroadcastBytes(comm, &text, 0);

  LoadedModel m = LoadModel(o.run, /*need_tokenizer=*/true);
  const ModelConfig& c = m.model->config();
  const BatchFormat format = DetectBatchFormat(text, format_flag);
  const std::vector<BatchLine> lines = ParseBatchInput(text, format);
  BatchDefaults defaults;
  defaults.max_tokens = o.max_new_tokens;
  defaults.sampling = o.sampling;
  defaults.seed = o.seed;
  defaults.stop = o.stop;
  const BatchFraming framing{m.tokenizer.get(), &m.chat_format, c.bos_token_id,
                             c.eos_token_id,    m.ctx,          c.vocab_size,
                             o.run.ids};

  SpeculationOptions speculation = o.run.speculation;
  LoadDraftModel(speculation, o.run, m, o.user_rows);  // each data-parallel rank its own
  ServingLoop loop(*m.model, m.tokenizer.get(), m.chat_format,
                   ServingOptionsFor(o.run, m, o.user_rows, o.max_batch_tokens));

  // Which lines an earlier run wrote ('1'), from rank 0's output, for every rank.
  std::string written(lines.size(), '0');
  BatchCounts counts;
  if (root) {
    for (size_t i = 0; i < lines.size(); ++i) {
      const auto it = writer->existing().find(BatchRecordId(lines[i].line));
      if (it == writer->existing().end()) continue;
      written[i] = '1';
      ++counts.done;
      counts.failed += it->second;
    }
  }
  BroadcastBytes(comm, &written, 0);
  const int already = counts.done;
  BatchProgress progress(!o.quiet && root, isatty(STDERR_FILENO) != 0,
                         static_cast<int>(lines.size()), already);
  if (root && writer->repaired_bytes() > 0)
    progress.Note(Cat("batch: ", o.output, ": cut away a torn last line (",
                      writer->repaired_bytes(), " bytes) left by an interrupted run"));

  // Bad lines become error records at once (rank 0 writes them); good ones go to the loops.
  std::vector<BatchJob> jobs;
  int bad = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const BatchLine& b = lines[i];
    if (written[i] == '1') continue;
    std::string error = b.error;
    if (error.empty()) {
      try {
        Request r = BuildBatchRequest(b, defaults, framing);
        ApplySpeculation(speculation, &r);  // beam lines (body.num_beams) do not speculate
        jobs.push_back({b.line, *b.custom_id, b.chat, std::move(r)});
        continue;
      } catch (const Error& e) {
        error = e.what();
      }
    }
    if (root) writer->Append(ErrorRecord(b.line, b.custom_id, "invalid_request", error));
    ++counts.done, ++counts.failed, ++bad;
  }
  progress.Note(Cat(
      "batch: ", lines.size(), " requests (", format == BatchFormat::kJsonl ? "jsonl" : "text",
      "), ", already, " already in ", o.output, ", ", bad, " bad; running ", jobs.size(), " on ",
      comm.size() > 1 ? Cat(comm.size(), " ranks x ") : std::string(), o.user_rows, " user rows"));

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESETHAND | SA_RESTART;  // a second signal ends the process at once
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  BatchRunner runner(comm, loop, writer.get(), progress, ModelName(m.dir));
  const int stopped_by = runner.Run(std::move(jobs), counts, g_signal);
  if (comm.size() > 1) {
    std::string ran;
    for (size_t r = 0; r < runner.ran_per_rank().size(); ++r)
      ran += Cat(r == 0 ? "" : ", ", "rank ", r, ": ", runner.ran_per_rank()[r]);
    progress.Note(Cat("batch: requests run per rank: ", ran));
  }
  progress.Finish(counts.done, counts.failed, runner.status(), stopped_by != 0,
                  o.run.speculation.RequestK() > 0 ? &runner.speculation() : nullptr);
  if (stopped_by != 0) {
    // End as the signal would have, now that every finished record is on disk.
    signal(stopped_by, SIG_DFL);
    raise(stopped_by);
  }
  if (counts.failed > 0) {
    // Every rank ends with status 1; rank 0 says why (an Error would end the job as a fault).
    if (root)
      std::fprintf(stderr,
                   "wormchat: error: %d of %zu requests failed; their error records are in %s\n",
                   counts.failed, lines.size(), o.output.c_str());
    throw CLI::RuntimeError(1);
  }
}

const char kBatchFooter[] =
    R"(Input (-i, - = stdin): OpenAI Batch API JSONL as vLLM's run-batch reads it, a request a line:
  {"custom_id": "q1", "method": "POST", "url": "/v1/completions", "body": {"prompt": "..."}}
  {"custom_id": "q2", "method": "POST", "url": "/v1/chat/completions",
   "body": {"messages": [{"role": "user", "content": "..."}], "max_tokens": 16}}
A completions prompt is fed as it is (generate --raw), or given as token ids ("prompt": [5, 17, 9])
fed exactly (generate --ids); chat messages (system, user, assistant; the
last from the user) are framed with the model's chat format (one user message: as generate). Body
fields honoured: max_tokens, temperature, top_p, top_k (-1 = no limit), seed, stop (string or list);
those left out (or null) take the command line's values; n must be 1 if given; others are ignored.
Input whose first non-blank line does not start with '{' is plain text: one prompt a line,
chat-framed, custom_id = its line number (blank lines are skipped but counted); --format forces
either. With --ids every prompt and message is token ids written out ("5 17 9"), fed without
framing, and every reply's text is its ids written out ("23 8 2"): no tokenizer needed.

Speculative decoding (--speculate lookup): every request decodes several tokens a step where its
prompt or reply repeats itself, and its record is byte for byte the one without it (requests with
num_beams do not speculate); the summary on stderr says how many proposed tokens were accepted,
over all ranks.

Seeds: a request without "seed" gets splitmix64(fnv1a64(custom_id) ^ --seed), fnv1a64 being 64-bit
FNV-1a over the custom_id's bytes, so reruns give the same results. Every result equals running
that request alone with generate and the same settings and seed, whatever --user-rows,
--max-batch-tokens and --threads.

Output (-o): one JSONL record per request as vLLM's run-batch writes it, in the order they finish:
  {"id": "batch-N", "custom_id": ..., "response": {"status_code": 200, "request_id": "batch-N",
   "body": {text_completion or chat.completion, with usage}}, "error": null}
or, for a bad request, "response": null and "error": {"code", "message": "line N: ..."}; N is the
input line. finish_reason is "stop" (EOS or a stop string) or "length" (max_tokens or a full
context). Records carry no timestamps ("created" is left out on purpose): the same input and
settings give byte-identical records, so runs can be diffed. Each record is fsynced as it
finishes. Rerunning with the same -o resumes: records already there are skipped, a torn last line
is cut away. Ctrl-C/SIGTERM cancels the rest cleanly; a rerun runs what was not written.

Across hosts (data parallel): mpirun -np R wormchat batch -i IN -o OUT ... runs R ranks, each a
whole model and its own serving loop (--model must exist on every host; --threads 0 shares a host's
cores among its ranks). Rank 0 reads IN (stdin included), hands out requests in input order as
ranks have room, writes and fsyncs every record once, and shows the whole job's progress. The
records equal a single-process run's (in another order). A rank that dies or cannot load the
model ends the job with an error naming it; OUT keeps what finished and a rerun (with or without
mpirun) resumes it.

Exit status: 0 when every request succeeded, 1 when any failed (its record is an error record),
non-zero on a usage error; a run stopped by Ctrl-C/SIGTERM ends by that signal (130/143).)";

}  // namespace

void RegisterBatch(CLI::App& app) {
  auto o = std::make_shared<BatchCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "batch", "Run a file of requests (OpenAI Batch JSONL or one prompt a line) to a JSONL file");
  cmd->add_option("-i,--input", o->input, "Input file of requests (- = stdin)")->required();
  cmd->add_option("-o,--output", o->output,
                  "Output JSONL file; an existing one is resumed (its records are skipped)")
      ->required();
  AddModelRunOptions(cmd, o->run);
  AddTensorParallelOption(cmd, o->run);
  AddIdsFlag(cmd, o->run);
  AddKVBlocksOption(cmd, o->run);
  AddMaxNewTokensOption(cmd, o->max_new_tokens,
                        "Most tokens to generate for requests without max_tokens");
  AddSamplingOptions(cmd, o->sampling, o->seed);
  AddSpeculationOptions(cmd, o->run.speculation);
  cmd->add_option("--stop", o->stop,
                  "Stop string for requests without \"stop\" (repeatable); the text before it is "
                  "kept");
  cmd->add_option("--user-rows", o->user_rows, "Requests running at once")->capture_default_str();
  cmd->add_option("--max-batch-tokens", o->max_batch_tokens, "Tokens per forward pass (>= 1)")
      ->capture_default_str();
  cmd->add_option("--format", o->format,
                  "Input format: jsonl or text (default: jsonl when the first non-blank line "
                  "starts with '{')");
  cmd->add_flag("--quiet", o->quiet, "No progress on stderr");
  cmd->footer(kBatchFooter);
  cmd->callback([o, cmd] {
    ApplyGenerationDefaults(*cmd, o->run.model_dir, &o->sampling, &o->max_new_tokens);
    CheckSpeculation(*cmd, o->run.speculation);
    RunBatch(*o);
  });
}

}  // namespace wc
