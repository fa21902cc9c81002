#include "kvcache/kv_scales.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/json_file.h"
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
  SaveFile(JoinPath(dir, "kv_scales.json"));
}

void KVScaleFile::SaveFile(const std::string& path) const {
  const nlohmann::json j = {{"format", "wormchat-kv-scales-1"},
                            {"fingerprint", fingerprint},
                            {"n_layers", n_layers},
                            {"calibration_tokens", calibration_tokens},
                            {"k_amax", k_amax},
                            {"v_amax", v_amax}};
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(1) << "\n";
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(Cat(path, ": cannot write"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(Cat(path, ": cannot write: ", std::strerror(errno)));
  }
}

KVScaleFile KVScaleFile::Parse(std::string_view text, const std::string& path) {
  const nlohmann::json j = ParseJson(text, path);
  KVScaleFile f;
  f.fingerprint = JsonGet<std::string>(j, "fingerprint", path);
  f.n_layers = JsonGet<int>(j, "n_layers", path);
  if (f.n_layers < 1) throw Error(Cat(path, ": key 'n_layers' must be >= 1, got ", f.n_layers));
  f.k_amax = JsonGet<std::vector<float>>(j, "k_amax", path);
  f.v_amax = JsonGet<std::vector<float>>(j, "v_amax", path);
  f.calibration_tokens = JsonFind<int64_t>(j, "calibration_tokens", path).value_or(0);
  if (f.k_amax.size() != static_cast<size_t>(f.n_layers) ||
      f.v_amax.size() != static_cast<size_t>(f.n_layers))
    throw Error(Cat(path, ": needs ", f.n_layers, " k_amax and v_amax values (n_layers), has ",
                    f.k_amax.size(), " and ", f.v_amax.size()));
  for (int l = 0; l < f.n_layers; ++l)
    if (!(f.k_amax[l] >= 0) || !(f.v_amax[l] >= 0))
      throw Error(Cat(path, ": layer ", l, " has a negative amax"));
  return f;
}

KVScaleFile KVScaleFile::Load(const std::string& dir, const std::string& fingerprint,
                              int n_layers) {
  const std::string path = JoinPath(dir, "kv_scales.json");
  if (!FileExists(path))
    throw Error(Cat(path,
                    ": missing; --kv-scale tensor needs calibrated scales: run "
                    "`wormchat calibrate --model ",
                    dir, " --text FILE`"));
  KVScaleFile f = Parse(ReadTextFile(path, static_cast<int64_t>(kJsonFileMaxBytes)), path);
  if (f.fingerprint != fingerprint || f.n_layers != n_layers)
    throw Error(Cat(path, ": was calibrated for another model (fingerprint ",
                    Printable(f.fingerprint), ", this model is ", fingerprint,
                    "); run `wormchat calibrate` again"));
  return f;
}

}  // namespace wc
