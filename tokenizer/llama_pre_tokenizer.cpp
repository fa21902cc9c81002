#include "tokenizer/llama_pre_tokenizer.h"

#include <utility>

#include "tokenizer/byte_level.h"
#include "tokenizer/llama_unicode.h"
#include "util/error.h"

namespace wc {
namespace {

using llama_unicode::CptFlags;
using Span = std::pair<size_t, size_t>;  // [begin, end) in code points

// The names of a pre type llama.cpp gives these flags (llama-vocab.cpp's load, b6673).
struct PreName {
  const char* name;
  LlamaPre pre;
};

const std::vector<PreName>& BuiltPreNames() {
  constexpr LlamaPre kLlama3{LlamaPreType::kLlama3, true, true};
  constexpr LlamaPre kLlama3Regex{LlamaPreType::kLlama3, false, false};  // dbrx, smaug-bpe
  constexpr LlamaPre kGpt2{LlamaPreType::kGpt2, false, false};
  constexpr LlamaPre kStarcoder{LlamaPreType::kStarcoder, false, false};
  static const std::vector<PreName> names = {
      {"default", {}},
      {"llama3", kLlama3},
      {"llama-v3", kLlama3},
      {"llama-bpe", kLlama3},
      {"falcon3", kLlama3},
      {"falcon-h1", kLlama3},
      {"pixtral", kLlama3},
      {"midm-2.0", kLlama3},
      {"lfm2", kLlama3},
      {"dbrx", kLlama3Regex},
      {"smaug-bpe", kLlama3Regex},
      {"falcon", {LlamaPreType::kFalcon, false, false}},
      {"gpt-2", kGpt2},
      {"phi-2", kGpt2},
      {"jina-es", kGpt2},
      {"jina-de", kGpt2},
      {"gigachat", kGpt2},
      {"a.x-4.0", kGpt2},
      {"mellum", kGpt2},
      {"exaone4", kGpt2},
      {"mpt", kGpt2},
      {"olmo", kGpt2},
      {"starcoder", kStarcoder},
      {"refact", kStarcoder},
      {"command-r", kStarcoder},
      {"smollm", kStarcoder},
      {"codeshell", kStarcoder},
      {"exaone", kStarcoder},
      {"minerva-7b", kStarcoder},
  };
  return names;
}

// Names llama.cpp knows whose expressions (or extra rules: add_sep, <mask>'s lstrip, no BOS)
// wormchat does not build.
constexpr const char* kOtherPreNames[] = {
    "deepseek-llm", "deepseek-coder", "deepseek-v3", "jina-v2-es",   "jina-v2-de",
    "jina-v1-en",   "jina-v2-code",   "roberta-bpe", "qwen2",        "deepseek-r1-qwen",
    "stablelm2",    "poro-chat",      "glm4",        "chatglm-bpe",  "viking",
    "jais",         "tekken",         "bloom",       "gpt3-finnish", "chameleon",
    "megrez",       "gpt-4o",         "llama4",      "superbpe",     "trillion",
    "bailingmoe",   "llada-moe",      "seed-coder",  "hunyuan",      "hunyuan-dense",
    "kimi-k2",      "grok-2"};

// One pass of a splitter over every piece: `split(b, e, emit)` calls emit(end) for each cut.
template <typename Split>
std::vector<Span> Resplit(const std::vector<Span>& pieces, Split split) {
  std::vector<Span> out;
  out.reserve(pieces.size());
  for (const Span& piece : pieces) {
    size_t prev = piece.first;
    auto emit = [&](size_t end) {
      if (end > prev) out.emplace_back(prev, end);
      prev = end;
    };
    split(piece.first, piece.second, emit);
    emit(piece.second);
  }
  return out;
}

constexpr char32_t kOut = 0xFFFFFFFF;

// unicode.cpp's hand-written splitter for GPT-2's expression
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) (and a trailing \s+).
std::vector<Span> SplitGpt2(const std::vector<char32_t>& c, const std::vector<Span>& pieces) {
  return Resplit(pieces, [&](size_t b, size_t e, auto& emit) {
    auto at = [&](size_t p) { return p < e ? c[p] : kOut; };
    auto fl = [&](size_t p) {
      return p < e ? llama_unicode::Flags(c[p]) : llama_unicode::NoFlags();
    };
    auto other = [](const CptFlags& f) {  // [^\s\p{L}\p{N}] inside the piece
      return !f.none && !f.whitespace && !f.letter() && !f.number();
    };
    for (size_t pos = b; pos < e;) {
      const char32_t ch = c[pos];
      if (ch == '\'' && pos + 1 < e) {
        const char32_t n = c[pos + 1];
        if (n == 's' || n == 't' || n == 'm' || n == 'd') {
          emit(pos += 2);
          continue;
        }
        const char32_t nn = at(pos + 2);
        if ((n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l')) {
          emit(pos += 3);
          continue;
        }
      }
      const CptFlags f2 = ch == ' ' ? fl(pos + 1) : fl(pos);
      if (f2.letter() || f2.number() || other(f2)) {
        const bool letters = f2.letter(), numbers = f2.number();
        pos += ch == ' ' ? 1 : 0;
        for (CptFlags f = fl(pos); letters   ? f.letter()
                                   : numbers ? f.number()
                                             : other(f);
             f = fl(++pos)) {
        }
        emit(pos);
        continue;
      }
      size_t n_ws = 0;
      while (fl(pos + n_ws).whitespace) ++n_ws;
      if (n_ws > 1 && at(pos + n_ws) != kOut) {
        emit(pos += n_ws - 1);
      } else if (n_ws > 0) {
        emit(pos += n_ws);
      } else {
        emit(++pos);
      }
    }
  });
}

// unicode.cpp's hand-written splitter for Llama-3's expression
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
std::vector<Span> SplitLlama3(const std::vector<char32_t>& c, const std::vector<Span>& pieces) {
  return Resplit(pieces, [&](size_t b, size_t e, auto& emit) {
    auto at = [&](size_t p) { return p < e ? c[p] : kOut; };
    auto fl = [&](size_t p) {
      return p < e ? llama_unicode::Flags(c[p]) : llama_unicode::NoFlags();
    };
    auto newline = [](char32_t ch) { return ch == '\r' || ch == '\n'; };
    for (size_t pos = b; pos < e;) {
      const char32_t ch = c[pos];
      const CptFlags f = fl(pos);
      if (ch == '\'' && pos + 1 < e) {
        const char32_t n = llama_unicode::ToLower(c[pos + 1]);
        if (n == 's' || n == 't' || n == 'm' || n == 'd') {
          emit(pos += 2);
          continue;
        }
        if (pos + 2 < e) {
          const char32_t nn = llama_unicode::ToLower(c[pos + 2]);
          if ((n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l')) {
            emit(pos += 3);
            continue;
          }
        }
      }
      if (!newline(ch) && !f.number() && (f.letter() || fl(pos + 1).letter())) {
        ++pos;
        while (fl(pos).letter()) ++pos;
        emit(pos);
        continue;
      }
      if (f.number()) {
        size_t group = pos;
        while (fl(pos).number()) {
          if (++pos - group >= 3) {
            emit(pos);
            group = pos;
          }
        }
        emit(pos);
        continue;
      }
      CptFlags f2 = ch == ' ' ? fl(pos + 1) : f;
      auto other = [](const CptFlags& g) {
        return !g.none && !g.whitespace && !g.letter() && !g.number();
      };
      // llama.cpp tests the space-skipping flags' class but the current code point's presence.
      if (!f2.whitespace && !f2.letter() && !f2.number()) {
        pos += ch == ' ' ? 1 : 0;
        for (f2 = fl(pos); other(f2); f2 = fl(++pos)) {
        }
        while (newline(at(pos))) ++pos;
        emit(pos);
        continue;
      }
      size_t n_ws = 0, last_newline_end = 0;
      while (fl(pos + n_ws).whitespace) {
        if (newline(at(pos + n_ws))) last_newline_end = pos + n_ws + 1;
        ++n_ws;
      }
      if (last_newline_end > 0) {
        emit(pos = last_newline_end);
      } else if (n_ws > 1 && at(pos + n_ws) != kOut) {
        emit(pos += n_ws - 1);
      } else if (n_ws > 0) {
        emit(pos += n_ws);
      } else {
        emit(++pos);
      }
    }
  });
}

// A bracket class of llama.cpp's collapsed std::regex text: ASCII as itself, non-ASCII
// whitespace as \v, other non-ASCII code points as their category's byte.
bool InPunctClass(char32_t ch, bool with_backtick) {
  if (ch < 128)  // [\p{P}\$\+<=>\^~\|`]: every ASCII punctuation or symbol char
    return ch > 0x20 && ch < 0x7F && !(ch >= '0' && ch <= '9') && !(ch >= 'A' && ch <= 'Z') &&
           !(ch >= 'a' && ch <= 'z') && (with_backtick || ch != '`');
  const CptFlags f = llama_unicode::Flags(ch);
  return !f.whitespace && f.category == CptFlags::kPunctuation;
}

bool InNumberClass(char32_t ch) {
  if (ch < 128) return ch >= '0' && ch <= '9';
  const CptFlags f = llama_unicode::Flags(ch);
  return !f.whitespace && f.category == CptFlags::kNumber;
}

// std::regex "[class]+" (runs) or "[class]" (`single`: each member alone): the matches and the
// gaps between them.
template <typename In>
std::vector<Span> SplitClass(const std::vector<char32_t>& c, const std::vector<Span>& pieces, In in,
                             bool single) {
  return Resplit(pieces, [&](size_t b, size_t e, auto& emit) {
    for (size_t pos = b; pos < e;) {
      if (!in(c[pos])) {
        ++pos;
        continue;
      }
      emit(pos);
      ++pos;
      while (!single && pos < e && in(c[pos])) ++pos;
      emit(pos);
    }
  });
}

// std::wregex "[0-9][0-9][0-9]": leftmost triples of ASCII digits.
std::vector<Span> SplitDigitTriples(const std::vector<char32_t>& c,
                                    const std::vector<Span>& pieces) {
  auto digit = [&](size_t p) { return c[p] >= '0' && c[p] <= '9'; };
  return Resplit(pieces, [&](size_t b, size_t e, auto& emit) {
    for (size_t pos = b; pos + 3 <= e;) {
      if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
        emit(pos);
        emit(pos += 3);
      } else {
        ++pos;
      }
    }
  });
}

}  // namespace

std::optional<LlamaPre> FindLlamaPre(const std::string& name, std::string* why) {
  if (name.empty()) return LlamaPre{};
  for (const PreName& p : BuiltPreNames())
    if (name == p.name) return p.pre;
  *why = "unknown";
  for (const char* other : kOtherPreNames)
    if (name == other) *why = "not built";
  return std::nullopt;
}

std::string LlamaPreNames() {
  std::string out;
  for (const PreName& p : BuiltPreNames()) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

std::vector<std::string> LlamaPreTokenize(LlamaPreType type, std::string_view text) {
  const std::vector<char32_t> c = llama_unicode::Codepoints(text);
  std::vector<Span> pieces;
  if (!c.empty()) pieces.emplace_back(0, c.size());
  auto punct = [&](bool backtick) {
    pieces = SplitClass(
        c, pieces, [&](char32_t ch) { return InPunctClass(ch, backtick); }, false);
  };
  switch (type) {
    case LlamaPreType::kDefault:
      punct(false);
      pieces = SplitGpt2(c, pieces);
      pieces = SplitClass(c, pieces, InNumberClass, false);
      pieces = SplitDigitTriples(c, pieces);
      break;
    case LlamaPreType::kFalcon:
      punct(true);
      pieces = SplitGpt2(c, pieces);
      pieces = SplitDigitTriples(c, pieces);
      break;
    case LlamaPreType::kGpt2:
      pieces = SplitGpt2(c, pieces);
      break;
    case LlamaPreType::kStarcoder:
      pieces = SplitClass(c, pieces, InNumberClass, true);
      pieces = SplitGpt2(c, pieces);
      break;
    case LlamaPreType::kLlama3:
      pieces = SplitLlama3(c, pieces);
      break;
  }
  std::vector<std::string> words;
  words.reserve(pieces.size());
  std::string utf8;
  for (const Span& s : pieces) {
    utf8.clear();
    for (size_t i = s.first; i < s.second; ++i)
      if (!llama_unicode::AppendUtf8(c[i], &utf8))
        throw Error(Cat("the text has a byte sequence that decodes past U+10FFFF (code point 0x",
                        std::hex, static_cast<uint32_t>(c[i]), "), which llama.cpp cannot split"));
    words.push_back(byte_level::Encode(utf8));
  }
  return words;
}

}  // namespace wc
