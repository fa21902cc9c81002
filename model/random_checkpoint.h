// Seeded random Falcon checkpoints (`wormchat init`): config.json + model.safetensors in the HF
// layout the loader reads, for tests and benchmarks of any shape.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/matmul.h"
#include "model/config.h"

namespace wc {

// Writes DIR/config.json and DIR/model.safetensors (creating DIR). Weights ~ N(0, 0.02), LayerNorm
// weights 1 and biases 0; each tensor from its own stream seeded by (seed, tensor name), so the
// bytes depend only on the config, dtype and seed. dtype: kF32 or kBF16.
// Throws wc::Error if DIR cannot be written or the disk lacks space.
void WriteRandomCheckpoint(const FalconConfig& config, DType dtype, uint64_t seed,
                           const std::string& dir);

// Total bytes WriteRandomCheckpoint would write for the tensors.
int64_t RandomCheckpointBytes(const FalconConfig& config, DType dtype);

}  // namespace wc
