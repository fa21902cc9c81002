#include "model/model_tokenizer.h"

#include "model/gguf/gguf_config.h"
#include "model/gguf/gguf_vocab.h"
#include "tokenizer/gguf_tokenizer.h"
#include "util/error.h"

namespace wc {

std::unique_ptr<Tokenizer> LoadModelTokenizer(const std::string& path) {
  if (!IsGgufModel(path)) return Tokenizer::FromModelDir(path);
  const std::shared_ptr<const GgufFile> file = OpenGgufFile(path);
  if (!HasGgufVocab(*file))
    throw Error(Cat(path,
                    ": key 'tokenizer.ggml.model' is missing: the file has no tokenizer (run on "
                    "token ids: --ids of generate, logits, chat, batch and transcript record)"));
  return std::make_unique<GgufTokenizer>(ReadGgufVocab(*file));
}

}  // namespace wc
