// The one table of decoder architectures: which architecture a checkpoint is, and for each its
// names (what `info`, transcript headers and prefix-cache keys print), its Hugging Face
// model_type and class, and a line on its layout. Everything an architecture does differently
// (config keys, tensor names, the layer's graph, presets) is reached through this table
// (model/architecture_ops.h); code above model/ sees a decoder model, never an architecture's
// types. Adding an architecture: model/README.md's checklist.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wc {

enum class Architecture {
  kFalcon,  // FalconForCausalLM: Falcon-7B/40B/180B (RoPE), Falcon2, Falcon-RW (ALiBi)
  kLlama,   // LlamaForCausalLM: Falcon3 and any checkpoint of the Llama layout
};

struct ArchitectureInfo {
  Architecture arch;
  const char* name;        // "falcon", "llama"
  const char* model_type;  // config.json's model_type
  const char* hf_class;    // config.json's architectures[0]
  const char* summary;     // its layout in one line
};

// Every architecture, in the table's order.
const std::vector<ArchitectureInfo>& Architectures();
const ArchitectureInfo& ArchitectureOf(Architecture arch);
// By name ("falcon", "llama"); nullopt when none has it.
std::optional<Architecture> ArchitectureNamed(const std::string& name);

// Which architecture config.json describes: its model_type (HF's own key), else its
// architectures list, else Falcon when it carries the RW-era keys (n_head, n_layer) or neither
// key (configs written before HF named the model). Throws wc::Error naming `src` and the key when
// the model_type or class is one wormchat does not run, or the two keys disagree.
Architecture DetectArchitecture(const nlohmann::json& config, const std::string& src);

}  // namespace wc
