#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/hf_normalizer.h"
#include "tokenizer/hf_pre_tokenizer.h"
#include "tokenizer/hf_regex.h"
#include "tokenizer/unicode.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

// The last / first char of `s` (valid UTF-8, non-empty).
char32_t LastChar(std::string_view s) {
  size_t start = unicode::PrevCharStart(s, s.size());
  return unicode::Next(s, &start);
}
char32_t FirstChar(std::string_view s) {
  size_t p = 0;
  return unicode::Next(s, &p);
}

// Rust regex's \w (Unicode word char), through the same class HfRegex gives \w.
bool IsWordChar(char32_t c) {
  static const HfRegex word(R"(\A\w\z)", "\\w");
  std::string s;
  unicode::Append(c, &s);
  return !word.FindAll(s).empty();
}

}  // namespace

HfTokenizer::HfTokenizer(const std::string& path) : path_(path) {
  const std::string problem = FileProblem(path);
  if (!problem.empty()) throw Error(Cat(path, ": ", problem));
  Load(ReadTextFile(path, kMaxFileBytes));
}

HfTokenizer::HfTokenizer(std::string_view json_text, const std::string& path) : path_(path) {
  if (static_cast<int64_t>(json_text.size()) > kMaxFileBytes)
    throw Error(Cat(path, ": larger than ", kMaxFileBytes >> 20, " MB"));
  Load(json_text);
}

HfTokenizer::~HfTokenizer() = default;

void HfTokenizer::Load(std::string_view json_text) {
  const nlohmann::json j = ParseJson(json_text, path_);
  if (!j.is_object()) throw Error(Cat(path_, ": expected a JSON object"));
  const std::string key = Cat(path_, ": key 'model'");
  if (!j.contains("model") || !j["model"].is_object())
    throw Error(Cat(key, " must be an object (the tokenizer's model)"));
  const nlohmann::json& model = j["model"];
  const auto type = JsonFind<std::string>(model, "type", key);
  if (type ? *type != "BPE" : !model.contains("merges"))
    throw Error(Cat(key, ": model type \"", Printable(type.value_or("(none)"), 40),
                    "\" is not supported (wormchat reads BPE tokenizer.json files; sentencepiece "
                    "models go in tokenizer.model)"));
  model_ = std::make_unique<BpeModel>(model, key);
  if (j.contains("normalizer") && !j["normalizer"].is_null())
    normalizer_ = HfNormalizer::FromJson(j["normalizer"], Cat(path_, ": key 'normalizer'"));
  if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null())
    pre_tokenizer_ =
        HfPreTokenizer::FromJson(j["pre_tokenizer"], Cat(path_, ": key 'pre_tokenizer'"));
  LoadAddedTokens(j);
  if (j.contains("decoder") && !j["decoder"].is_null()) LoadDecoder(j["decoder"]);
  if (j.contains("post_processor") && !j["post_processor"].is_null())
    LoadPostProcessor(j["post_processor"], Cat(path_, ": key 'post_processor'"));

  size_t count = model_->tokens().size();
  for (const AddedToken& t : added_) count = std::max(count, static_cast<size_t>(t.id) + 1);
  token_bytes_.assign(count, std::string());
  for (size_t id = 0; id < model_->tokens().size(); ++id)
    if (!model_->tokens()[id].empty()) token_bytes_[id] = DecodeToken(model_->tokens()[id]);
  for (const AddedToken& t : added_)
    token_bytes_[static_cast<size_t>(t.id)] = t.special ? std::string() : DecodeToken(t.content);
}

