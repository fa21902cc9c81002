#include "tokenizer/gguf_tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <set>

#include "tokenizer/byte_level.h"
#include "tokenizer/llama_spm.h"
#include "tokenizer/llama_unicode.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc {
namespace {

// llama.h's llama_token_attr bits.
constexpr uint32_t kAttrUnknown = 1u << 0;
constexpr uint32_t kAttrUnused = 1u << 1;
constexpr uint32_t kAttrNormal = 1u << 2;
constexpr uint32_t kAttrControl = 1u << 3;
constexpr uint32_t kAttrUserDefined = 1u << 4;
constexpr uint32_t kAttrByte = 1u << 5;
constexpr uint32_t kAttrLstrip = 1u << 7;
constexpr uint32_t kAttrRstrip = 1u << 8;

uint32_t AttrOfType(int32_t type) {
  switch (static_cast<GgufTokenType>(type)) {
    case GgufTokenType::kNormal:
      return kAttrNormal;
    case GgufTokenType::kUnknown:
      return kAttrUnknown;
    case GgufTokenType::kControl:
      return kAttrControl;
    case GgufTokenType::kUserDefined:
      return kAttrUserDefined;
    case GgufTokenType::kUnused:
      return kAttrUnused;
    case GgufTokenType::kByte:
      return kAttrByte;
    default:
      return 0;
  }
}

// The texts llama.cpp's loader looks for when a vocabulary names no id for the role
// (llama-vocab.cpp load, b6673): the token found becomes the role's id and a control token.
const std::vector<std::string> kEotTexts = {"<|eot_id|>",
                                            "<|im_end|>",
                                            "<|end|>",
                                            "<end_of_turn>",
                                            "<|endoftext|>",
                                            "<EOT>",
                                            "_<EOT>",
                                            "<\xEF\xBD\x9C"
                                            "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                            "<end_of_utterance>"};
const std::vector<std::string> kEomTexts = {"<|eom_id|>"};
const std::vector<std::string> kFimPreTexts = {"<|fim_prefix|>",
                                               "<fim-prefix>",
                                               "<fim_prefix>",
                                               "<\xEF\xBD\x9C"
                                               "fim\xE2\x96\x81"
                                               "begin\xEF\xBD\x9C>",
                                               "<PRE>",
                                               "\xE2\x96\x81<PRE>",
                                               "<|code_prefix|>"};
const std::vector<std::string> kFimSufTexts = {"<|fim_suffix|>",
                                               "<fim-suffix>",
                                               "<fim_suffix>",
                                               "<\xEF\xBD\x9C"
                                               "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                                               "<SUF>",
                                               "\xE2\x96\x81<SUF>",
                                               "<|code_suffix|>"};
const std::vector<std::string> kFimMidTexts = {"<|fim_middle|>",
                                               "<fim-middle>",
                                               "<fim_middle>",
                                               "<\xEF\xBD\x9C"
                                               "fim\xE2\x96\x81"
                                               "end\xEF\xBD\x9C>",
                                               "<MID>",
                                               "\xE2\x96\x81<MID>",
                                               "<|code_middle|>"};
const std::vector<std::string> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"};
const std::vector<std::string> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                               "<REPO>", "<reponame>"};
const std::vector<std::string> kFimSepTexts = {"<|file_sep|>"};
// Every token with one of these texts ends generation and becomes a control token.
const std::vector<std::string> kEogTexts = {
    "<|eot_id|>", "<|im_end|>",    "<|end|>",         "<|return|>",
    "<|call|>",   "<end_of_turn>", "<|endoftext|>",   "<|eom_id|>",
    "<EOT>",      "_<EOT>",        "<|end_of_text|>", "<end_of_utterance>"};
// gpt-oss's tokens llama.cpp always renders.
const std::vector<std::string> kUserDefinedTexts = {"<|channel|>", "<|message|>", "<|start|>",
                                                    "<|constrain|>"};

bool OneOf(const std::string& s, const std::vector<std::string>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

// GPT-2's byte-level alphabet read back: char -> byte, -1 for a char outside it.
int ByteOfChar(char32_t c) {
  static const std::array<int, 0x144> table = [] {
    std::array<int, 0x144> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) {
      const std::string enc = byte_level::Encode(std::string(1, static_cast<char>(b)));
      t[llama_unicode::Codepoints(enc).at(0)] = b;
    }
    return t;
  }();
  return c < table.size() ? table[c] : -1;
}

// llama_decode_text: a byte-level token's bytes; a char outside the alphabet writes
// "[UNK_BYTE_0x<its UTF-8 in hex><the whole token>]". False for a code point past U+10FFFF.
bool DecodeByteLevel(const std::string& text, std::string* out) {
  for (char32_t c : llama_unicode::Codepoints(text)) {
    const int b = ByteOfChar(c);
    if (b >= 0) {
      out->push_back(static_cast<char>(b));
      continue;
    }
    std::string utf8;
    if (!llama_unicode::AppendUtf8(c, &utf8)) return false;
    *out += "[UNK_BYTE_0x";
    for (unsigned char u : utf8) {
      constexpr char kHex[] = "0123456789abcdef";
      out->push_back(kHex[u >> 4]);
      out->push_back(kHex[u & 15]);
    }
    *out += text + "]";
  }
  return true;
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size())
    s.replace(p, from.size(), to);
  return s;
}

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SPM's space

}  // namespace

