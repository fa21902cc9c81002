// What a Hugging Face model directory says beside config.json: generation_config.json (special
// token ids, sampling defaults), tokenizer_config.json and special_tokens_map.json (bos_token /
// eos_token by name). Each file is optional; a present one that is malformed is an error naming
// it and the key.
//
// Special tokens: config.json's bos_token_id / eos_token_id win; where it has none, the first of
// generation_config.json's ids, tokenizer_config.json's token, special_tokens_map.json's token
// (names resolved through the model's tokenizer) that is present; else Falcon's 11. A list of EOS
// ids (generation_config.json may give several) contributes its first.
//
// Sampling: only the keys the file states (a demanding user's run keeps wormchat's defaults for
// the rest): do_sample false means greedy; temperature, top_k, top_p and max_new_tokens are taken
// as given. Command-line flags win over all of them.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace wc {

struct GenerationDefaults {
  std::optional<int> bos_token_id, eos_token_id;
  std::string bos_source, eos_source;  // the file (and key) each came from
  std::optional<bool> do_sample;
  std::optional<float> temperature, top_p;
  std::optional<int> top_k, max_new_tokens;
  std::string generation_config;  // its path when present, else empty
};

// Reads the files in `model_dir`. Token names are resolved only when needed (`need_bos` /
// `need_eos`: config.json has no id), through LoadModelTokenizer (model/model_tokenizer.h). Throws
// wc::Error naming the file and key for a malformed file, or a token name the tokenizer does not
// know.
GenerationDefaults ReadGenerationDefaults(const std::string& model_dir, bool need_bos,
                                          bool need_eos);

// A token key of tokenizer_config.json / special_tokens_map.json (`bos_token`, `eos_token`):
// "<s>" or an AddedToken object {"content": "<s>", ...}; nullopt when absent or null. Throws
// wc::Error "PATH: key 'KEY' ..." for another type.
std::optional<std::string> TokenKey(const nlohmann::json& j, const char* key,
                                    const std::string& path);

}  // namespace wc
