#include "mesh/wormhole_spec.h"

#include "util/error.h"

namespace wc {

MeshSpec MeshPreset(const std::string& name) {
  MeshSpec m;
  m.name = name;
  if (name == "n150") {
    m.chips = 1;
  } else if (name == "n300") {
    m.chips = 2;
    m.cols = 2;
  } else if (name == "n300x2") {
    m.chips = 4;
    m.rows = 2;
    m.cols = 2;
  } else if (name == "t3k") {
    m.chips = 8;
    m.rows = 2;
    m.cols = 4;
  } else if (name == "galaxy") {
    m.chips = 32;
    m.rows = 4;
    m.cols = 8;
  } else {
    std::string names;
    for (const auto& n : MeshPresetNames()) names += (names.empty() ? "" : ", ") + n;
    throw Error(Cat("--mesh '", name, "' is not a known mesh; choose one of: ", names));
  }
  return m;
}

std::vector<std::string> MeshPresetNames() {
  return {"n150", "n300", "n300x2", "t3k", "galaxy"};
}

}  // namespace wc
