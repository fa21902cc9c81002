// Each architecture's layer graph (model/layer_context.h), the table's column the parsers do not
// need.
#include "model/falcon/falcon.h"
#include "model/layer_context.h"
#include "model/llama/llama.h"
#include "util/error.h"

namespace wc {

LayerGraph LayerGraphOf(Architecture arch) {
  switch (arch) {
    case Architecture::kFalcon:
      return falcon::Layer;
    case Architecture::kLlama:
      return llama::Layer;
  }
  WC_CHECK(false, "architecture ", static_cast<int>(arch), " has no layer graph");
  return falcon::Layer;
}

}  // namespace wc