GgufRoles FindGgufRoles(const GgufVocab& v) {
  GgufRoles r;
  const std::vector<std::string>& texts = v.tokens;
  const size_t n = texts.size();
  const bool spm = v.model == GgufVocab::Model::kSpm;
  const int eos = v.eos_id ? *v.eos_id : (spm ? 2 : 11);  // the model's default, then the key
  r.eos = eos >= 0 && static_cast<size_t>(eos) < n ? eos : -1;

  std::set<int> control;
  // A role's id: the key's, else the lowest id with one of its texts (made a control token).
  auto find_role = [&](const std::optional<int>& given, const std::vector<std::string>& role) {
    if (given) return *given;
    for (size_t i = 0; i < n; ++i) {
      if (!OneOf(texts[i], role)) continue;
      control.insert(static_cast<int>(i));
      return static_cast<int>(i);
    }
    return -1;
  };
  r.eot = find_role(v.eot_id, kEotTexts);
  r.eom = find_role(v.eom_id, kEomTexts);
  r.fim_pre = find_role(v.fim_pre_id, kFimPreTexts);
  r.fim_suf = find_role(v.fim_suf_id, kFimSufTexts);
  r.fim_mid = find_role(v.fim_mid_id, kFimMidTexts);
  r.fim_pad = find_role(v.fim_pad_id, kFimPadTexts);
  r.fim_rep = find_role(v.fim_rep_id, kFimRepTexts);
  r.fim_sep = find_role(v.fim_sep_id, kFimSepTexts);

  std::set<int> eog;
  for (int id : {r.fim_pad, r.fim_rep, r.fim_sep, r.eos, r.eot, r.eom})
    if (id >= 0) eog.insert(id);
  for (size_t i = 0; i < n; ++i) {
    if (OneOf(texts[i], kEogTexts)) {
      eog.insert(static_cast<int>(i));
      control.insert(static_cast<int>(i));
    }
    if (OneOf(texts[i], kUserDefinedTexts)) r.user_defined.push_back(static_cast<int>(i));
  }
  // gpt-oss: <|end|> ends a message, not the generation, when <|return|> and <|call|> do.
  bool has_return = false, has_call = false;
  int end_id = -1;
  for (int id : eog) {
    if (static_cast<size_t>(id) >= n) continue;
    const std::string& t = texts[static_cast<size_t>(id)];
    has_return = has_return || t == "<|return|>";
    has_call = has_call || t == "<|call|>";
    if (t == "<|end|>") end_id = id;
  }
  if (has_return && has_call && end_id >= 0) {
    eog.erase(end_id);
    r.demoted_end = end_id;
  }
  r.control.assign(control.begin(), control.end());
  r.eog.assign(eog.begin(), eog.end());
  return r;
}

