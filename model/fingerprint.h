// A model directory's fingerprint: one hex digest of every file that decides its tokens, so a
// transcript (serving/transcript.h) can tell the model it was recorded on from any other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wc {

// The bytes of each tensor's data a GGUF file's fingerprint reads (one page).
constexpr size_t kGgufTensorBytes = 4096;

// The files ModelFingerprint reads, in the order it reads them: config.json; model.safetensors, or
// model.safetensors.index.json and its shards (sorted by name); tokenizer.model, tokenizer.json,
// chat_format.json, generation_config.json, tokenizer_config.json and special_tokens_map.json if
// present (each can change the tokens); kv_scales.json if `with_kv_scales` (the scales --kv-scale
// tensor uses). Throws wc::Error naming the file if config.json or the weights are missing, or the
// index is not valid JSON.
std::vector<std::string> FingerprintFiles(const std::string& model_dir, bool with_kv_scales);

// XXH3-128 (libxxhash) over those files' names, sizes and bytes, as 32 lowercase hex digits. Reads
// the files through read-only mappings (~10 GB/s: a second or so for a multi-GB checkpoint).
// A GGUF file (`model_dir` one: IsGgufModel) is hashed under the name "model.gguf" (a renamed copy
// is the same model) by its size, the bytes before its data (header, keys, tensor table) and the
// first kGgufTensorBytes of each tensor's data: a few pages, not the whole multi-GB file (two files
// differing only past those bytes of every tensor are not told apart). Throws wc::Error naming a
// file that cannot be read or parsed, and for a GGUF file with `with_kv_scales` (it has no
// kv_scales.json).
std::string ModelFingerprint(const std::string& model_dir, bool with_kv_scales);

// A GGUF model's file size in bytes (what a transcript's header records beside the fingerprint),
// -1 for a model directory. Throws wc::Error naming a file whose size cannot be read.
int64_t GgufModelSize(const std::string& model_dir);

}  // namespace wc
