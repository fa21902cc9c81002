// Seeded random checkpoints of any architecture (`wormchat init`): config.json + model.safetensors
// in Hugging Face's own layout and tensor names (the architecture's table), so they load in HF's
// classes unchanged, for tests and benchmarks of any shape.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kernels/matmul.h"
#include "model/config.h"

namespace wc {

// Writes DIR/config.json and DIR/model.safetensors (creating DIR). Weights ~ N(0, 0.02), norm
// weights 1 and biases 0; each tensor from its own stream seeded by (seed, tensor name), so the
// bytes depend only on the config, dtype and seed. dtype: kF32 or kBF16.
// Throws wc::Error if DIR cannot be written or the disk lacks space. `progress` (optional) hears
// (tensor bytes generated, total tensor bytes) as the tensors are filled.
void WriteRandomCheckpoint(const ModelConfig& config, DType dtype, uint64_t seed,
                           const std::string& dir,
                           const std::function<void(int64_t, int64_t)>& progress = nullptr);

// Total bytes WriteRandomCheckpoint would write for the tensors.
int64_t RandomCheckpointBytes(const ModelConfig& config, DType dtype);

}  // namespace wc