GgufTokenizer::GgufTokenizer(GgufVocab v) : source_(v.source), model_(v.model) {
  const std::string& src = source_;
  const bool spm = model_ == GgufVocab::Model::kSpm;
  const size_t n = v.tokens.size();
  if (n == 0) throw Error(Cat(src, ": key 'tokenizer.ggml.tokens' is an empty array"));
  // The model's defaults, then the pre type's, then the keys (llama.cpp's order).
  int bos = spm ? 1 : 11, eos = spm ? 2 : 11;
  add_bos_ = spm;
  add_space_prefix_ = spm;
  if (!spm) {
    std::string why;
    const std::optional<LlamaPre> pre = FindLlamaPre(v.pre, &why);
    if (!pre) {
      if (why == "unknown")
        throw Error(Cat(src, ": key 'tokenizer.ggml.pre' is \"", Printable(v.pre, 40),
                        "\", a pre-tokenizer llama.cpp does not know (wormchat builds: ",
                        LlamaPreNames(), ")"));
      throw Error(Cat(src, ": key 'tokenizer.ggml.pre' is \"", v.pre,
                      "\", a pre-tokenizer wormchat does not build yet (it builds: ",
                      LlamaPreNames(), "); run on token ids: --ids"));
    }
    pre_ = *pre;
    add_bos_ = pre_.add_bos;
  }
  if (v.add_space_prefix) add_space_prefix_ = *v.add_space_prefix;
  if (!v.scores.empty() && v.scores.size() != n)
    throw Error(Cat(src, ": key 'tokenizer.ggml.scores' has ", v.scores.size(),
                    " elements but tokenizer.ggml.tokens has ", n));
  if (!v.types.empty() && v.types.size() != n)
    throw Error(Cat(src, ": key 'tokenizer.ggml.token_type' has ", v.types.size(),
                    " elements but tokenizer.ggml.tokens has ", n));
  const GgufRoles roles = FindGgufRoles(v);
  texts_ = std::move(v.tokens);
  scores_ = v.scores.empty() ? std::vector<float>(n, 0.0f) : std::move(v.scores);
  attrs_.resize(n);
  ids_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (texts_[i].empty()) texts_[i] = Cat("[EMPTY_", i, "]");
    if (!ids_.emplace(texts_[i], static_cast<int>(i)).second)
      throw Error(Cat(src, ": key 'tokenizer.ggml.tokens' lists \"", Printable(texts_[i], 40),
                      "\" twice (ids ", ids_.at(texts_[i]), " and ", i,
                      "); llama.cpp refuses such a vocabulary too"));
    attrs_[i] = v.types.empty() ? kAttrNormal : AttrOfType(v.types[i]);
  }
  if (v.bos_id) bos = *v.bos_id;
  if (v.eos_id) eos = *v.eos_id;
  if (v.add_bos) add_bos_ = *v.add_bos;
  if (v.add_eos) add_eos_ = *v.add_eos;
  const auto in_range = [&](int id) { return id >= 0 && static_cast<size_t>(id) < n; };
  bos_id_ = in_range(bos) ? bos : -1;
  eos_id_ = in_range(eos) ? eos : -1;
  if (add_bos_ && bos_id_ < 0)
    throw Error(Cat(src,
                    ": key 'tokenizer.ggml.bos_token_id' is missing, and the vocabulary adds "
                    "a BOS whose default id ",
                    bos, " is outside its ", n, " tokens"));
  if (add_eos_ && eos_id_ < 0)
    throw Error(Cat(src,
                    ": key 'tokenizer.ggml.eos_token_id' is missing, and the vocabulary adds "
                    "an EOS whose default id ",
                    eos, " is outside its ", n, " tokens"));

  // Roles found by text where the file names no id, each made a control token; the EOG set.
  for (int id : roles.control)
    if (!(attrs_[static_cast<size_t>(id)] & kAttrControl))
      attrs_[static_cast<size_t>(id)] = kAttrControl;
  for (int id : roles.user_defined) attrs_[static_cast<size_t>(id)] = kAttrUserDefined;
  if (roles.demoted_end >= 0) attrs_[static_cast<size_t>(roles.demoted_end)] = kAttrUserDefined;
  eot_id_ = roles.eot;
  eog_ids_ = roles.eog;

  // The special tokens, longest text first (ids ascending among equal lengths).
  std::vector<int> special;
  for (size_t i = 0; i < n; ++i)
    if (attrs_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      special.push_back(static_cast<int>(i));
  std::stable_sort(special.begin(), special.end(), [&](int a, int b) {
    return texts_[static_cast<size_t>(a)].size() > texts_[static_cast<size_t>(b)].size();
  });
  // llama.cpp's one hard-coded rule for GGUF vocabularies wormchat builds: Phi-3's special tokens
  // eat the whitespace after them, except <unk>, <s> and <|endoftext|> (</s> does).
  std::string name = v.general_name;
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int id : special) attrs_[static_cast<size_t>(id)] |= kAttrRstrip;
    auto set = [&](const char* text, bool on) {
      const auto it = ids_.find(text);
      if (it == ids_.end())
        throw Error(Cat(src, ": key 'general.name' is \"", Printable(v.general_name, 40),
                        "\", and llama.cpp's Phi-3 rules need a token \"", text,
                        "\" that tokenizer.ggml.tokens does not have"));
      uint32_t& a = attrs_[static_cast<size_t>(it->second)];
      a = on ? (a | kAttrRstrip) : (a & ~kAttrRstrip);
    };
    set("</s>", true);
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, false);
  }
  for (int id : special) {
    const uint32_t a = attrs_[static_cast<size_t>(id)];
    specials_.push_back({id, texts_[static_cast<size_t>(id)],
                         (a & (kAttrControl | kAttrUnknown)) != 0, (a & kAttrLstrip) != 0,
                         (a & kAttrRstrip) != 0});
  }
  if (!spm) ranks_ = LlamaBpeRanks(v.merges);

  // Each token's piece, with and without special tokens' text (llama.cpp's token_to_piece).
  pieces_.resize(n);
  bytes_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = attrs_[i];
    const std::string& t = texts_[i];
    std::string piece;
    if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) {
      piece = t;
    } else if (a & kAttrNormal) {
      if (spm) {
        piece = ReplaceAll(t, kSpace, " ");
      } else if (!DecodeByteLevel(t, &piece)) {
        throw Error(Cat(src, ": key 'tokenizer.ggml.tokens': token ", i, " (\"", Printable(t, 40),
                        "\") decodes past U+10FFFF (llama.cpp refuses it too)"));
      }
    } else if ((a & kAttrByte) && spm) {
      if (t.size() < 3)
        throw Error(Cat(src, ": key 'tokenizer.ggml.token_type': token ", i, " (\"",
                        Printable(t, 40), "\") is a byte token but not written <0xNN>"));
      const std::string hex = t.substr(3, 2);
      piece.push_back(static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
    }
    pieces_[i] = piece;
    if (!(a & (kAttrUnknown | kAttrControl))) bytes_[i] = std::move(piece);
  }
}

