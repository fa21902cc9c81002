// The table's second half: each architecture's functions (model/architecture_ops.h).
#include "model/architecture_ops.h"

#include "model/falcon/falcon.h"
#include "model/llama/llama.h"
#include "util/error.h"

namespace wc {

const ArchitectureOps& OpsOf(Architecture arch) {
  // In ArchitectureOps' order: parse, gguf_to_json, to_json, validate, layout, tensors,
  // preset_names, preset.
  static const ArchitectureOps falcon_ops = {
      falcon::ParseConfig, falcon::GgufToJson, falcon::ToJson,      falcon::Validate,
      falcon::Layout,      falcon::Tensors,    falcon::PresetNames, falcon::Preset};
  static const ArchitectureOps llama_ops = {llama::ParseConfig, llama::GgufToJson, llama::ToJson,
                                            llama::Validate,    llama::Layout,     llama::Tensors,
                                            llama::PresetNames, llama::Preset};
  switch (arch) {
    case Architecture::kFalcon:
      return falcon_ops;
    case Architecture::kLlama:
      return llama_ops;
  }
  WC_CHECK(false, "architecture ", static_cast<int>(arch), " has no functions");
  return falcon_ops;
}

}  // namespace wc
