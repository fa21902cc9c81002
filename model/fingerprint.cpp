#include "model/fingerprint.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "model/gguf/gguf_config.h"
#include "model/gguf/gguf_file.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {

namespace {

std::string Hex(const XXH128_hash_t& h) {
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return hex;
}

// A GGUF model is its one file, under a fixed name (a renamed copy is the same model): its size,
// the bytes before its data (header, keys, tensor table, padding) and each tensor's first
// kGgufTensorBytes - a few pages of a multi-GB file, not all of it.
void UpdateWithGguf(XXH3_state_t* state, const GgufFile& g) {
  const char name[] = "model.gguf";
  const unsigned long long size = g.size();
  XXH3_128bits_update(state, name, sizeof name);  // the name and its NUL
  XXH3_128bits_update(state, &size, sizeof size);
  XXH3_128bits_update(state, g.bytes(), g.contents().data_offset);
  for (const GgufTensor& t : g.contents().tensors)
    if (t.n_bytes > 0)
      XXH3_128bits_update(state, t.data, std::min<size_t>(t.n_bytes, kGgufTensorBytes));
}

}  // namespace

std::vector<std::string> FingerprintFiles(const std::string& dir, bool with_kv_scales) {
  std::vector<std::string> files = {"config.json"};
  if (!FileExists(JoinPath(dir, "config.json")))
    throw Error(Cat(dir, ": no config.json; is this a model directory?"));
  const std::string index = JoinPath(dir, "model.safetensors.index.json");
  if (FileExists(JoinPath(dir, "model.safetensors"))) {
    files.push_back("model.safetensors");
  } else if (FileExists(index)) {
    files.push_back("model.safetensors.index.json");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(ReadTextFile(index));
    } catch (const nlohmann::json::exception& e) {
      throw Error(Cat(index, ": not valid JSON: ", e.what()));
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      throw Error(Cat(index, ": has no \"weight_map\" object"));
    std::set<std::string> shards;
    for (const auto& shard : j["weight_map"])
      if (shard.is_string()) shards.insert(shard.get<std::string>());
    files.insert(files.end(), shards.begin(), shards.end());
  } else {
    throw Error(Cat(dir, ": no model.safetensors or model.safetensors.index.json"));
  }
  for (const char* optional :
       {"tokenizer.model", "tokenizer.json", "chat_format.json", "generation_config.json",
        "tokenizer_config.json", "special_tokens_map.json"})
    if (FileExists(JoinPath(dir, optional))) files.push_back(optional);
  if (with_kv_scales) files.push_back("kv_scales.json");
  return files;
}

std::string ModelFingerprint(const std::string& dir, bool with_kv_scales) {
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state(XXH3_createState(),
                                                                        XXH3_freeState);
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) throw Error("xxHash: out of memory");
  const bool gguf = IsGgufModel(dir);
  if (gguf && with_kv_scales)
    throw Error(Cat(dir,
                    ": --kv-scale tensor reads kv_scales.json from a model directory; a GGUF "
                    "file has none"));
  if (gguf) {
    UpdateWithGguf(state.get(), *OpenGgufFile(dir));
    return Hex(XXH3_128bits_digest(state.get()));
  }
  for (const std::string& name : FingerprintFiles(dir, with_kv_scales)) {
    const MappedFile file(JoinPath(dir, name));
    const unsigned long long size = file.size();
    XXH3_128bits_update(state.get(), name.c_str(), name.size() + 1);  // the name and its NUL
    XXH3_128bits_update(state.get(), &size, sizeof size);
    if (size > 0) XXH3_128bits_update(state.get(), file.data(), file.size());
  }
  return Hex(XXH3_128bits_digest(state.get()));
}

int64_t GgufModelSize(const std::string& dir) {
  if (!IsGgufModel(dir)) return -1;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(dir, ec);
  if (ec) throw Error(Cat(dir, ": cannot read its size: ", ec.message()));
  return static_cast<int64_t>(size);
}

}  // namespace wc