void GgufTokenizer::EncodeText(std::string_view text, bool prefix_space,
                               std::vector<int>* out) const {
  if (model_ == GgufVocab::Model::kSpm) {
    std::string s = prefix_space ? " " : "";
    s += text;
    s = ReplaceAll(std::move(s), " ", kSpace);
    LlamaSpmEncode({&ids_, &scores_, source_}, s, out);
    return;
  }
  const LlamaBpeVocab vocab{&ids_, &ranks_, pre_.ignore_merges};
  std::vector<std::string> words;
  try {
    words = LlamaPreTokenize(pre_.type, text);
  } catch (const Error& e) {
    throw Error(Cat(source_, ": ", e.what()));
  }
  for (const std::string& w : words) LlamaBpeEncodeWord(vocab, w, out);
}

std::vector<int> GgufTokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int> out;
  if (add_special && add_bos_) out.push_back(bos_id_);
  bool prev_special = true;  // SPM: a first piece, or one after a special token, gets a space
  for (const LlamaFragment& f : PartitionSpecialTokens(text, specials_, parse_special)) {
    if (f.id >= 0) {
      out.push_back(f.id);
      prev_special = true;
      continue;
    }
    EncodeText(text.substr(f.offset, f.length), add_space_prefix_ && prev_special, &out);
    prev_special = false;
  }
  if (add_special && add_eos_) out.push_back(eos_id_);
  return out;
}

std::vector<int> GgufTokenizer::Encode(const std::string& text) const {
  return Encode(text, /*add_special=*/false, /*parse_special=*/true);
}

std::string_view GgufTokenizer::TokenBytes(int id) const {
  if (id < 0 || id >= piece_count()) return {};
  return bytes_[static_cast<size_t>(id)];
}

std::string_view GgufTokenizer::Piece(int id) const {
  if (id < 0 || id >= piece_count()) return {};
  return pieces_[static_cast<size_t>(id)];
}

int GgufTokenizer::TokenId(const std::string& piece) const {
  const auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

}  // namespace wc
