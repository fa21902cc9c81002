#include "model/random_checkpoint.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "model/checkpoint.h"
#include "model/tensor_table.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/rng.h"

namespace wc {
namespace {

enum class Init { kNormal, kOnes, kZeros };

struct Spec {
  std::string name;
  std::vector<int64_t> shape;
  Init init;
};

// Every tensor of the architecture's table: matrices and embeddings ~ N(0, 0.02), norm weights 1,
// biases 0.
std::vector<Spec> Specs(const ModelConfig& c) {
  std::vector<Spec> s;
  for (const TensorEntry& e : ModelTensors(c)) {
    Init init = Init::kZeros;
    if (IsMatrixRole(e.role)) init = Init::kNormal;
    if (e.role == TensorRole::kOutputNorm || e.role == TensorRole::kAttnNorm ||
        e.role == TensorRole::kMlpNorm)
      init = Init::kOnes;
    s.push_back({e.name, e.shape, init});
  }
  return s;
}

// FNV-1a: a name hash that is the same on every platform (std::hash is not).
uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

int64_t RandomCheckpointBytes(const ModelConfig& c, DType dtype) {
  int64_t total = 0;
  for (const auto& s : Specs(c)) total += Numel(s.shape) * DTypeSize(dtype);
  return total;
}

void WriteRandomCheckpoint(const ModelConfig& c, DType dtype, uint64_t seed, const std::string& dir,
                           const std::function<void(int64_t, int64_t)>& progress) {
  WC_CHECK(dtype == DType::kF32 || dtype == DType::kBF16, "init writes F32 or BF16");
  if (!DirExists(dir) && ::mkdir(dir.c_str(), 0755) != 0)
    throw Error(Cat(dir, ": cannot create directory: ", std::strerror(errno)));
  const int64_t bytes = RandomCheckpointBytes(c, dtype);
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) == 0) {
    const double free_bytes = static_cast<double>(vfs.f_bavail) * vfs.f_frsize;
    if (static_cast<double>(bytes) > free_bytes * 0.95)
      throw Error(Cat(dir, ": the checkpoint needs ", bytes >> 20, " MiB but only ",
                      static_cast<int64_t>(free_bytes) >> 20,
                      " MiB are free; use fewer --layers or a smaller --hidden"));
  }
  // Generate each tensor on demand so memory stays at one tensor, not the whole model.
  const std::vector<Spec> specs = Specs(c);
  int64_t written = 0;  // tensor bytes filled so far
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& s = specs[i];
    TensorToWrite t{s.name, dtype, s.shape, nullptr, {}};
    t.fill = [&s, dtype, seed, &progress, &written, bytes](uint8_t* out) {
      const int64_t n = Numel(s.shape);
      Rng rng(seed ^ Fnv1a(s.name));
      for (int64_t k = 0; k < n; ++k) {
        float v = s.init == Init::kOnes ? 1.0f : 0.0f;
        if (s.init == Init::kNormal) {  // Box-Muller
          const double u1 = 1.0 - rng.Uniform(), u2 = rng.Uniform();
          v = static_cast<float>(0.02 * std::sqrt(-2.0 * std::log(u1)) *
                                 std::cos(6.283185307179586 * u2));
        }
        if (dtype == DType::kBF16) {
          const uint16_t b = F32ToBF16(v);
          std::memcpy(out + 2 * k, &b, 2);
        } else {
          std::memcpy(out + 4 * k, &v, 4);
        }
        // Every 1 M values: a tensor of a large preset takes seconds.
        if (progress && (k + 1) % (1 << 20) == 0)
          progress(written + (k + 1) * DTypeSize(dtype), bytes);
      }
      written += n * DTypeSize(dtype);
      if (progress) progress(written, bytes);
    };
    tensors.push_back(std::move(t));
  }
  WriteSafetensors(JoinPath(dir, "model.safetensors"), tensors);
  // config.json last: a directory with one holds a whole checkpoint.
  const std::string config_path = JoinPath(dir, "config.json");
  {
    nlohmann::json j = c.ToJson();
    j["torch_dtype"] = dtype == DType::kBF16 ? "bfloat16" : "float32";
    std::ofstream out(config_path);
    out << j.dump(2) << "\n";
    if (!out) throw Error(Cat(config_path, ": cannot write"));
  }
}

}  // namespace wc
