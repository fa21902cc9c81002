#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <string_view>

#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

// Largest tokenizer.model read (a 256k-piece vocabulary is about 5 MB).
constexpr size_t kTokenizerMaxBytes = size_t{64} << 20;

// Reads a protobuf varint at `pos`; false if the bytes end first or it runs past 10 bytes.
bool ReadVarint(std::string_view s, size_t& pos, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= s.size()) return false;
    const uint8_t b = static_cast<uint8_t>(s[pos++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// Walks the fields of the protobuf message `s`, calling `field(number, bytes)` for each
// length-delimited one. False if the wire format is malformed.
template <typename F>
bool ForEachBytesField(std::string_view s, F field) {
  for (size_t pos = 0; pos < s.size();) {
    uint64_t key, v;
    if (!ReadVarint(s, pos, key)) return false;
    switch (key & 7) {
      case 0:
        if (!ReadVarint(s, pos, v)) return false;
        break;
      case 1:
        if (s.size() - pos < 8) return false;
        pos += 8;
        break;
      case 2:
        if (!ReadVarint(s, pos, v) || v > s.size() - pos) return false;
        field(key >> 3, s.substr(pos, v));
        pos += v;
        break;
      case 5:
        if (s.size() - pos < 4) return false;
        pos += 4;
        break;
      default:
        return false;
    }
  }
  return true;
}

// libsentencepiece (0.1.97) aborts the process - an exception through a noexcept frame - on a
// piece that is empty or holds a NUL byte, so those are refused before it sees the model. Other
// malformations are left to its own checks (it reports them as a status).
void CheckPieces(std::string_view model, const std::string& path) {
  int index = 0;
  ForEachBytesField(model, [&](uint64_t number, std::string_view piece_message) {
    if (number != 1) return;  // ModelProto.pieces = 1
    std::string_view piece;
    ForEachBytesField(piece_message, [&](uint64_t n, std::string_view bytes) {
      if (n == 1) piece = bytes;  // SentencePiece.piece = 1
    });
    if (piece.empty() || piece.find('\0') != std::string_view::npos)
      throw Error(Cat(path, ": piece ", index,
                      " is empty or holds a NUL byte; not a usable "
                      "sentencepiece model"));
    ++index;
  });
}

// The byte a byte-fallback piece "<0xAB>" stands for, or -1.
int PieceByte(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = piece[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path)
    : path_(path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  if (!FileExists(path)) throw Error(Cat(path, ": tokenizer model not found"));
  const std::string model = ReadTextFile(path, static_cast<int64_t>(kTokenizerMaxBytes));
  CheckPieces(model, path);
  const auto status = sp_->LoadFromSerializedProto(model);
  if (!status.ok())
    throw Error(Cat(path, ": not a sentencepiece model: ", Printable(status.ToString(), 200)));
  const int n = sp_->GetPieceSize();
  token_bytes_.resize(n);
  for (int id = 0; id < n; ++id) {
    if (sp_->IsControl(id) || sp_->IsUnknown(id)) continue;
    const std::string piece = sp_->IdToPiece(id);
    if (sp_->IsByte(id)) {  // "<0xAB>"
      const int byte = PieceByte(piece);
      if (byte >= 0) token_bytes_[id] = std::string(1, static_cast<char>(byte));
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

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int> SentencePieceTokenizer::Encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok())
    throw Error(Cat(path_, ": cannot encode text: ", Printable(status.ToString(), 200)));
  return ids;
}

int SentencePieceTokenizer::bos_id() const {
  return sp_->bos_id();
}
int SentencePieceTokenizer::TokenId(const std::string& piece) const {
  const int id = sp_->PieceToId(piece);  // the unknown piece's id when there is none
  return id >= 0 && id < sp_->GetPieceSize() && sp_->IdToPiece(id) == piece ? id : -1;
}

int SentencePieceTokenizer::eos_id() const {
  return sp_->eos_id();
}

std::string_view SentencePieceTokenizer::TokenBytes(int id) const {
  if (id < 0 || id >= static_cast<int>(token_bytes_.size())) return {};
  return token_bytes_[id];
}

}  // namespace wc
