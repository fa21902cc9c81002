#include "app/transcript/run_header.h"

#include <functional>
#include <map>

#include "attention/flash_decode.h"
#include "kernels/attention/kernel_table.h"
#include "kvcache/kv_cache.h"
#include "kvcache/kv_formats.h"
#include "mesh/wormhole_spec.h"
#include "model/fingerprint.h"
#include "model/weight_spec.h"
#include "util/error.h"
#include "util/parse.h"

namespace wc {
namespace {

const char kDefaultModel[] = "default";
const char kKvKernelsKey[] = "kv-kernels";

// The K/V formats whose attention bits depend on the CPU family (decode_attention.h).
bool KvBitsDependOnTheCpu(KVDType dtype) {
  return dtype == KVDType::kFP8E4M3 || dtype == KVDType::kFP8E5M2 || dtype == KVDType::kBFP8;
}

// Each recorded field: its key, how to write it, how to read it back.
struct Field {
  const char* key;
  std::function<std::string(const ModelRunOptions&, const LoadedModel&)> get;
  std::function<void(ModelRunOptions&, const std::string&)> set;
  // Written only when not `absent`, and `absent` when left out (keys added after the format).
  const char* absent = nullptr;
  // Set: written only when it holds (and then whatever `absent` says).
  std::function<bool(const ModelRunOptions&)> written = nullptr;
};

int ParseInt(const std::string& key, const std::string& value) {
  const std::optional<long long> v = ParseWholeInteger(value);
  if (!v || *v < 0 || *v > 0x7fffffff) throw Error(Cat(key, ": '", value, "' is not a count"));
  return static_cast<int>(*v);
}

// `check` throws wc::Error for a value the flag would refuse, so the header's line is named.
Field Text(const char* key, std::string ModelRunOptions::*member,
           std::function<void(const std::string&)> check) {
  return {key, [member](const ModelRunOptions& o, const LoadedModel&) { return o.*member; },
          [member, check](ModelRunOptions& o, const std::string& v) {
            check(v);
            o.*member = v;
          }};
}

Field Count(const char* key, int ModelRunOptions::*member) {
  return {
      key,
      [member](const ModelRunOptions& o, const LoadedModel&) { return std::to_string(o.*member); },
      [member, key](ModelRunOptions& o, const std::string& v) { o.*member = ParseInt(key, v); }};
}

// A speculation count (speculate-k, lookup-ngram: serving/run_options.h), written only when
// speculation is on.
Field SpeculationCount(const RunOptionSpec& spec, int SpeculationOptions::*member) {
  return {spec.name,
          [member](const ModelRunOptions& o, const LoadedModel&) {
            return std::to_string(o.speculation.*member);
          },
          [member, &spec](ModelRunOptions& o, const std::string& v) {
            o.speculation.*member = static_cast<int>(spec.ParseNumber(v, spec.name));
          },
          nullptr, [](const ModelRunOptions& o) { return o.speculation.RequestK() > 0; }};
}

const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = {
      // The format the run used ("auto" resolved), so the header says what decides the tokens.
      {"kv-dtype",
       [](const ModelRunOptions&, const LoadedModel& m) {
         return std::string(KVDTypeName(m.kv.dtype));
       },
       [](ModelRunOptions& o, const std::string& v) {
         CheckKVDTypeName(v);
         o.kv_dtype = v;
       }},
      Text("kv-scale", &ModelRunOptions::kv_scale, [](const std::string& v) { ParseScaleMode(v); }),
      Count("kv-block-size", &ModelRunOptions::kv_block_size),
      Count("kv-blocks", &ModelRunOptions::kv_blocks),
      {"ctx", [](const ModelRunOptions&, const LoadedModel& m) { return std::to_string(m.ctx); },
       [](ModelRunOptions& o, const std::string& v) { o.ctx = ParseInt("ctx", v); }},
      Count("lm-head-fractures", &ModelRunOptions::lm_head_fractures),
      Text("attention", &ModelRunOptions::attention,
           [](const std::string& v) {
             if (v != "flash" && v != "reference")
               throw Error(Cat("attention: '", v, "' is not flash or reference"));
           }),
      Text("mesh", &ModelRunOptions::mesh, [](const std::string& v) { MeshPreset(v); }),
      Text("reduction", &ModelRunOptions::reduction,
           [](const std::string& v) { ParseReduction(v); }),
      Count("max-cores-per-head", &ModelRunOptions::max_cores_per_head),
      Count("k-chunk-size", &ModelRunOptions::k_chunk_size),
      {"matmul-precision",
       [](const ModelRunOptions& o, const LoadedModel&) { return o.matmul_precision; },
       [](ModelRunOptions& o, const std::string& v) {
         try {
           ParseMatmulPrecision(v);  // the one list of names (app/model_options.cpp)
         } catch (const Error&) {
           throw Error(Cat("matmul-precision: '", v, "' is not bf16, f32, int8, int7 or int16"));
         }
         o.matmul_precision = v;
       },
       "bf16"},
      // Canonical (WeightSpec::ToString); absent in transcripts written before --weights: auto.
      {"weights",
       [](const ModelRunOptions& o, const LoadedModel&) {
         return WeightSpec::Parse(o.weights).ToString();
       },
       [](ModelRunOptions& o, const std::string& v) {
         try {
           o.weights = WeightSpec::Parse(v).ToString();
         } catch (const Error& e) {
           throw Error(Cat("weights: ", e.what()));
         }
       },
       "auto"},
      {"ids", [](const ModelRunOptions& o, const LoadedModel&) { return o.ids ? "true" : "false"; },
       [](ModelRunOptions& o, const std::string& v) {
         if (v != "true" && v != "false") throw Error(Cat("ids: '", v, "' is not true or false"));
         o.ids = v == "true";
       },
       "false"},
      // Speculative decoding (issue 34): how the replies were decoded, never which tokens; replay
      // decodes the same way. Absent in transcripts written before it: off. k and the n-gram
      // length only when it is on.
      {run_option::kSpeculate.name,
       [](const ModelRunOptions& o, const LoadedModel&) { return o.speculation.mode; },
       [](ModelRunOptions& o, const std::string& v) {
         o.speculation.mode = run_option::kSpeculate.ParseChoice(v, run_option::kSpeculate.name);
       },
       "off"},
      // The draft checkpoint of `speculate: draft`, as --draft-model named it.
      {"draft-model",
       [](const ModelRunOptions& o, const LoadedModel&) { return o.speculation.draft_model; },
       [](ModelRunOptions& o, const std::string& v) {
         if (v.empty()) throw Error("draft-model: empty; name the draft checkpoint's directory");
         o.speculation.draft_model = v;
       },
       nullptr, [](const ModelRunOptions& o) { return o.speculation.mode == "draft"; }},
      SpeculationCount(run_option::kSpeculateK, &SpeculationOptions::k),
      SpeculationCount(run_option::kLookupNgram, &SpeculationOptions::lookup_ngram),
      // Not an option but a fact of the recording machine, for the K/V formats whose bits depend
      // on it: which kernels ran (KvKernelsOf). Replay takes no setting from it; a failing replay
      // says when this CPU runs others (KvKernelsNote).
      {kKvKernelsKey, [](const ModelRunOptions&, const LoadedModel& m) { return KvKernelsOf(m); },
       [](ModelRunOptions&, const std::string& v) {
         if (v != "bf16 dot" && v != "f32 FMA")
           throw Error(Cat(kKvKernelsKey, ": '", v, "' is not bf16 dot or f32 FMA"));
       },
       nullptr,
       [](const ModelRunOptions& o) {
         return o.kv_dtype != "auto" && KvBitsDependOnTheCpu(ParseKVDType(o.kv_dtype));
       }},
  };
  return fields;
}

}  // namespace

