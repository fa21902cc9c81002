#include "tokenizer/tokenizer.h"

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {

std::unique_ptr<Tokenizer> Tokenizer::FromModelDir(const std::string& dir) {
  if (!DirExists(dir) && FileExists(dir))  // a GGUF file's vocabulary: model/model_tokenizer.h
    throw Error(
        Cat(dir, ": a file, not a model directory holding tokenizer.model or tokenizer.json"));
  const std::string sp_path = JoinPath(dir, "tokenizer.model");
  const std::string sp_problem = FileProblem(sp_path);
  if (sp_problem.empty()) return std::make_unique<SentencePieceTokenizer>(sp_path);
  if (sp_problem != "missing") throw Error(Cat(sp_path, ": ", sp_problem));
  const std::string hf_path = JoinPath(dir, "tokenizer.json");
  const std::string hf_problem = FileProblem(hf_path);
  if (hf_problem.empty()) return std::make_unique<HfTokenizer>(hf_path);
  if (hf_problem != "missing") throw Error(Cat(hf_path, ": ", hf_problem));
  throw Error(Cat(sp_path,
                  ": missing, and so is tokenizer.json; wormchat needs one of them beside "
                  "config.json (a sentencepiece tokenizer.model or a Hugging Face tokenizer.json) "
                  "for text input and output (or run on token ids: --ids of generate, logits, "
                  "chat, batch and transcript record)"));
}

std::string Tokenizer::Decode(const std::vector<int>& ids) const {
  std::string out;
  for (int id : ids) out += TokenBytes(id);
  return out;
}

}  // namespace wc
