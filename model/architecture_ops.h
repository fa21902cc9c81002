// What each architecture supplies, reached through the table (model/architecture.cpp): its config
// parser and writer, its tensor table and its presets (its layer's graph: LayerGraphOf,
// model/layer_context.h, so that the parsers build without the engine). Internal to model/:
// nothing above it includes this header.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/architecture.h"
#include "model/config.h"
#include "model/tensor_table.h"

namespace wc {

class GgufFile;

struct ArchitectureOps {
  // config.json's keys (the architecture's own names and HF's defaults) to a ModelConfig with
  // `arch` set; throws wc::Error naming `src` and the key.
  ModelConfig (*parse)(const nlohmann::json& j, const std::string& src);
  // A GGUF file's keys and tensors (`a`: its general.architecture) as the config.json `parse`
  // reads (model/gguf/gguf_config.h); throws wc::Error naming the file and the GGUF key.
  nlohmann::json (*gguf_to_json)(const GgufFile& g, const std::string& a);
  // The HF config keys of `c` (model_type and architectures included).
  nlohmann::json (*to_json)(const ModelConfig& c);
  // The architecture's own consistency checks beyond the shared ones (ModelConfig::Validate).
  void (*validate)(const ModelConfig& c, const std::string& src);
  // `c`'s layout in a few words (what `info` prints after the architecture's name).
  std::string (*layout)(const ModelConfig& c);
  // Every tensor `c` needs (model/tensor_table.h).
  std::vector<TensorEntry> (*tensors)(const ModelConfig& c);
  // Its presets: names, and the config of one (nullopt: not its name).
  std::vector<std::string> (*preset_names)();
  std::optional<ModelConfig> (*preset)(const std::string& name);
};

const ArchitectureOps& OpsOf(Architecture arch);

}  // namespace wc
