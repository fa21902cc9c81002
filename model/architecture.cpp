#include "model/architecture.h"

#include "util/error.h"

namespace wc {
namespace {

// HF's names of each architecture, the current first: Falcon's checkpoints of 2023 were
// published as "RefinedWeb" (40B) and "RefinedWebModel" (7B, RW) with class RWForCausalLM.
struct KnownNames {
  Architecture arch;
  std::vector<std::string> model_types, classes;
};

const std::vector<KnownNames>& Known() {
  static const std::vector<KnownNames> known = {
      {Architecture::kFalcon,
       {"falcon", "RefinedWeb", "RefinedWebModel"},
       {"FalconForCausalLM", "RWForCausalLM"}},
      {Architecture::kLlama, {"llama"}, {"LlamaForCausalLM"}},
  };
  return known;
}

std::string Supported() {
  std::string s;
  for (const ArchitectureInfo& a : Architectures())
    s += Cat(s.empty() ? "" : ", ", a.name, " (", a.hf_class, ")");
  return s;
}

}  // namespace

const std::vector<ArchitectureInfo>& Architectures() {
  static const std::vector<ArchitectureInfo> table = {
      {Architecture::kFalcon, "falcon", "falcon", "FalconForCausalLM",
       "LayerNorm, fused QKV (grouped, multi-query or multi-head), RoPE or ALiBi, GELU MLP, "
       "parallel or sequential residuals"},
      {Architecture::kLlama, "llama", "llama", "LlamaForCausalLM",
       "RMSNorm, separate q/k/v/o projections with grouped KV heads, RoPE, SwiGLU MLP, "
       "sequential residuals"},
  };
  return table;
}

const ArchitectureInfo& ArchitectureOf(Architecture arch) {
  for (const ArchitectureInfo& a : Architectures())
    if (a.arch == arch) return a;
  WC_CHECK(false, "architecture ", static_cast<int>(arch), " has no row in the table");
  return Architectures().front();
}

std::optional<Architecture> ArchitectureNamed(const std::string& name) {
  for (const ArchitectureInfo& a : Architectures())
    if (name == a.name) return a.arch;
  return std::nullopt;
}

Architecture DetectArchitecture(const nlohmann::json& j, const std::string& src) {
  std::optional<Architecture> by_type, by_class;
  std::string class_name;
  if (j.is_object() && j.contains("model_type") && !j["model_type"].is_null()) {
    const auto& t = j["model_type"];
    if (!t.is_string())
      throw Error(Cat(src, ": key 'model_type' must be a string, got ", t.dump()));
    for (const KnownNames& k : Known())
      for (const std::string& name : k.model_types)
        if (t.get<std::string>() == name) by_type = k.arch;
    if (!by_type)
      throw Error(Cat(src, ": model_type ", t.dump(), " is not an architecture wormchat runs; ",
                      "it runs ", Supported()));
  }
  if (j.is_object() && j.contains("architectures") && !j["architectures"].is_null()) {
    const auto& a = j["architectures"];
    if (!a.is_array() || a.empty() || !a[0].is_string())
      throw Error(Cat(src, ": key 'architectures' must be a list of class names, got ", a.dump()));
    class_name = a[0].get<std::string>();
    for (const KnownNames& k : Known())
      for (const std::string& name : k.classes)
        if (class_name == name) by_class = k.arch;
    if (!by_class && !by_type)
      throw Error(Cat(src, ": architectures[0] \"", class_name,
                      "\" is not an architecture wormchat runs; it runs ", Supported()));
  }
  if (by_type && by_class && *by_type != *by_class)
    throw Error(Cat(src, ": model_type ", j["model_type"].dump(), " and architectures[0] \"",
                    class_name, "\" name different architectures"));
  if (by_type) return *by_type;
  if (by_class) return *by_class;
  return Architecture::kFalcon;  // RW-era configs name neither
}

}  // namespace wc
