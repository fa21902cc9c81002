// ollama's model store: `--model ollama:NAME[:TAG]` runs the GGUF file `ollama pull` fetched, in
// place. The store is $OLLAMA_MODELS, else ~/.ollama/models, laid out as ollama keeps it:
//   manifests/HOST/NAMESPACE/NAME/TAG   JSON: layers[] of {mediaType, digest "sha256:HEX", ...}
//   blobs/sha256-HEX                    each layer's bytes; the model layer's
//                                       (mediaType application/vnd.ollama.image.model) is GGUF
// NAME is `name`, `namespace/name` or `host/namespace/name` (host registry.ollama.ai, namespace
// library and tag latest by default, as ollama names them).
#pragma once

#include <string>
#include <vector>

namespace wc {

inline constexpr char kOllamaPrefix[] = "ollama:";

// Whether a --model argument names a model of ollama's store ("ollama:...").
bool IsOllamaRef(const std::string& arg);

// The store's root: $OLLAMA_MODELS when set and non-empty, else $HOME/.ollama/models.
std::string OllamaStoreRoot();

// The models `root` holds, as `ollama list` names them ("falcon3:7b", "ns/name:tag",
// "host/ns/name:tag"), sorted; empty when there is no store.
std::vector<std::string> OllamaModels(const std::string& root);

// The model blob `ref` ("ollama:NAME[:TAG]") names in `root`. Throws wc::Error, one line, on: an
// empty or malformed name; no manifest for it (listing the models the store holds); a manifest
// that is not JSON, has no layers array or no model layer, or whose digest is not sha256:HEX; the
// blob missing (naming its path).
std::string OllamaModelPath(const std::string& ref, const std::string& root);

}  // namespace wc