void HfTokenizer::LoadAddedTokens(const nlohmann::json& j) {
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return;
  const std::string key = Cat(path_, ": key 'added_tokens'");
  if (!j["added_tokens"].is_array()) throw Error(Cat(key, " must be an array"));
  // Ids as HF assigns them on load (AddedVocabulary::add_tokens), whatever the file's "id" says:
  // an earlier added token's, else the model's, else the next id past the model's vocabulary, in
  // file order. Real files agree with this; HF only warns when they do not.
  int next_id = static_cast<int>(model_->vocab().size());
  std::unordered_map<std::string, int> ids;
  for (size_t i = 0; i < j["added_tokens"].size(); ++i) {
    const nlohmann::json& t = j["added_tokens"][i];
    const std::string what = Cat(key, "[", i, "]");
    AddedToken a;
    a.content = JsonGet<std::string>(t, "content", what);
    if (a.content.empty()) continue;  // HF ignores these
    if (!unicode::IsValidUtf8(a.content))
      throw Error(Cat(what, ": key 'content' is not valid UTF-8"));
    if (auto id = JsonFind<int64_t>(t, "id", what); id && (*id < 0 || *id >= (1 << 24)))
      throw Error(Cat(what, ": id ", *id, " is outside [0, 16777216)"));
    if (auto it = ids.find(a.content); it != ids.end()) {
      a.id = it->second;
    } else if (auto v = model_->vocab().find(a.content); v != model_->vocab().end()) {
      a.id = v->second;
    } else {
      a.id = next_id++;
    }
    ids.emplace(a.content, a.id);
    a.single_word = JsonFind<bool>(t, "single_word", what).value_or(false);
    a.lstrip = JsonFind<bool>(t, "lstrip", what).value_or(false);
    a.rstrip = JsonFind<bool>(t, "rstrip", what).value_or(false);
    a.special = JsonFind<bool>(t, "special", what).value_or(false);
    a.normalized = JsonFind<bool>(t, "normalized", what).value_or(!a.special);
    // A normalized token is matched, and decoded, in its normalized form (HF's normalized_cache).
    if (a.normalized && normalizer_) normalizer_->Apply(&a.content);
    added_.push_back(std::move(a));
  }
  for (size_t i = 0; i < added_.size(); ++i) {
    const AddedToken& a = added_[i];
    if (a.content.empty()) continue;
    const auto first = static_cast<unsigned char>(a.content[0]);
    added_by_byte_[a.normalized ? 1 : 0][first].push_back(static_cast<int>(i));
  }
  for (auto& table : added_by_byte_)
    for (auto& list : table)
      std::stable_sort(list.begin(), list.end(), [&](int x, int y) {
        return added_[static_cast<size_t>(x)].content.size() >
               added_[static_cast<size_t>(y)].content.size();
      });
}

void HfTokenizer::LoadDecoder(const nlohmann::json& d) {
  const std::string what = Cat(path_, ": key 'decoder'");
  std::vector<const nlohmann::json*> steps;
  if (!d.is_object()) throw Error(Cat(what, " must be an object or null"));
  if (JsonGet<std::string>(d, "type", what) == "Sequence") {
    if (!d.contains("decoders") || !d["decoders"].is_array())
      throw Error(Cat(what, " (Sequence): key 'decoders' must be an array"));
    for (const auto& s : d["decoders"]) steps.push_back(&s);
  } else {
    steps.push_back(&d);
  }
  for (const nlohmann::json* s : steps) {
    if (!s->is_object()) throw Error(Cat(what, ": every decoder must be an object"));
    const std::string type = JsonGet<std::string>(*s, "type", what);
    const std::string here = Cat(what, " (", type, ")");
    if (type == "ByteLevel") {
      decoder_.push_back({DecoderKind::kByteLevel, "", ""});
    } else if (type == "ByteFallback") {
      decoder_.push_back({DecoderKind::kByteFallback, "", ""});
    } else if (type == "Fuse" || type == "Strip") {
      // Fuse joins the tokens and Strip then trims the start of the whole text: neither changes
      // a token's own bytes in a stream.
    } else if (type == "Replace") {
      const nlohmann::json& pat = s->contains("pattern") ? (*s)["pattern"] : nlohmann::json();
      if (!pat.is_object() || !pat.contains("String") || !pat["String"].is_string())
        throw Error(Cat(here, ": only a {\"String\": ...} pattern is supported"));
      decoder_.push_back({DecoderKind::kReplace, pat["String"].get<std::string>(),
                          JsonGet<std::string>(*s, "content", here)});
    } else if (type == "BPEDecoder") {
      // The suffix ends a word: a space after it (HF drops the very last one; a stream cannot
      // know which token is last).
      decoder_.push_back(
          {DecoderKind::kReplace, JsonFind<std::string>(*s, "suffix", here).value_or("</w>"), " "});
    } else if (type == "Metaspace") {
      decoder_.push_back({DecoderKind::kMetaspace,
                          JsonFind<std::string>(*s, "replacement", here).value_or("\xE2\x96\x81"),
                          " "});
    } else {
      throw Error(Cat(what, ": decoder type \"", Printable(type, 40),
                      "\" is not supported (supported: ByteLevel, ByteFallback, Fuse, Strip, "
                      "Replace, Metaspace, BPEDecoder, Sequence)"));
    }
  }
}