std::string KvKernelsOf(const LoadedModel& m) {
  if (!KvBitsDependOnTheCpu(m.kv.dtype)) return "";
  RowsRef rows;  // the cache's K rows as the attention table sees them (no data: only the choice)
  rows.format = RowFormatOf(QuantOf(m.kv.dtype));
  rows.cols = m.model->config().head_dim();
  rows.row_scale = HasScale(m.kv.dtype) && m.kv.scale == ScaleMode::kTokenHead;
  return ChooseAttentionKernel(AttentionOp::kScores, rows, 1).family;
}

std::string KvKernelsNote(const Transcript& t, const LoadedModel& m) {
  const std::string here = KvKernelsOf(m);
  if (here.empty()) return "";
  std::string recorded;
  for (const TranscriptOption& entry : t.run)
    if (entry.key == kKvKernelsKey) recorded = entry.value;
  if (recorded == here) return "";
  return Cat("(", KVDTypeName(m.kv.dtype), " K/V's bits depend on the CPU family: this CPU runs ",
             here, " kernels, the recording ",
             recorded.empty() ? "did not say which" : Cat("ran ", recorded),
             "; docs/correctness.md#determinism)");
}

std::vector<TranscriptOption> RunOptionEntries(const ModelRunOptions& o, const LoadedModel& m) {
  std::vector<TranscriptOption> entries;
  for (const Field& f : Fields()) {
    if (f.written && !f.written(o)) continue;
    std::string value = f.get(o, m);
    if (f.absent == nullptr || value != f.absent) entries.push_back({f.key, std::move(value), 0});
  }
  return entries;
}

