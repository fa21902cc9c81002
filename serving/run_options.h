// The options a run's requests take, each declared once: its name, kind, range, default, what its
// edge value means and its help. Every front end reads them from here, so a bound, a choice or an
// error message is written in one place:
//   - the command-line flags (app/model_options.h's AddRunOption registers --NAME from a spec),
//   - the chat's /set NAME VALUE (app/chat/chat_commands.h),
//   - a batch record's and an HTTP request's body fields (`field`: app/openai/openai_body.h),
//   - a transcript's header lines (serving/transcript.h's settings, app/transcript/run_header.h's
//     speculation lines),
//   - the checks the objects make of themselves (SamplingParams::Validate, BeamParams::Validate,
//     ServingLoop::CheckRequest).
// Every error reads "LABEL must be ACCEPTS, got VALUE", where LABEL is how the front end names
// the option (--top-p, /set top-p, top_p, a header's top-p) and ACCEPTS is RunOptionSpec::Accepts.
#pragma once

#include <array>
#include <cfloat>
#include <cstdint>
#include <string>
#include <vector>

namespace wc {

enum class RunOptionKind {
  kNumber,  // a finite number in [min, max] ((min, max] when min_open)
  kCount,   // a whole number in [min, max]
  kSeed,    // a whole number in [0, 2^64)
  kChoice,  // one of `choices`
  kSwitch,  // true or false (a flag on the command line)
};

struct RunOptionSpec {
  const char* name;   // the flag without dashes, /set's name, a transcript header's key: "top-k"
  const char* field;  // the OpenAI body field ("top_k"); nullptr: not a request field
  RunOptionKind kind;
  double min = 0, max = 0;               // kNumber, kCount
  bool min_open = false;                 // kNumber: min itself is refused
  std::array<const char*, 3> choices{};  // kChoice (unused slots nullptr)
  double default_number = 0;             // kNumber, kCount, kSeed, kSwitch (0 or 1)
  const char* default_choice = nullptr;  // kChoice
  const char* meaning = nullptr;         // what an edge value means: "0 = greedy"; or nullptr
  const char* help = "";                 // the flag's help