void HfTokenizer::LoadPostProcessor(const nlohmann::json& p, const std::string& what) {
  if (!p.is_object()) throw Error(Cat(what, " must be an object or null"));
  const std::string type = JsonGet<std::string>(p, "type", what);
  const std::string here = Cat(what, " (", type, ")");
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    if (!p.contains("processors") || !p["processors"].is_array())
      throw Error(Cat(here, ": key 'processors' must be an array"));
    for (size_t i = 0; i < p["processors"].size(); ++i)
      LoadPostProcessor(p["processors"][i], Cat(what, ".processors[", i, "]"));
    return;
  }
  auto id_of = [&](const std::string& token, const std::string& where) {
    const int id = TokenId(token);
    if (id < 0)
      throw Error(Cat(where, ": token \"", Printable(token, 40), "\" is not in the vocabulary"));
    return id;
  };
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* k : {"cls", "sep"}) {
      if (!p.contains(k) || !p[k].is_array() || p[k].size() != 2 || !p[k][0].is_string())
        throw Error(Cat(here, ": key '", k, "' must be [token, id]"));
      (std::string(k) == "cls" ? bos_id_ : eos_id_) =
          JsonAs<int>(p[k][1], Cat(here, ": key '", k, "'[1]"));
    }
    return;
  }
  if (type == "TemplateProcessing") {
    if (!p.contains("single") || !p["single"].is_array())
      throw Error(Cat(here, ": key 'single' must be an array"));
    bool seen_a = false;
    for (const auto& piece : p["single"]) {
      if (piece.contains("Sequence")) {
        seen_a = true;
        continue;
      }
      if (!piece.contains("SpecialToken"))
        throw Error(Cat(here, ": key 'single' holds ", JsonSnippet(piece)));
      const std::string name = JsonGet<std::string>(piece["SpecialToken"], "id", here);
      int id = -1;
      if (p.contains("special_tokens") && p["special_tokens"].contains(name)) {
        const auto ids = JsonFind<std::vector<int64_t>>(p["special_tokens"][name], "ids", here);
        if (ids && ids->size() == 1) id = static_cast<int>((*ids)[0]);
      }
      if (id < 0) id = id_of(name, here);
      (seen_a ? eos_id_ : bos_id_) = id;
    }
    return;
  }
  throw Error(Cat(what, ": post_processor type \"", Printable(type, 40),
                  "\" is not supported (supported: ByteLevel, TemplateProcessing, "
                  "RobertaProcessing, BertProcessing, Sequence)"));
}

int HfTokenizer::TokenId(const std::string& content) const {
  for (const AddedToken& a : added_)
    if (a.content == content) return a.id;
  const auto it = model_->vocab().find(content);
  return it == model_->vocab().end() ? -1 : it->second;
}

