#include "app/bench/speculation.h"
#include "app/model_options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "app/bench/requests.h"
#include "app/speculation.h"
#include "model/chat/chat_format.h"
#include "serving/scripted_proposer.h"
#include "util/error.h"

namespace wc {
namespace {

// The extractive workload's passage: plain expository prose with no repeated sentences, so what
// prompt lookup finds is what the reply copies.
constexpr const char* kPassage =
    "The harbour at Kessel Point was built in the spring of 1871, when the fishing fleet had "
    "outgrown the shingle beach where boats had been hauled up for three hundred years. The "
    "engineer, a patient man named Oskar Lindqvist, spent two winters measuring the tides before "
    "he drew a single line. He noticed that the strongest currents ran not at the mouth of the bay "
    "but along its northern shore, where a shelf of dark granite narrowed the channel. Instead of "
    "fighting the water, he let it scour a deep berth beside the rock and placed the breakwater "
    "to the south, where the sea was calm and the sand was firm. The village paid for the work "
    "with a tax on herring, one copper coin for every barrel landed, and the accounts survive in "
    "a ledger kept by the schoolmaster's daughter. Her entries record the weather, the price of "
    "salt, the names of the masons and the day a storm carried away forty feet of unfinished "
    "wall. By the autumn of 1874 the harbour sheltered sixty boats, a smokehouse, two chandlers "
    "and a small chapel where the crews prayed before the long voyages to the northern banks. The "
    "granite shelf is still visible at low water, scarred by the iron rings that once held the "
    "mooring chains. Visitors who walk out along the breakwater today can read a bronze plaque "
    "set into its final stone. It lists no mayors and no merchants, only the tide tables "
    "Lindqvist measured by lantern light, which the harbour master still consults each morning "
    "before he opens the gates.";
constexpr const char* kInstruction = "\n\nRepeat the passage above:";
constexpr int kPassageTokens = 400;  // at most

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Run {
  std::vector<int> tokens;
  double tokens_per_s = 0;  // decode: tokens after the first over the time after it
  int proposed = 0, accepted = 0;
};

Run RunRow(ServingLoop& loop, const std::vector<int>& prompt, int gen_len, int k, int ngram,
           std::shared_ptr<ProposerSource> source) {
  auto obs = std::make_shared<TimingObserver>(BenchClock::now());
  Request r = BenchRequest(prompt, gen_len, /*seed=*/0, obs);
  r.sampling = SamplingParams{0.0f, 0, 1.0f};  // greedy
  r.speculate_k = k;
  r.lookup_ngram = ngram;
  r.proposer_source = std::move(source);
  loop.Submit(std::move(r));
  WaitAll({obs});
  const RequestResult res = obs->Wait();
  Run out;
  out.tokens = res.tokens;
  out.proposed = res.spec_proposed;
  out.accepted = res.spec_accepted;
  const std::vector<double>& t = obs->times();
  if (t.size() < 2 || t.back() <= t.front())
    throw Error("--gen-len is too short to measure decode speed; raise it");
  out.tokens_per_s = (t.size() - 1) / (t.back() - t.front());
  return out;
}

}  // namespace

void AddBenchSpeculationOptions(CLI::App* cmd, BenchSpeculationOptions& s) {
  cmd->add_option("--speculate", s.mode,
                  "Also measure one row's greedy decode with speculation against without: "
                  "lookup, draft (--draft-model), or oracle (the model's own continuation, every "
                  "proposal right but --oracle-accept's share)")
      ->check(CLI::IsMember({"off", "lookup", "oracle", "draft"}))
      ->capture_default_str();
  AddRunOption(cmd, run_option::kSpeculateK, s.ks, "Most tokens proposed per step, each measured")
      ->delimiter(',');
  AddRunOption(cmd, run_option::kLookupNgram, s.lookup_ngram);
  cmd->add_option("--draft-model", s.draft_model,
                  "The draft checkpoint of --speculate draft (given alone, it implies it)")
      ->transform(ModelPathTransform());
  cmd->add_option("--oracle-accept", s.oracle_accept,
                  "--speculate oracle: the share of proposals left right (0-1); the rest are made "
                  "wrong on purpose")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--workload", s.workload,
                  "The speculating row's prompt: random (--prompt-len random ids) or extract (a "
                  "400-token passage, then \"Repeat the passage above:\")")
      ->check(CLI::IsMember({"random", "extract"}))
      ->capture_default_str();
  cmd->add_flag("--print-workload", s.print_workload,
                "Print --workload extract's prompt as text (framed as the model frames a chat "
                "turn) and exit, to give another program the same prompt");
}

void CheckBenchSpeculation(const CLI::App& cmd, BenchSpeculationOptions& s) {
  ResolveDraftMode(cmd.count("--speculate") > 0, s.draft_model, &s.mode);
  if (s.mode != "oracle" && cmd.count("--oracle-accept") > 0)
    throw Error(Cat("--oracle-accept applies to --speculate oracle, not --speculate ", s.mode));
  if (!s.on()) {
    for (const char* flag : {"--speculate-k", "--lookup-ngram", "--workload"})
      if (cmd.count(flag) > 0) throw Error(Cat(flag, " needs --speculate lookup, oracle or draft"));
  }
}