  // What the option accepts, as every message says it: "a number >= 0 (0 = greedy)",
  // "a number in (0, 1] (1 = off)", "a whole number in 1-16", "off, lookup or draft".
  std::string Accepts() const;
  // Whether `v` is a value of a kNumber or kCount option (NaN and infinities never are).
  bool Holds(double v) const;
  // The error every front end gives: "LABEL must be ACCEPTS, got GOT".
  std::string Refusal(const std::string& label, const std::string& got) const;
  // `text` read as this option's value; throws wc::Error(Refusal(label, text)) otherwise.
  double ParseNumber(const std::string& text, const std::string& label) const;  // kNumber/kCount
  uint64_t ParseSeed(const std::string& text, const std::string& label) const;  // kSeed
  std::string ParseChoice(const std::string& text, const std::string& label) const;  // kChoice
  bool ParseSwitch(const std::string& text, const std::string& label) const;         // kSwitch
  // Any kind, as text (what a header line or /set holds): the canonical text of the value.
  std::string ParseText(const std::string& text, const std::string& label) const;
  // Throws wc::Error(Refusal(label, FormatNumber(v))) unless Holds(v).
  void Check(double v, const std::string& label) const;
  // The default as text ("0.9", "lookup", "false").
  std::string DefaultText() const;
};

// The most beams a beam search keeps, the most tokens a speculation step proposes and the longest
// n-gram prompt lookup matches (serving/beam_search.h, serving/proposer.h).
inline constexpr int kMaxBeams = 16;
inline constexpr int kMaxSpeculateK = 16;
inline constexpr int kMaxLookupNgram = 16;
// More new tokens than any context holds: a typo, not a request.
inline constexpr int kMaxNewTokens = 1 << 30;
// -n's default: most tokens a reply or a completion generates unless told.
inline constexpr int kDefaultMaxNewTokens = 256;

namespace run_option {

// Sampling: temperature -> top-k -> top-p (serving/sampler.h). Defaults are the seed's (001).
inline constexpr RunOptionSpec kTemperature{
    "temperature", "temperature", RunOptionKind::kNumber, 0, FLT_MAX, false, {}, 1.0,
    nullptr,       "0 = greedy",  "Sampling temperature"};
inline constexpr RunOptionSpec kTopK{"top-k",
                                     "top_k",
                                     RunOptionKind::kCount,
                                     0,
                                     1e9,
                                     false,
                                     {},
                                     5,
                                     nullptr,
                                     "0 = no limit",
                                     "Sample from the k most likely tokens"};
inline constexpr RunOptionSpec kTopP{"top-p",
                                     "top_p",
                                     RunOptionKind::kNumber,
                                     0,
                                     1,
                                     true,
                                     {},
                                     0.9,
                                     nullptr,
                                     "1 = off",
                                     "Nucleus sampling: the smallest set of tokens "
                                     "holding this much probability"};
inline constexpr RunOptionSpec kSeed{"seed",
                                     "seed",
                                     RunOptionKind::kSeed,
                                     0,
                                     0,
                                     false,
                                     {},
                                     0,
                                     nullptr,
                                     nullptr,
                                     "Random seed: same seed, same tokens"};
inline constexpr RunOptionSpec kMaxNewTokensOption{"max-new-tokens",
                                                   "max_tokens",
                                                   RunOptionKind::kCount,
                                                   0,
                                                   kMaxNewTokens,
                                                   false,
                                                   {},
                                                   kDefaultMaxNewTokens,
                                                   nullptr,
                                                   "0 = only read the prompt",
                                                   "Most tokens to generate"};

// Beam search (serving/beam_search.h): deterministic, instead of sampling.
inline constexpr RunOptionSpec kBeams{"beams",
                                      "num_beams",
                                      RunOptionKind::kCount,
                                      0,
                                      kMaxBeams,
                                      false,
                                      {},
                                      0,
                                      nullptr,
                                      "0 = sample",
                                      "Beam search with W beams instead of sampling"};
inline constexpr RunOptionSpec kLengthPenalty{
    "length-penalty",
    "length_penalty",
    RunOptionKind::kNumber,
    0,
    FLT_MAX,
    false,
    {},
    1.0,
    nullptr,
    nullptr,
    "Beam search: a hypothesis scores its log-probability / length^L"};
inline constexpr RunOptionSpec kEarlyStopping{
    "early-stopping",
    "early_stopping",
    RunOptionKind::kSwitch,
    0,
    1,
    false,
    {},
    0,
    nullptr,
    nullptr,
    "Beam search: end as soon as W hypotheses are finished"};

// Speculative decoding (issue 34): how replies decode, never which tokens. The default is lookup
// because it costs next to nothing where nothing is guessed and gains wherever text repeats; the
// measurements are in docs/performance.md, section "Speculative decoding".
inline constexpr RunOptionSpec kSpeculate{
    "speculate",
    nullptr,
    RunOptionKind::kChoice,
    0,
    0,
    false,
    {"off", "lookup", "draft"},
    0,
    "lookup",
    nullptr,
    "Speculative decoding: off, lookup (tokens proposed from earlier n-grams of the prompt and "
    "reply) or draft (proposed by --draft-model), verified in the same step; the tokens are "
    "exactly those of off"};
inline constexpr RunOptionSpec kSpeculateK{"speculate-k",
                                           nullptr,
                                           RunOptionKind::kCount,
                                           1,
                                           kMaxSpeculateK,
                                           false,
                                           {},
                                           8,
                                           nullptr,
                                           nullptr,
                                           "Speculative decoding: most tokens proposed per step"};
inline constexpr RunOptionSpec kLookupNgram{
    "lookup-ngram",
    nullptr,
    RunOptionKind::kCount,
    1,
    kMaxLookupNgram,
    false,
    {},
    3,
    nullptr,
    nullptr,
    "Prompt lookup: the longest n-gram ending the text that is looked up earlier"};

}  // namespace run_option

// Every option above, in the order help and messages list them.
const std::vector<const RunOptionSpec*>& RunOptions();
// The option named `name` (RunOptionSpec::name), or nullptr.
const RunOptionSpec* FindRunOption(const std::string& name);
// A number as the messages and headers write it: the shortest text that reads back as the same
// float for kNumber, the whole number for kCount.
std::string FormatRunNumber(double v);

}  // namespace wc
