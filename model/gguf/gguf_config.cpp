#include "model/gguf/gguf_config.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "model/architecture_ops.h"
#include "model/gguf/gguf_vocab.h"
#include "model/gguf/ollama_store.h"
#include "tokenizer/gguf_tokenizer.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {

namespace L = config_limits;

namespace gguf_keys {

namespace {

void NeedRange(const GgufFile& g, const std::string& key, int64_t v, int64_t min, int64_t max) {
  if (v < min || v > max)
    throw Error(Cat(g.path(), ": key '", key, "' is ", v, ", expected ", min, "..", max));
}

}  // namespace

int64_t Int(const GgufFile& g, const std::string& key, std::optional<int64_t> fallback, int64_t min,
            int64_t max) {
  if (g.Find(key) == nullptr && fallback) return *fallback;
  const int64_t v = g.Int(key);  // names a missing key or a wrong type
  NeedRange(g, key, v, min, max);
  return v;
}

int64_t LayerInt(const GgufFile& g, const std::string& key, std::optional<int64_t> fallback,
                 int64_t n_layers, int64_t min, int64_t max) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr || !v->is_array()) return Int(g, key, fallback, min, max);
  if (v->strings.size() + v->floats.size() > 0 || v->u64_above_int64)
    throw Error(Cat(g.path(), ": key '", key, "' is an array of ",
                    GgufTypeName(static_cast<uint32_t>(v->elem_type)),
                    ", expected an integer or an array of integers"));
  if (static_cast<int64_t>(v->ints.size()) != n_layers)
    throw Error(Cat(g.path(), ": key '", key, "' has ", v->ints.size(), " values for ", n_layers,
                    " layers"));
  for (int64_t x : v->ints) {
    NeedRange(g, key, x, min, max);
    if (x != v->ints[0])
      throw Error(Cat(g.path(), ": key '", key, "' differs between layers (", v->ints[0], " and ",
                      x, "); wormchat runs layers of one shape"));
  }
  return v->ints.at(0);
}

double Float(const GgufFile& g, const std::string& key, std::optional<double> fallback,
             double max) {
  if (g.Find(key) == nullptr && fallback) return *fallback;
  const double v = g.Float(key);
  if (!(v > 0 && v <= max))
    throw Error(Cat(g.path(), ": key '", key, "' is ", v, ", expected a value in (0, ", max, "]"));
  return v;
}

int64_t VocabSize(const GgufFile& g, int64_t hidden) {
  const GgufTensor* t = g.FindTensor("token_embd.weight");
  if (t == nullptr) throw Error(Cat(g.path(), ": tensor 'token_embd.weight' is missing"));
  if (t->ne.size() != 2 || t->ne[0] != hidden)
    throw Error(Cat(g.path(), ": tensor 'token_embd.weight' is ", t->shape(), ", expected [",
                    hidden, ", vocab]"));
  if (t->ne[1] < 1 || t->ne[1] > L::kMaxVocab)
    throw Error(Cat(g.path(), ": tensor 'token_embd.weight' has ", t->ne[1], " rows, expected 1..",
                    L::kMaxVocab));
  return t->ne[1];
}

void TokenIds(const GgufFile& g, nlohmann::json& j) {
  for (const char* id : {"bos", "eos"}) {
    const std::string key = Cat("tokenizer.ggml.", id, "_token_id");
    if (g.Find(key) != nullptr)
      j[Cat(id, "_token_id")] = Int(g, key, std::nullopt, 0, L::kMaxVocab - 1);
  }
}

}  // namespace gguf_keys

bool IsGgufModel(const std::string& path) {
  return !DirExists(path) && FileExists(path) && LooksLikeGguf(path);
}

std::string ModelPath(const std::string& path) {
  if (IsOllamaRef(path)) return OllamaModelPath(path, OllamaStoreRoot());
  if (!DirExists(path) || FileExists(JoinPath(path, "config.json"))) return path;
  std::vector<std::string> ggufs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0 &&
        entry.is_regular_file(ec))
      ggufs.push_back(name);
  }
  if (ggufs.size() == 1) return JoinPath(path, ggufs[0]);
  if (ggufs.size() > 1) {
    std::sort(ggufs.begin(), ggufs.end());
    std::string list;
    for (const std::string& n : ggufs) list += Cat(list.empty() ? "" : ", ", Printable(n));
    throw Error(Cat(path, ": holds ", ggufs.size(), " GGUF files (", list,
                    ") and no config.json; give --model the one to run"));
  }
  return path;
}

ModelConfig ConfigFromGguf(const GgufFile& g) {
  ModelConfig c = ModelConfig::FromJson(ConfigJsonFromGguf(g), g.path());
  c.end_token_ids = GgufEndTokenIds(g, c);
  return c;
}

std::vector<int> GgufEndTokenIds(const GgufFile& g, const ModelConfig& c) {
  if (!HasGgufVocab(g)) return {};
  // Only the vocabularies wormchat builds; another (t5, no_vocab, ...) runs on ids with EOS alone,
  // as ReadGgufVocab's refusal tells the user to.
  const GgufValue* model = g.Find("tokenizer.ggml.model");
  if (model->type != GgufType::kString || (model->s != "llama" && model->s != "gpt2")) return {};
  std::vector<int> ids;
  for (int id : FindGgufRoles(ReadGgufVocab(g)).eog)
    if (id >= 0 && id < c.vocab_size && id != c.eos_token_id) ids.push_back(id);
  return ids;
}

nlohmann::json ConfigJsonFromGguf(const GgufFile& g) {
  const std::string name = g.String("general.architecture");
  const std::optional<Architecture> arch = ArchitectureNamed(name);
  if (!arch) {
    std::string known;
    for (const ArchitectureInfo& a : Architectures())
      known += Cat(known.empty() ? "" : ", ", a.name);
    throw Error(Cat(g.path(), ": general.architecture '", Printable(name),
                    "' is not one wormchat runs (", known, ")"));
  }
  return OpsOf(*arch).gguf_to_json(g, name);
}

}  // namespace wc
