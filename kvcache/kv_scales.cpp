#include "kvcache/kv_scales.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {

std::vector<float> KVScaleFile::Scales(KVQuant q) const {
  std::vector<float> s(2 * static_cast<size_t>(n_layers));
  for (int l = 0; l < n_layers; ++l) {
    s[2 * l] = k_amax[l] / KVQuantMax(q);
    s[2 * l + 1] = v_amax[l] / KVQuantMax(q);
  }
  return s;
}

void KVScaleFile::Save(const std::string& dir) const {
  const std::string path = JoinPath(dir, "kv_scales.json");
  const nlohmann::json j = {{"format", "wormchat-kv-scales-1"},
                            {"fingerprint", fingerprint},
                            {"n_layers", n_layers},
                            {"calibration_tokens", calibration_tokens},
                            {"k_amax", k_amax},
                            {"v_amax", v_amax}};
  std::ofstream out(path);
  out << j.dump(1) << "\n";
  if (!out) throw Error(Cat(path, ": cannot write"));
}

KVScaleFile KVScaleFile::Load(const std::string& dir, const std::string& fingerprint,
                              int n_layers) {
  const std::string path = JoinPath(dir, "kv_scales.json");
  if (!FileExists(path))
    throw Error(Cat(path,
                    ": missing; --kv-scale tensor needs calibrated scales: run "
                    "`wormchat calibrate --model ",
                    dir, " --text FILE`"));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ReadTextFile(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(Cat(path, ": invalid JSON: ", e.what()));
  }
  KVScaleFile f;
  try {
    f.fingerprint = j.at("fingerprint").get<std::string>();
    f.n_layers = j.at("n_layers").get<int>();
    f.k_amax = j.at("k_amax").get<std::vector<float>>();
    f.v_amax = j.at("v_amax").get<std::vector<float>>();
    f.calibration_tokens = j.value("calibration_tokens", int64_t{0});
  } catch (const nlohmann::json::exception& e) {
    throw Error(Cat(path, ": malformed: ", e.what()));
  }
  if (f.fingerprint != fingerprint || f.n_layers != n_layers)
    throw Error(Cat(path, ": was calibrated for another model (fingerprint ", f.fingerprint,
                    ", this model is ", fingerprint, "); run `wormchat calibrate` again"));
  if (static_cast<int>(f.k_amax.size()) != n_layers ||
      static_cast<int>(f.v_amax.size()) != n_layers)
    throw Error(Cat(path, ": needs ", n_layers, " k_amax and v_amax values"));
  for (int l = 0; l < n_layers; ++l)
    if (!(f.k_amax[l] >= 0) || !(f.v_amax[l] >= 0) || std::isinf(f.k_amax[l]) ||
        std::isinf(f.v_amax[l]))
      throw Error(Cat(path, ": layer ", l, " has a negative or non-finite amax"));
  return f;
}

}  // namespace wc
