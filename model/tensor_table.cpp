#include "model/tensor_table.h"

#include "model/architecture_ops.h"

namespace wc {

std::vector<TensorEntry> ModelTensors(const ModelConfig& c) {
  return OpsOf(c.arch).tensors(c);
}

std::optional<std::string> TensorName(const ModelConfig& c, TensorRole role, int layer) {
  for (const TensorEntry& e : ModelTensors(c))
    if (e.role == role && e.layer == layer) return e.name;
  return std::nullopt;
}

bool IsMatrixRole(TensorRole role) {
  switch (role) {
    case TensorRole::kTokenEmbd:
    case TensorRole::kOutput:
    case TensorRole::kQkv:
    case TensorRole::kQ:
    case TensorRole::kK:
    case TensorRole::kV:
    case TensorRole::kAttnOut:
    case TensorRole::kGate:
    case TensorRole::kUp:
    case TensorRole::kDown:
      return true;
    default:
      return false;
  }
}

std::optional<WeightGroup> GroupOfRole(TensorRole role) {
  switch (role) {
    case TensorRole::kOutput:
      return WeightGroup::kLmHead;
    case TensorRole::kQkv:
    case TensorRole::kQ:
    case TensorRole::kK:
    case TensorRole::kV:
    case TensorRole::kAttnOut:
      return WeightGroup::kAttn;
    case TensorRole::kGate:
    case TensorRole::kUp:
    case TensorRole::kDown:
      return WeightGroup::kMlp;
    default:
      return std::nullopt;
  }
}

std::optional<TensorRole> MatrixRoleOfName(const ModelConfig& c, const std::string& name) {
  for (const TensorEntry& e : ModelTensors(c))
    if (e.name == name && IsMatrixRole(e.role)) return e.role;
  return std::nullopt;
}

}  // namespace wc