std::vector<int> ExtractPrompt(const LoadedModel& m) {
  const Tokenizer& tok = *m.tokenizer;
  std::string passage = kPassage;
  const std::vector<int> ids = tok.Encode(passage);
  if (static_cast<int>(ids.size()) > kPassageTokens)
    passage = tok.Decode(std::vector<int>(ids.begin(), ids.begin() + kPassageTokens));
  return EncodePrompt(tok, m.chat_format, passage + kInstruction, /*raw=*/false,
                      m.model->config().bos_token_id);
}

std::string ExtractPromptText(const LoadedModel& m) {
  std::vector<int> ids = ExtractPrompt(m);
  if (!ids.empty() && ids.front() == m.model->config().bos_token_id) ids.erase(ids.begin());
  const std::string text = m.tokenizer->Decode(ids);
  // A sentencepiece tokenizer spells the first word with the space it adds when encoding; a
  // program given the text adds it again, so it is left out when the ids come back without it.
  if (!text.empty() && text[0] == ' ' && m.tokenizer->Encode(text.substr(1)) == ids)
    return text.substr(1);
  return text;
}

void RunBenchSpeculation(const BenchSpeculationOptions& s, const ModelRunOptions& run,
                         const LoadedModel& m, ServingLoop& loop, int user_rows, int prompt_len,
                         int gen_len, int repeats, Rng& rng, nlohmann::json* out) {
  const ModelConfig& c = m.model->config();
  const std::vector<int> prompt =
      s.workload == "extract" ? ExtractPrompt(m) : RandomPrompt(rng, prompt_len, c.vocab_size);
  if (static_cast<int>(prompt.size()) + gen_len + 1 > m.ctx)
    throw Error(Cat("the ", prompt.size(), "-token prompt and --gen-len ", gen_len,
                    " must fit the context of ", m.ctx, "; raise --ctx"));
  std::shared_ptr<ProposerSource> draft;
  if (s.mode == "draft") {
    SpeculationOptions so;
    so.mode = "draft";
    so.draft_model = s.draft_model;
    LoadDraftModel(so, run, m, user_rows);
    draft = so.source;
  }
  std::string proposer = s.mode;
  if (s.mode == "lookup") proposer = Cat("prompt lookup, n-grams up to ", s.lookup_ngram);
  if (s.mode == "oracle")
    proposer = Cat("oracle, ", std::lround(100 * s.oracle_accept), "% of proposals right");
  if (s.mode == "draft") proposer = Cat("draft model ", s.draft_model);
  const std::string workload =
      s.workload == "extract"
          ? Cat("extract (", prompt.size(), "-token passage + \"Repeat the passage above:\")")
          : Cat(prompt.size(), " random ids");
  std::printf("speculative decode, 1 row, greedy, %d new tokens; prompt: %s; %s:\n", gen_len,
              workload.c_str(), proposer.c_str());

  // Without speculation first: its tokens are what every speculating run must give, and the
  // oracle's script.
  const Run reference = RunRow(loop, prompt, gen_len, 0, s.lookup_ngram, nullptr);
  nlohmann::json figures = nlohmann::json::array();
  for (size_t i = 0; i < s.ks.size(); ++i) {
    const int k = s.ks[i];
    std::shared_ptr<ProposerSource> source = draft;
    if (s.mode == "oracle")
      source = std::make_shared<ScriptedProposerSource>(reference.tokens, s.oracle_accept,
                                                        c.vocab_size, /*seed=*/k);
    std::vector<double> off, on;
    Run last;
    for (int rep = 0; rep < repeats; ++rep) {
      off.push_back(RunRow(loop, prompt, gen_len, 0, s.lookup_ngram, nullptr).tokens_per_s);
      last = RunRow(loop, prompt, gen_len, k, s.lookup_ngram, source);
      if (last.tokens != reference.tokens)
        throw Error(Cat("speculation at k ", k, " gave other tokens than decoding without it"));
      on.push_back(last.tokens_per_s);
    }
    const double off_rate = Median(off), on_rate = Median(on);
    const int n = static_cast<int>(last.tokens.size());
    // Every step after the prompt's samples one token and keeps the proposals it confirmed.
    const double per_step = static_cast<double>(n) / std::max(1, n - last.accepted);
    const double share = last.proposed > 0 ? 100.0 * last.accepted / last.proposed : 0.0;
    std::printf(
        "  k %2d: %9.1f tokens/s against %.1f without: %.2fx; %.2f tokens/step, %d/%d proposed "
        "accepted (%.0f%%)\n",
        k, on_rate, off_rate, on_rate / off_rate, per_step, last.accepted, last.proposed, share);
    figures.push_back({{"k", k},
                       {"tokens_per_s", on_rate},
                       {"off_tokens_per_s", off_rate},
                       {"speedup", on_rate / off_rate},
                       {"tokens_per_step", per_step},
                       {"proposed", last.proposed},
                       {"accepted", last.accepted}});
  }
  (*out)["speculation"] = {{"mode", s.mode},
                           {"workload", s.workload},
                           {"prompt_tokens", prompt.size()},
                           {"gen_len", gen_len},
                           {"oracle_accept", s.oracle_accept},
                           {"lookup_ngram", s.lookup_ngram},
                           {"draft_model", s.draft_model},
                           {"by_k", figures}};
  std::fflush(stdout);
}

}  // namespace wc
