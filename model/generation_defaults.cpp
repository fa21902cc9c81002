#include "model/generation_defaults.h"

#include <memory>

#include <nlohmann/json.hpp>

#include "model/model_tokenizer.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

std::optional<nlohmann::json> ReadOptional(const std::string& path) {
  const std::string problem = FileProblem(path);
  if (problem == "missing") return std::nullopt;
  if (!problem.empty()) throw Error(Cat(path, ": ", problem));
  nlohmann::json j = ReadJsonFile(path);
  if (!j.is_object()) throw Error(Cat(path, ": expected a JSON object"));
  return j;
}

// An id key: an integer, or a non-empty list of them (its first). Null: absent.
std::optional<int> IdKey(const nlohmann::json& j, const char* key, const std::string& path) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  const std::string what = Cat(path, ": key '", key, "'");
  if (it->is_array()) {
    if (it->empty()) throw Error(Cat(what, " is an empty list"));
    return JsonAs<int>((*it)[0], what + "[0]");
  }
  return JsonAs<int>(*it, what);
}

}  // namespace

std::optional<std::string> TokenKey(const nlohmann::json& j, const char* key,
                                    const std::string& path) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  const std::string what = Cat(path, ": key '", key, "'");
  if (it->is_object()) return JsonGet<std::string>(*it, "content", what);
  return JsonAs<std::string>(*it, what);
}

GenerationDefaults ReadGenerationDefaults(const std::string& dir, bool need_bos, bool need_eos) {
  GenerationDefaults d;
  const std::string gen_path = JoinPath(dir, "generation_config.json");
  if (const auto gen = ReadOptional(gen_path)) {
    d.generation_config = gen_path;
    if ((d.bos_token_id = IdKey(*gen, "bos_token_id", gen_path)))
      d.bos_source = gen_path + " (bos_token_id)";
    if ((d.eos_token_id = IdKey(*gen, "eos_token_id", gen_path)))
      d.eos_source = gen_path + " (eos_token_id)";
    d.do_sample = JsonFind<bool>(*gen, "do_sample", gen_path);
    d.temperature = JsonFind<float>(*gen, "temperature", gen_path);
    d.top_p = JsonFind<float>(*gen, "top_p", gen_path);
    d.top_k = JsonFind<int>(*gen, "top_k", gen_path);
    d.max_new_tokens = JsonFind<int>(*gen, "max_new_tokens", gen_path);
    if (d.temperature && !(*d.temperature >= 0.0f))
      throw Error(Cat(gen_path, ": key 'temperature' must be >= 0, got ", *d.temperature));
    if (d.top_p && !(*d.top_p > 0.0f && *d.top_p <= 1.0f))
      throw Error(Cat(gen_path, ": key 'top_p' must be in (0, 1], got ", *d.top_p));
    if (d.top_k && *d.top_k < 0)
      throw Error(Cat(gen_path, ": key 'top_k' must be >= 0, got ", *d.top_k));
    if (d.max_new_tokens && *d.max_new_tokens < 0)
      throw Error(Cat(gen_path, ": key 'max_new_tokens' must be >= 0, got ", *d.max_new_tokens));
  }
  need_bos = need_bos && !d.bos_token_id;
  need_eos = need_eos && !d.eos_token_id;
  if (!need_bos && !need_eos) return d;
  std::unique_ptr<Tokenizer> tok;
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json"}) {
    const std::string path = JoinPath(dir, name);
    const auto j = ReadOptional(path);
    if (!j) continue;
    auto resolve = [&](const char* key, std::optional<int>* id, std::string* source) {
      const auto token = TokenKey(*j, key, path);
      if (!token) return;
      if (!tok) tok = LoadModelTokenizer(dir);
      const int found = tok->TokenId(*token);
      if (found < 0)
        throw Error(Cat(path, ": key '", key, "' names \"", Printable(*token, 40), "\", which ",
                        tok->path(), " does not have"));
      *id = found;
      *source = Cat(path, " (", key, ")");
    };
    if (need_bos && !d.bos_token_id) resolve("bos_token", &d.bos_token_id, &d.bos_source);
    if (need_eos && !d.eos_token_id) resolve("eos_token", &d.eos_token_id, &d.eos_source);
  }
  return d;
}

}  // namespace wc
