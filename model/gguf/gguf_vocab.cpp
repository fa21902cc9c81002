#include "model/gguf/gguf_vocab.h"

#include "util/error.h"
#include "util/json_file.h"

namespace wc {
namespace {

constexpr const char* kModelKey = "tokenizer.ggml.model";

std::string KeyWhat(const GgufFile& g, const std::string& key) {
  return Cat(g.path(), ": key '", key, "'");
}

std::string TypeOf(const GgufValue& v) {
  if (v.is_array()) return Cat("an array of ", GgufTypeName(static_cast<uint32_t>(v.elem_type)));
  return GgufTypeName(static_cast<uint32_t>(v.type));
}

// The value of `key` when its type (and an array's element type) is the one llama.cpp reads; null
// when absent.
const GgufValue* Typed(const GgufFile& g, const std::string& key, GgufType type, GgufType elem_type,
                       const char* expected) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) return nullptr;
  if (v->type != type || (type == GgufType::kArray && v->elem_type != elem_type))
    throw Error(Cat(KeyWhat(g, key), " is ", TypeOf(*v), ", expected ", expected));
  return v;
}

const GgufValue* Required(const GgufFile& g, const std::string& key, GgufType type,
                          GgufType elem_type, const char* expected) {
  const GgufValue* v = Typed(g, key, type, elem_type, expected);
  if (v == nullptr) throw Error(Cat(KeyWhat(g, key), " is missing"));
  return v;
}

// A special token id: a u32 below the vocabulary's size.
std::optional<int> TokenId(const GgufFile& g, const std::string& name, size_t n_tokens) {
  const std::string key = Cat("tokenizer.ggml.", name);
  const GgufValue* v = Typed(g, key, GgufType::kU32, GgufType::kU8, "u32");
  if (v == nullptr) return std::nullopt;
  if (v->i < 0 || static_cast<uint64_t>(v->i) >= n_tokens)
    throw Error(Cat(KeyWhat(g, key), " is ", v->i, ", outside the ", n_tokens,
                    " tokens of tokenizer.ggml.tokens"));
  return static_cast<int>(v->i);
}

std::optional<bool> Flag(const GgufFile& g, const std::string& name) {
  const GgufValue* v =
      Typed(g, Cat("tokenizer.ggml.", name), GgufType::kBool, GgufType::kU8, "bool");
  if (v == nullptr) return std::nullopt;
  return v->i != 0;
}

void CheckLength(const GgufFile& g, const char* key, size_t n, size_t n_tokens) {
  if (n != n_tokens)
    throw Error(
        Cat(KeyWhat(g, key), " has ", n, " elements but tokenizer.ggml.tokens has ", n_tokens));
}

}  // namespace

bool HasGgufVocab(const GgufFile& g) {
  return g.Find(kModelKey) != nullptr;
}

GgufVocab ReadGgufVocab(const GgufFile& g) {
  GgufVocab v;
  v.source = g.path();
  const std::string model = Required(g, kModelKey, GgufType::kString, GgufType::kU8, "a string")->s;
  if (model == "llama") {
    v.model = GgufVocab::Model::kSpm;
  } else if (model == "gpt2") {
    v.model = GgufVocab::Model::kBpe;
  } else if (model == "no_vocab" || model == "none" || model == "bert" || model == "t5" ||
             model == "rwkv" || model == "plamo2") {
    throw Error(Cat(KeyWhat(g, kModelKey), " is \"", model,
                    "\", a tokenizer wormchat does not build (it builds \"llama\" and \"gpt2\"); "
                    "run on token ids: --ids"));
  } else {
    throw Error(Cat(KeyWhat(g, kModelKey), " is \"", Printable(model, 40),
                    "\", not a tokenizer llama.cpp knows (wormchat builds \"llama\" and "
                    "\"gpt2\")"));
  }
  if (const GgufValue* pre =
          Typed(g, "tokenizer.ggml.pre", GgufType::kString, GgufType::kU8, "a string"))
    v.pre = pre->s;
  v.tokens = Required(g, "tokenizer.ggml.tokens", GgufType::kArray, GgufType::kString,
                      "an array of strings")
                 ->strings;
  const size_t n = v.tokens.size();
  if (n == 0) throw Error(Cat(KeyWhat(g, "tokenizer.ggml.tokens"), " is an empty array"));
  if (n > static_cast<size_t>(INT32_MAX))
    throw Error(Cat(KeyWhat(g, "tokenizer.ggml.tokens"), " has more tokens than int32 ids"));
  if (const GgufValue* s =
          Typed(g, "tokenizer.ggml.scores", GgufType::kArray, GgufType::kF32, "an array of f32")) {
    CheckLength(g, "tokenizer.ggml.scores", s->floats.size(), n);
    v.scores.assign(s->floats.begin(), s->floats.end());
  }
  if (const GgufValue* t = Typed(g, "tokenizer.ggml.token_type", GgufType::kArray, GgufType::kI32,
                                 "an array of i32")) {
    CheckLength(g, "tokenizer.ggml.token_type", t->ints.size(), n);
    v.types.assign(t->ints.begin(), t->ints.end());
  }
  if (v.model == GgufVocab::Model::kBpe) {
    v.merges = Required(g, "tokenizer.ggml.merges", GgufType::kArray, GgufType::kString,
                        "an array of strings")
                   ->strings;
  }
  v.bos_id = TokenId(g, "bos_token_id", n);
  v.eos_id = TokenId(g, "eos_token_id", n);
  v.eot_id = TokenId(g, "eot_token_id", n);
  v.eom_id = TokenId(g, "eom_token_id", n);
  v.unk_id = TokenId(g, "unknown_token_id", n);
  v.pad_id = TokenId(g, "padding_token_id", n);
  // seperator/mask ids are read by llama.cpp but do not change what SPM and BPE make of text;
  // their types are still checked as it checks them.
  TokenId(g, "seperator_token_id", n);
  TokenId(g, "mask_token_id", n);
  v.fim_pre_id = TokenId(g, "fim_pre_token_id", n);
  if (!v.fim_pre_id) v.fim_pre_id = TokenId(g, "prefix_token_id", n);
  v.fim_suf_id = TokenId(g, "fim_suf_token_id", n);
  if (!v.fim_suf_id) v.fim_suf_id = TokenId(g, "suffix_token_id", n);
  v.fim_mid_id = TokenId(g, "fim_mid_token_id", n);
  if (!v.fim_mid_id) v.fim_mid_id = TokenId(g, "middle_token_id", n);
  v.fim_pad_id = TokenId(g, "fim_pad_token_id", n);
  v.fim_rep_id = TokenId(g, "fim_rep_token_id", n);
  v.fim_sep_id = TokenId(g, "fim_sep_token_id", n);
  v.add_bos = Flag(g, "add_bos_token");
  v.add_eos = Flag(g, "add_eos_token");
  Flag(g, "add_sep_token");
  v.add_space_prefix = Flag(g, "add_space_prefix");
  if (const GgufValue* name = g.Find("general.name"); name && name->type == GgufType::kString)
    v.general_name = name->s;
  return v;
}

}  // namespace wc
