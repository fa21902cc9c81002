// Per-tensor KV scales (TensorRT-LLM style, seed 003): per layer, the amax of K and of V recorded
// over calibration text, saved beside the model as kv_scales.json with a fingerprint of the model
// so a file that belongs to another model is refused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvcache/kv_formats.h"

namespace wc {

struct KVScaleFile {
  std::string fingerprint;  // of the model the amax values were measured on
  int n_layers = 0;
  std::vector<float> k_amax, v_amax;  // [n_layers]
  int64_t calibration_tokens = 0;

  // Dequantization multipliers for `q` (amax / KVQuantMax), per layer K then V: [n_layers * 2].
  // A zero amax gives scale 0 (that tensor was all zeros).
  std::vector<float> Scales(KVQuant q) const;
  // Writes DIR/kv_scales.json. Throws wc::Error naming the file.
  void Save(const std::string& model_dir) const;
  // Writes the file `path` (through a temporary beside it and a rename: a failed write leaves the
  // old file as it was). Throws wc::Error naming the file.
  void SaveFile(const std::string& path) const;
  // Reads DIR/kv_scales.json and checks it belongs to `fingerprint` with `n_layers` layers.
  // Throws wc::Error naming the file: missing ("run wormchat calibrate"), malformed, or mismatched.
  static KVScaleFile Load(const std::string& model_dir, const std::string& fingerprint,
                          int n_layers);
  // The file's text, read from `path` (named in messages), checked on its own: the keys' types
  // and ranges (n_layers >= 1, finite amax values >= 0, within float's range), n_layers values
  // each. Throws wc::Error "PATH: key 'KEY' ..." otherwise.
  static KVScaleFile Parse(std::string_view text, const std::string& path);
};

}  // namespace wc
