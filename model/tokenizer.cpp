#include "model/tokenizer.h"

#include <sentencepiece_processor.h>

#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {

Tokenizer::Tokenizer(const std::string& path)
    : path_(path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  if (!FileExists(path)) throw Error(Cat(path, ": tokenizer model not found"));
  const auto status = sp_->Load(path);
  if (!status.ok()) throw Error(Cat(path, ": not a sentencepiece model: ", status.ToString()));
  const int n = sp_->GetPieceSize();
  token_bytes_.resize(n);
  for (int id = 0; id < n; ++id) {
    if (sp_->IsControl(id) || sp_->IsUnknown(id)) continue;
    const std::string piece = sp_->IdToPiece(id);
    if (sp_->IsByte(id)) {  // "<0xAB>"
      token_bytes_[id] =
          std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
      continue;
    }
    std::string bytes;
    for (size_t i = 0; i < piece.size();) {
      if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {  // U+2581 "▁"
        bytes += ' ';
        i += 3;
      } else {
        bytes += piece[i++];
      }
    }
    token_bytes_[id] = std::move(bytes);
  }
}

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::FromModelDir(const std::string& dir) {
  const std::string path = JoinPath(dir, "tokenizer.model");
  if (!FileExists(path))
    throw Error(Cat(path,
                    ": missing; wormchat needs a sentencepiece tokenizer.model beside "
                    "config.json for text input and output (or use --ids)"));
  return std::make_unique<Tokenizer>(path);
}

std::vector<int> Tokenizer::Encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw Error(Cat(path_, ": cannot encode text: ", status.ToString()));
  return ids;
}

std::string Tokenizer::Decode(const std::vector<int>& ids) const {
  std::string out;
  for (int id : ids) out += TokenBytes(id);
  return out;
}

int Tokenizer::bos_id() const {
  return sp_->bos_id();
}
int Tokenizer::eos_id() const {
  return sp_->eos_id();
}

const std::string& Tokenizer::TokenBytes(int id) const {
  if (id < 0 || id >= static_cast<int>(token_bytes_.size())) return empty_;
  return token_bytes_[id];
}

}  // namespace wc
