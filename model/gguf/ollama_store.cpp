#include "model/gguf/ollama_store.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

namespace fs = std::filesystem;

constexpr char kDefaultHost[] = "registry.ollama.ai";
constexpr char kDefaultNamespace[] = "library";
constexpr char kModelMediaType[] = "application/vnd.ollama.image.model";

// A name part: non-empty, no "." or ".." (it is a directory under manifests/), no control bytes.
bool GoodPart(const std::string& p) {
  if (p.empty() || p == "." || p == "..") return false;
  return std::none_of(p.begin(), p.end(), [](char ch) {
    return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f || ch == '\\';
  });
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t at = 0;
  for (;;) {
    const size_t next = s.find(sep, at);
    parts.push_back(s.substr(at, next - at));
    if (next == std::string::npos) return parts;
    at = next + 1;
  }
}

std::string ListedName(const std::string& host, const std::string& ns, const std::string& name,
                       const std::string& tag) {
  std::string s = host == kDefaultHost ? "" : host + "/";
  if (!s.empty() || ns != kDefaultNamespace) s += ns + "/";
  return Cat(s, name, ":", tag);
}

bool IsHex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char ch) {
           return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
         });
}

}  // namespace

bool IsOllamaRef(const std::string& arg) {
  return arg.rfind(kOllamaPrefix, 0) == 0;
}

std::string OllamaStoreRoot() {
  const char* env = std::getenv("OLLAMA_MODELS");
  if (env != nullptr && *env != '\0') return env;
  const char* home = std::getenv("HOME");
  return JoinPath(JoinPath(home != nullptr ? home : "", ".ollama"), "models");
}

std::vector<std::string> OllamaModels(const std::string& root) {
  std::vector<std::string> models;
  std::error_code ec;
  const fs::path manifests = fs::path(root) / "manifests";
  if (!fs::is_directory(manifests, ec)) return models;
  for (auto it = fs::recursive_directory_iterator(manifests, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() != 3 || !it->is_regular_file(ec)) continue;
    const fs::path rel = it->path().lexically_relative(manifests);
    std::vector<std::string> p;
    for (const fs::path& part : rel) p.push_back(part.string());
    if (p.size() == 4) models.push_back(Printable(ListedName(p[0], p[1], p[2], p[3])));
  }
  std::sort(models.begin(), models.end());
  return models;
}

std::string OllamaModelPath(const std::string& ref, const std::string& root) {
  const std::string spec = ref.substr(IsOllamaRef(ref) ? sizeof(kOllamaPrefix) - 1 : 0);
  // NAME[:TAG]: a tag is after the last ':' past the last '/'.
  std::string path_part = spec, tag = "latest";
  const size_t slash = spec.rfind('/'), colon = spec.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    path_part = spec.substr(0, colon);
    tag = spec.substr(colon + 1);
  }
  std::vector<std::string> parts = Split(path_part, '/');
  if (parts.size() == 1) parts.insert(parts.begin(), kDefaultNamespace);
  if (parts.size() == 2) parts.insert(parts.begin(), kDefaultHost);
  if (parts.size() != 3 || !std::all_of(parts.begin(), parts.end(), GoodPart) || !GoodPart(tag))
    throw Error(Cat(Printable(ref),
                    ": not an ollama model name; expected ollama:NAME[:TAG] (NAME: name, "
                    "namespace/name or host/namespace/name)"));
  const std::string manifest = JoinPath(
      JoinPath(JoinPath(JoinPath(JoinPath(root, "manifests"), parts[0]), parts[1]), parts[2]), tag);
  if (!FileExists(manifest)) {
    const std::vector<std::string> models = OllamaModels(root);
    std::string list;
    for (const std::string& m : models) list += Cat(list.empty() ? "" : ", ", m);
    throw Error(Cat(Printable(ref), ": ", ListedName(parts[0], parts[1], parts[2], tag),
                    " is not in the ollama store ", root,
                    models.empty() ? " (it holds no models; ollama pull NAME, or set OLLAMA_MODELS)"
                                   : Cat("; it holds ", list)));
  }
  const nlohmann::json j = ReadJsonFile(manifest);  // names the file when it is not JSON
  const auto layers = j.is_object() ? j.find("layers") : j.end();
  if (!j.is_object() || layers == j.end() || !layers->is_array())
    throw Error(Cat(manifest, ": an ollama manifest has a 'layers' array; this has none"));
  for (const nlohmann::json& layer : *layers) {
    if (!layer.is_object() || layer.value("mediaType", nlohmann::json()) != kModelMediaType)
      continue;
    const nlohmann::json digest = layer.value("digest", nlohmann::json());
    const std::string d = digest.is_string() ? digest.get<std::string>() : "";
    if (d.rfind("sha256:", 0) != 0 || !IsHex64(d.substr(7)))
      throw Error(Cat(manifest, ": the model layer's digest '", Printable(d.substr(0, 80)),
                      "' is not sha256: and 64 lowercase hex digits"));
    const std::string blob = JoinPath(JoinPath(root, "blobs"), "sha256-" + d.substr(7));
    if (!FileExists(blob))
      throw Error(Cat(blob, ": missing; the model layer of ", manifest,
                      " (ollama pull it again, or fix OLLAMA_MODELS)"));
    return blob;
  }
  throw Error(Cat(manifest, ": no layer of mediaType ", kModelMediaType,
                  " (not a model ollama runs from GGUF)"));
}

}  // namespace wc
