// A converted checkpoint (`wormchat convert`, model/convert.h): a Falcon model directory whose
// matrices are stored in the formats a --weights SPEC gave their groups, the block-float ones as
// the tiles tt-metal uploads. Loading one needs no flag (ModelWeights::Load binds the tiles, Pack
// hands them to the kernels' panels without re-quantizing). The format (docs/models.md):
//
//   config.json        the original's keys, plus
//                        "wormchat_weights": {"attn": F, "mlp": F, "lm_head": F}
//                      F in f32, f16, bf16, bfp8, bfp4: the format each group's matrices are stored
//                      in. A tied LM head stored in another format than the embeddings is its own
//                      tensor lm_head.weight, and "tie_word_embeddings" is false.
//   model.safetensors  a matrix of a bfp group: its Hugging Face name, dtype U8, shape
//                        [K/32, N/32, tile bytes]   K = in, N = out, each rounded up to 32
//                      tiles in row-major order over the padded [K, N], each tile's bytes as
//                      kernels/gemm/bfp/bfp_weights.h step 6 lays them out (1088 bytes bfp8, 576
//                      bfp4);
//                      __metadata__ (string -> string) names, per such tensor,
//                        "<tensor>.format": "bfp8" | "bfp4"
//                        "<tensor>.shape":  "[out, in]"   (the Hugging Face shape, unpadded)
//                      Every other tensor (embeddings, LayerNorms, biases, matrices of an
//                      f32/bf16/f16 group) is an ordinary safetensors tensor.
//
// A damaged file is refused with one line naming the tensor (StoredTiles::Bind).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/gemm/bfp/bfp_weights.h"
#include "kernels/gemm/packed_matrix.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/weight_spec.h"

namespace wc {

inline constexpr char kStoredWeightsKey[] = "wormchat_weights";  // config.json's key

// The --weights group of every matrix the GEMM multiplies in `c`'s tensor table, by checkpoint
// name (the attention's and MLP's projections, and the LM head's own name whether or not `c` ties
// it); the embeddings, norms and biases are not there.
std::map<std::string, WeightGroup> MatrixGroups(const ModelConfig& c);

// config.json's "wormchat_weights" as a spec naming every group, or nullopt when there is none (a
// Hugging Face checkpoint). Throws wc::Error naming `source` and the key for a value that is not
// an object of the three groups' format names.
std::optional<WeightSpec> StoredWeightFormats(const nlohmann::json& config,
                                              const std::string& source);
// The same, read from DIR/config.json.
std::optional<WeightSpec> ReadStoredWeightFormats(const std::string& model_dir);

// The spec a load runs with: `asked` (--weights), with every group a converted checkpoint stores
// in block float taken as stored. A bfp group asked for in any other format is refused (wc::Error,
// one line naming --weights and the group): another bfp format would round twice, and bf16 / f32
// would only widen what is stored (load the original for them).
WeightSpec EffectiveWeightSpec(const std::optional<WeightSpec>& stored, const WeightSpec& asked,
                               const std::string& model_dir);

// A bfp matrix of a converted checkpoint as one process holds it: the tiles of its slice.
struct StoredTiles {
  BfpLayout layout;                 // of the slice: [out, in] its rows and columns
  BfpTileSlice slice;               // where the slice's tiles lie in the mapping (no copy)
  const uint8_t* source = nullptr;  // the whole tensor in the mapping, [source_bytes]
  size_t source_bytes = 0;

  // Validates tensor `name` of `ck` as the stored form of a matrix of HF shape [out, in] in
  // format `f` (the config's format of its group) and takes the rows in `row_ranges` ([begin, end)
  // of out, concatenated in order) and the columns [col_begin, col_end) of in. Each range must
  // start on a multiple of 32 and end on one or at the matrix's end (CheckBfpSlices); the tiles
  // stay in the mapping (Pack reads them in place, no copy). Throws wc::Error naming the file and
  // tensor for: a tensor that is not U8 [K/32, N/32, tile bytes], a missing or unknown
  // "<name>.format" or one other than f, a missing or unreadable "<name>.shape" or one other than
  // [out, in].
  static StoredTiles Bind(const Checkpoint& ck, const std::string& name, WeightFormat f,
                          int64_t out, int64_t in,
                          const std::vector<std::pair<int64_t, int64_t>>& row_ranges,
                          int64_t col_begin, int64_t col_end);

  // The kernels' matrix of these tiles (PackedMatrix::FromBfpTiles, no re-quantization), the
  // source's pages released. `asked`: the group's --weights format (nullopt = auto); anything but
  // the stored format is refused as EffectiveWeightSpec refuses it. Throws wc::Error naming `name`
  // for an exponent byte of 255.
  PackedMatrix Pack(std::optional<WeightFormat> asked, ActivationPrecision bf16_precision,
                    const std::string& name) const;
};

}  // namespace wc
