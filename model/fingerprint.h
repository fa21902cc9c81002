// A model directory's fingerprint: one hex digest of every file that decides its tokens, so a
// transcript (serving/transcript.h) can tell the model it was recorded on from any other.
#pragma once

#include <string>
#include <vector>

namespace wc {

// The files ModelFingerprint reads, in the order it reads them: config.json; model.safetensors, or
// model.safetensors.index.json and its shards (sorted by name); tokenizer.model, tokenizer.json,
// chat_format.json, generation_config.json, tokenizer_config.json and special_tokens_map.json if
// present (each can change the tokens); kv_scales.json if `with_kv_scales` (the scales --kv-scale
// tensor uses). Throws wc::Error naming the file if config.json or the weights are missing, or the
// index is not valid JSON.
std::vector<std::string> FingerprintFiles(const std::string& model_dir, bool with_kv_scales);

// XXH3-128 (libxxhash) over those files' names, sizes and bytes (a GGUF file: its size and bytes
// under the name "model.gguf"), as 32 lowercase hex digits. Reads
// the files through read-only mappings (~10 GB/s: a second or so for a multi-GB checkpoint).
// Throws wc::Error naming a file that cannot be read.
std::string ModelFingerprint(const std::string& model_dir, bool with_kv_scales);

}  // namespace wc
