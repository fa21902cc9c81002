#include "app/speculation.h"

#include "kvcache/kv_cache.h"
#include "model/model_tokenizer.h"
#include "serving/draft_proposer.h"
#include "tokenizer/tokenizer_match.h"
#include "util/error.h"

namespace wc {
namespace {

// Keeps the draft model alive as long as its proposer source.
class LoadedDraft final : public ProposerSource {
 public:
  LoadedDraft(std::unique_ptr<DecoderModel> model, int user_rows, int ctx, KVDType kv, int pieces)
      : model_(std::move(model)), source_(*model_, user_rows, ctx, kv, pieces) {}
  std::unique_ptr<Proposer> Make(int user_row) override { return source_.Make(user_row); }

 private:
  std::unique_ptr<DecoderModel> model_;
  DraftModelSource source_;
};

}  // namespace

void CheckSpeculation(const CLI::App& cmd, SpeculationOptions& s, int beams) {
  const bool mode_given = cmd.count("--speculate") > 0;
  s.given = mode_given || cmd.count("--speculate-k") > 0 || cmd.count("--lookup-ngram") > 0 ||
            cmd.count("--draft-model") > 0;
  ResolveDraftMode(mode_given, s.draft_model, &s.mode);
  if (beams > 0 && s.given && s.RequestK() > 0) throw Error(kBeamsDoNotSpeculate);
}

void ResolveDraftMode(bool mode_given, const std::string& draft_model, std::string* mode) {
  if (!draft_model.empty() && !mode_given) *mode = "draft";
  if (*mode == "draft" && draft_model.empty())
    throw Error("--speculate draft needs --draft-model DIR (the checkpoint that proposes)");
  if (*mode != "draft" && !draft_model.empty())
    throw Error(Cat("--draft-model proposes only with --speculate draft, not --speculate ", *mode));
}

void LoadDraftModel(SpeculationOptions& s, const ModelRunOptions& target_options,
                    const LoadedModel& target, int user_rows) {
  if (s.mode != "draft") return;
  const std::string flag = Cat("--draft-model ", s.draft_model);
  std::unique_ptr<DecoderModel> draft;
  std::unique_ptr<Tokenizer> draft_tokenizer, target_tokenizer;
  try {
    ModelOptions mo;
    mo.matmul_precision = ParseMatmulPrecision(target_options.matmul_precision);
    draft = DecoderModel::Load(s.draft_model, mo);
    draft_tokenizer = LoadModelTokenizer(s.draft_model);
  } catch (const Error& e) {
    throw Error(Cat(flag, ": ", e.what()));
  }
  // The model's tokenizer as loaded; with --ids (or none loaded) its files are read to compare.
  const Tokenizer* target_tok = target_options.ids ? nullptr : target.tokenizer.get();
  if (target_tok == nullptr) {
    try {
      target_tokenizer = LoadModelTokenizer(target.dir);
    } catch (const Error& e) {
      throw Error(Cat(flag, ": the model's tokenizer, to compare with: ", e.what()));
    }
    target_tok = target_tokenizer.get();
  }
  const std::string difference =
      TokenizerDifference(*target_tok, *draft_tokenizer, "the model's", "the draft's");
  if (!difference.empty())
    throw Error(Cat(flag, ": its tokenizer does not give the model's ids: ", difference, " (",
                    target_tok->path(), " and ", draft_tokenizer->path(), ")"));
  const ModelConfig &tc = target.model->config(), &dc = draft->config();
  if (tc.bos_token_id != dc.bos_token_id || tc.eos_token_id != dc.eos_token_id)
    throw Error(Cat(flag, ": config.json's BOS/EOS ids are ", dc.bos_token_id, "/", dc.eos_token_id,
                    ", the model's ", tc.bos_token_id, "/", tc.eos_token_id));
  const int pieces = draft_tokenizer->piece_count();
  if (pieces > dc.vocab_size || pieces > tc.vocab_size)
    throw Error(Cat(flag, ": the tokenizer has ", pieces, " pieces, more than vocab_size (",
                    dc.vocab_size, " in the draft, ", tc.vocab_size, " in the model)"));
  const KVDType kv = ResolveKVDType("auto", draft->weights().matrix_dtype());
  s.source = std::make_shared<LoadedDraft>(std::move(draft), user_rows, target.ctx, kv, pieces);
}

std::string DescribeSpeculation(const SpeculationOptions& s) {
  if (s.RequestK() == 0) return "off";
  if (s.mode == "draft") return Cat("draft model ", s.draft_model, ", k up to ", s.k);
  return Cat("prompt lookup, k up to ", s.k, ", n-grams up to ", s.lookup_ngram);
}

}  // namespace wc