ModelRunOptions RunOptionsFromTranscript(const Transcript& t) {
  ModelRunOptions o;
  o.model_dir = t.model == kDefaultModel ? "" : t.model;
  std::map<std::string, bool> seen;
  for (const TranscriptOption& entry : t.run) {
    const Field* field = nullptr;
    for (const Field& f : Fields())
      if (entry.key == f.key) field = &f;
    try {
      if (field == nullptr) throw Error(Cat("'", entry.key, ":' is not a transcript header key"));
      field->set(o, entry.value);
    } catch (const Error& e) {
      throw Error(Cat(t.path, ":", entry.line, ": ", e.what()));
    }
    seen[entry.key] = true;
  }
  for (const Field& f : Fields()) {
    if (seen.count(f.key)) continue;
    if (f.absent != nullptr)
      f.set(o, f.absent);  // a key left out means its absent value, whatever the flag's default
    else if (!f.written)
      throw Error(Cat(t.path, ": the header has no '", f.key, ":' line"));
  }
  if (o.speculation.mode == "draft" && o.speculation.draft_model.empty())
    throw Error(Cat(t.path, ": 'speculate: draft' needs a 'draft-model:' line"));
  return o;
}

std::string RunFingerprint(const ModelRunOptions& run, const LoadedModel& m) {
  return ModelFingerprint(m.dir, run.kv_scale == "tensor");
}

Transcript MakeTranscript(const ModelRunOptions& run, const LoadedModel& m,
                          const ConversationSettings& settings,
                          const std::vector<ConversationTurn>& turns,
                          const std::string& fingerprint) {
  Transcript t;
  t.version = WORMCHAT_VERSION;
  t.model = run.model_dir.empty() ? kDefaultModel : run.model_dir;
  t.architecture = m.model->architecture().name;
  t.fingerprint = fingerprint.empty() ? RunFingerprint(run, m) : fingerprint;
  t.model_size = GgufModelSize(m.dir);
  t.run = RunOptionEntries(run, m);
  for (const ConversationTurn& turn : turns)
    if (turn.finished) t.turns.push_back(turn);
  t.settings = t.turns.empty() ? settings : t.turns.front().settings;
  return t;
}

void SaveConversation(const std::string& path, const ModelRunOptions& run, const LoadedModel& m,
                      const Conversation& conversation) {
  WriteTranscriptFile(path, MakeTranscript(run, m, conversation.settings(), conversation.turns()));
}

}  // namespace wc
