// The decoder config a GGUF file describes: llama.cpp's hparam keys ({arch}.embedding_length, ...;
// docs/gguf.md section 4) and the tensors present (an output.weight or not: tied) read by the
// file's architecture (general.architecture: "falcon" or "llama", the table's names) into the
// Hugging Face config.json that architecture's parser reads (model/architecture_ops.h), so a GGUF
// file and a checkpoint directory of the same model give the same ModelConfig.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/gguf/gguf_file.h"

namespace wc {

// Whether `path` names a GGUF model: a file (not a directory) that starts with GGUF's magic. Every
// command's --model takes one wherever it takes a checkpoint directory.
bool IsGgufModel(const std::string& path);

// What a --model argument names: "ollama:NAME[:TAG]" is that model's GGUF blob in ollama's store
// (model/gguf/ollama_store.h; throws as OllamaModelPath); a directory without config.json that
// holds exactly one *.gguf file is that file (as LM Studio keeps models); anything else is itself.
// Throws wc::Error naming the directory and its files when it holds several *.gguf and no
// config.json.
std::string ModelPath(const std::string& path);

// The config of `g`'s model. Throws wc::Error naming the file and the key (or tensor) on: no
// general.architecture or one wormchat does not run (named, with the ones it does), a required
// key missing, a key of the wrong type or out of range, keys that contradict each other
// (rope.dimension_count other than the head width, key_length other than value_length) or a
// layout wormchat does not run (experts, per-layer head counts that differ).
// Its end_token_ids are GgufEndTokenIds'.
ModelConfig ConfigFromGguf(const GgufFile& g);
// The ids besides c.eos_token_id that end generation on `g`'s model: its vocabulary's EOG set
// (tokenizer/gguf_tokenizer.h: FindGgufRoles, as llama.cpp b6673 finds it), those below
// c.vocab_size; empty for a file without a vocabulary, or with one of a kind wormchat does not
// build. Throws wc::Error as ReadGgufVocab does for a vocabulary's bad keys.
std::vector<int> GgufEndTokenIds(const GgufFile& g, const ModelConfig& c);
// The Hugging Face config.json ConfigFromGguf parses (what `wormchat convert` writes for a GGUF
// source). Throws as ConfigFromGguf does for the architecture and its keys.
nlohmann::json ConfigJsonFromGguf(const GgufFile& g);

// What the architectures' GGUF readers share: a key read with its range checked, each error one
// line naming the file and the key.
namespace gguf_keys {
// An integer key in [min, max]; absent: `fallback`, or an error when there is none.
int64_t Int(const GgufFile& g, const std::string& key, std::optional<int64_t> fallback, int64_t min,
            int64_t max);
// A count that llama.cpp allows per layer (head_count, head_count_kv, feed_forward_length): a
// scalar, or an array of n_layers equal values; different values are refused (wormchat's layers
// share one shape).
int64_t LayerInt(const GgufFile& g, const std::string& key, std::optional<int64_t> fallback,
                 int64_t n_layers, int64_t min, int64_t max);
// A float key in (0, max]; absent: `fallback`, or an error when there is none.
double Float(const GgufFile& g, const std::string& key, std::optional<double> fallback, double max);
// The vocabulary size: token_embd.weight's rows (ne[1]), which must be a 2-D tensor of `hidden`
// columns.
int64_t VocabSize(const GgufFile& g, int64_t hidden);
// bos/eos from tokenizer.ggml.{bos,eos}_token_id into `j` where the file has them.
void TokenIds(const GgufFile& g, nlohmann::json& j);
}  // namespace gguf_keys

}  // namespace wc
