#include "model/tokenizer.h"

#include "model/sentencepiece_tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {

std::unique_ptr<Tokenizer> Tokenizer::FromModelDir(const std::string& dir) {
  const std::string path = JoinPath(dir, "tokenizer.model");
  const std::string problem = FileProblem(path);
  if (!problem.empty() && problem != "missing") throw Error(Cat(path, ": ", problem));
  if (!problem.empty())
    throw Error(Cat(path,
                    ": missing; wormchat needs a sentencepiece tokenizer.model beside "
                    "config.json for text input and output (or run on token ids: --ids of "
                    "generate, logits, chat, batch and transcript record)"));
  return std::make_unique<SentencePieceTokenizer>(path);
}

std::string Tokenizer::Decode(const std::vector<int>& ids) const {
  std::string out;
  for (int id : ids) out += TokenBytes(id);
  return out;
}

}  // namespace wc
