// Llama (LlamaForCausalLM: TII's Falcon3 and any checkpoint of the layout): the architecture's
// entries in the table (model/architecture_ops.h). Config keys: llama_config.cpp; tensor names:
// llama_tensors.cpp; the layer's graph: llama_graph.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/tensor_table.h"

namespace wc {
class GgufFile;
struct LayerContext;
namespace llama {

ModelConfig ParseConfig(const nlohmann::json& j, const std::string& src);
nlohmann::json GgufToJson(const GgufFile& g, const std::string& a);
nlohmann::json ToJson(const ModelConfig& c);
void Validate(const ModelConfig& c, const std::string& src);
std::string Layout(const ModelConfig& c);
std::vector<TensorEntry> Tensors(const ModelConfig& c);
void Layer(const LayerContext& ctx, std::vector<float>& x);
std::vector<std::string> PresetNames();
std::optional<ModelConfig> Preset(const std::string& name);

}  // namespace llama
}  // namespace wc
