// ollama's store (model/gguf/ollama_store.h) in a temporary directory laid out as ollama keeps
// it: names with their defaults, the model layer's blob, and each problem as one line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "model/gguf/gguf_config.h"
#include "model/gguf/ollama_store.h"
#include "tests/test_util.h"
#include "util/error.h"

namespace wc {
namespace {

const std::string kOllamaHex(64, 'a');
const std::string kOllamaOtherHex(64, 'b');

std::string OllamaManifest(const std::string& model_hex) {
  return R"({"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",)"
         R"("config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:)" +
         kOllamaOtherHex +
         R"(","size":10},"layers":[)"
         R"({"mediaType":"application/vnd.ollama.image.template","digest":"sha256:)" +
         kOllamaOtherHex +
         R"(","size":5},)"
         R"({"mediaType":"application/vnd.ollama.image.model","digest":"sha256:)" +
         model_hex + R"(","size":7}]})";
}

void OllamaPut(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  test::WriteFile(path, bytes);
}

std::string OllamaErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OllamaStore, NamesResolveWithOllamasDefaults) {
  test::TempDir root;
  const std::string m = root.File("manifests/registry.ollama.ai/library/falcon3/");
  OllamaPut(m + "latest", OllamaManifest(kOllamaHex));
  OllamaPut(m + "7b", OllamaManifest(kOllamaHex));
  OllamaPut(root.File("manifests/registry.ollama.ai/tii/falcon/40b"), OllamaManifest(kOllamaHex));
  OllamaPut(root.File("manifests/example.com/ns/llama/q4"), OllamaManifest(kOllamaHex));
  OllamaPut(root.File("blobs/sha256-" + kOllamaHex), "GGUF...");
  const std::string blob = root.File("blobs/sha256-" + kOllamaHex);
  for (const char* ref : {"ollama:falcon3", "ollama:falcon3:latest", "ollama:falcon3:7b",
                          "ollama:library/falcon3", "ollama:registry.ollama.ai/library/falcon3:7b",
                          "ollama:tii/falcon:40b", "ollama:example.com/ns/llama:q4"})
    EXPECT_EQ(OllamaModelPath(ref, root.path()), blob) << ref;
  EXPECT_EQ(OllamaModels(root.path()),
            (std::vector<std::string>{"example.com/ns/llama:q4", "falcon3:7b", "falcon3:latest",
                                      "tii/falcon:40b"}));
}

TEST(OllamaStore, EachProblemIsOneLine) {
  test::TempDir root;
  const std::string m = root.File("manifests/registry.ollama.ai/library/");
  OllamaPut(m + "falcon3/7b", OllamaManifest(kOllamaHex));
  EXPECT_EQ(OllamaErrorOf([&] { OllamaModelPath("ollama:nope", root.path()); }),
            "ollama:nope: nope:latest is not in the ollama store " + root.path() +
                "; it holds falcon3:7b");
  test::TempDir empty;
  EXPECT_EQ(OllamaErrorOf([&] { OllamaModelPath("ollama:nope:1b", empty.path()); }),
            "ollama:nope:1b: nope:1b is not in the ollama store " + empty.path() +
                " (it holds no models; ollama pull NAME, or set OLLAMA_MODELS)");
  EXPECT_EQ(OllamaErrorOf([&] { OllamaModelPath("ollama:falcon3:7b", root.path()); }),
            root.File("blobs/sha256-" + kOllamaHex) + ": missing; the model layer of " + m +
                "falcon3/7b (ollama pull it again, or fix OLLAMA_MODELS)");
  OllamaPut(m + "nolayer/latest",
            R"({"layers":[{"mediaType":"application/vnd.ollama.image.license","digest":"sha256:)" +
                kOllamaHex + R"("}]})");
  EXPECT_EQ(OllamaErrorOf([&] { OllamaModelPath("ollama:nolayer", root.path()); }),
            m + "nolayer/latest: no layer of mediaType application/vnd.ollama.image.model (not a "
                "model ollama runs from GGUF)");
  OllamaPut(m + "baddigest/latest",
            R"({"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"md5:12"}]})");
  EXPECT_EQ(OllamaErrorOf([&] { OllamaModelPath("ollama:baddigest", root.path()); }),
            m + "baddigest/latest: the model layer's digest 'md5:12' is not sha256: and 64 "
                "lowercase hex digits");
  OllamaPut(m + "nolayers/latest", R"({"schemaVersion":2})");
  EXPECT_EQ(OllamaErrorOf([&] { OllamaModelPath("ollama:nolayers", root.path()); }),
            m + "nolayers/latest: an ollama manifest has a 'layers' array; this has none");
  OllamaPut(m + "notjson/latest", "{\"layers\": [");
  const std::string not_json =
      OllamaErrorOf([&] { OllamaModelPath("ollama:notjson", root.path()); });
  EXPECT_EQ(not_json.rfind(m + "notjson/latest", 0), 0u) << not_json;
  EXPECT_EQ(not_json.find('\n'), std::string::npos) << not_json;
  for (const char* bad : {"ollama:", "ollama::7b", "ollama:a/b/c/d", "ollama:../x", "ollama:a:"})
    EXPECT_NE(
        OllamaErrorOf([&] { OllamaModelPath(bad, root.path()); }).find("not an ollama model name"),
        std::string::npos)
        << bad;
}

TEST(OllamaStore, ModelPathReadsOllamaModels) {
  test::TempDir root;
  OllamaPut(root.File("manifests/registry.ollama.ai/library/tiny/latest"),
            OllamaManifest(kOllamaHex));
  OllamaPut(root.File("blobs/sha256-" + kOllamaHex), "GGUF");
  setenv("OLLAMA_MODELS", root.path().c_str(), 1);
  EXPECT_EQ(OllamaStoreRoot(), root.path());
  EXPECT_EQ(ModelPath("ollama:tiny"), root.File("blobs/sha256-" + kOllamaHex));
  unsetenv("OLLAMA_MODELS");
  const char* home = std::getenv("HOME");
  const std::string saved = home != nullptr ? home : "";
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(OllamaStoreRoot(), "/home/someone/.ollama/models");
  if (home != nullptr)
    setenv("HOME", saved.c_str(), 1);
  else
    unsetenv("HOME");
}

}  // namespace
}  // namespace wc