std::string HfTokenizer::DecodeToken(const std::string& token) const {
  std::string t = token;
  for (const DecoderStep& s : decoder_) {
    switch (s.kind) {
      case DecoderKind::kByteLevel: {
        std::string bytes;
        if (byte_level::Decode(t, &bytes)) t = std::move(bytes);
        break;
      }
      case DecoderKind::kByteFallback:
        if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
            std::isxdigit(static_cast<unsigned char>(t[3])) &&
            std::isxdigit(static_cast<unsigned char>(t[4])))
          t = std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
        break;
      case DecoderKind::kReplace:
      case DecoderKind::kMetaspace: {
        if (s.from.empty()) break;
        std::string out;
        for (size_t p = 0;;) {
          const size_t hit = t.find(s.from, p);
          out.append(t, p, hit == std::string::npos ? std::string::npos : hit - p);
          if (hit == std::string::npos) break;
          out += s.to;
          p = hit + s.from.size();
        }
        t = std::move(out);
        break;
      }
    }
  }
  return t;
}

void HfTokenizer::SplitAddedTokens(const std::string& text, bool normalized,
                                   std::vector<Segment>* out) const {
  const auto& table = added_by_byte_[normalized ? 1 : 0];
  size_t start_offset = 0;
  for (size_t i = 0; i < text.size();) {
    // Leftmost-longest: the longest added token starting at the first position where one does.
    const AddedToken* hit = nullptr;
    for (int k : table[static_cast<unsigned char>(text[i])]) {
      const AddedToken& a = added_[static_cast<size_t>(k)];
      if (text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + hit->content.size();
    i = stop;  // matches never overlap, even a discarded one (HF's leftmost_find_iter)
    if (hit->single_word) {
      const bool start_space =
          start == 0 || !IsWordChar(LastChar(std::string_view(text).substr(0, start)));
      const bool stop_space =
          stop == text.size() || !IsWordChar(FirstChar(std::string_view(text).substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (hit->lstrip) {
      size_t s = start;
      while (s > start_offset) {
        const size_t c = unicode::PrevCharStart(text, s);
        size_t q = c;
        if (!unicode::IsWhitespace(unicode::Next(text, &q))) break;
        s = c;
      }
      start = s;
    }
    if (hit->rstrip) {
      while (stop < text.size()) {
        size_t q = stop;
        if (!unicode::IsWhitespace(unicode::Next(text, &q))) break;
        stop = q;
      }
      i = stop;
    }
    if (start_offset < start) out->push_back({text.substr(start_offset, start - start_offset), -1});
    out->push_back({std::string(), hit->id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out->push_back({text.substr(start_offset), -1});
}

std::vector<int> HfTokenizer::Encode(const std::string& raw) const {
  const std::string text = unicode::ToValidUtf8(raw);
  std::vector<Segment> first, segments;
  SplitAddedTokens(text, /*normalized=*/false, &first);
  for (Segment& s : first) {
    if (s.id >= 0) {
      segments.push_back(std::move(s));
      continue;
    }
    if (normalizer_) normalizer_->Apply(&s.text);
    SplitAddedTokens(s.text, /*normalized=*/true, &segments);
  }
  std::vector<int> ids;
  std::unordered_map<std::string, std::vector<int>> cache;  // piece -> ids, for this call
  std::vector<std::string> pieces;
  for (const Segment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    pieces.assign(1, s.text);
    if (pre_tokenizer_) pre_tokenizer_->Apply(&pieces);
    for (const std::string& piece : pieces) {
      if (piece.empty()) continue;
      auto it = cache.find(piece);
      if (it == cache.end()) {
        std::vector<int> piece_ids;
        model_->Tokenize(piece, &piece_ids);
        it = cache.emplace(piece, std::move(piece_ids)).first;
      }
      ids.insert(ids.end(), it->second.begin(), it->second.end());
    }
  }
  return ids;
}

std::string_view HfTokenizer::TokenBytes(int id) const {
  if (id < 0 || id >= piece_count()) return {};
  return token_bytes_[static_cast<size_t>(id)];
}

}  // namespace wc
