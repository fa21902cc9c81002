#include "model/checkpoint.h"

#include "kernels/gemm/quant/quant_panels.h"

#include <set>

#include "model/gguf/gguf_config.h"
#include "model/gguf/gguf_tensors.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {

Checkpoint::Checkpoint() = default;
Checkpoint::~Checkpoint() = default;

std::unique_ptr<Checkpoint> Checkpoint::Open(const std::string& path, const ModelConfig& c) {
  if (!IsGgufModel(path)) return Open(path);
  auto ck = std::make_unique<Checkpoint>();
  ck->source_ = path;
  ck->gguf_ = std::make_unique<GgufTensors>(BindGgufTensors(path, c));
  for (const auto& [name, info] : ck->gguf_->tensors) ck->index_[name] = &info;
  return ck;
}

std::unique_ptr<Checkpoint> Checkpoint::Open(const std::string& dir) {
  auto ck = std::make_unique<Checkpoint>();
  const std::string single = JoinPath(dir, "model.safetensors");
  const std::string index_path = JoinPath(dir, "model.safetensors.index.json");
  if (FileExists(single)) {
    ck->source_ = single;
    ck->files_.push_back(std::make_unique<SafetensorsFile>(single));
  } else if (FileExists(index_path)) {
    ck->source_ = index_path;
    std::map<std::string, SafetensorsFile*> shards;
    for (const auto& [tensor, shard] : ParseSafetensorsIndex(
             ReadTextFile(index_path, static_cast<int64_t>(kJsonFileMaxBytes)), index_path)) {
      if (!shards.count(shard)) {
        const std::string shard_path = JoinPath(dir, shard);
        if (!FileExists(shard_path))
          throw Error(Cat(index_path, ": shard '", Printable(shard), "' listed for tensor '",
                          Printable(tensor), "' does not exist"));
        ck->files_.push_back(std::make_unique<SafetensorsFile>(shard_path));
        shards[shard] = ck->files_.back().get();
      }
      const auto& tensors = shards[shard]->tensors();
      auto t = tensors.find(tensor);
      if (t == tensors.end())
        throw Error(Cat(index_path, ": tensor '", Printable(tensor), "' is not in its shard '",
                        Printable(shard), "'"));
      ck->index_[tensor] = &t->second;
    }
    for (const auto& f : ck->files_)
      ck->metadata_.insert(f->metadata().begin(), f->metadata().end());
    return ck;
  } else {
    if (!DirExists(dir)) throw Error(Cat(dir, ": model directory not found"));
    for (const std::string& path : {single, index_path}) {
      const std::string problem = FileProblem(path);
      if (problem != "missing") throw Error(Cat(path, ": ", problem));
    }
    throw Error(Cat(dir, ": no model.safetensors or model.safetensors.index.json"));
  }
  for (const auto& [name, info] : ck->files_[0]->tensors()) ck->index_[name] = &info;
  ck->metadata_ = ck->files_[0]->metadata();
  return ck;
}

const TensorInfo& Checkpoint::Get(const std::string& name,
                                  const std::vector<int64_t>& shape) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error(Cat(source_, ": missing tensor '", name, "'"));
  const TensorInfo& t = *it->second;
  if (t.shape != shape)
    throw Error(Cat(t.file, ": tensor '", name, "' has shape ", ShapeString(t.shape), ", expected ",
                    ShapeString(shape), " from config.json"));
  if (!t.readable)
    throw Error(Cat(t.file, ": tensor '", name, "' has dtype ", t.dtype_name,
                    "; wormchat reads F32, BF16 and F16 weights"));
  return t;
}

const TensorInfo& Checkpoint::GetMatrix(const std::string& name,
                                        const std::vector<int64_t>& shape) const {
  const TensorInfo& t = Raw(name);
  if (!t.readable && GgmlQuantNamed(t.dtype_name) && t.shape == shape) return t;
  return Get(name, shape);
}

const TensorInfo& Checkpoint::Raw(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error(Cat(source_, ": missing tensor '", name, "'"));
  return *it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : index_) names.push_back(name);
  return names;
}

size_t Checkpoint::total_bytes() const {
  size_t total = 0;
  for (const auto& [name, t] : index_) total += t->n_bytes;
  return total;
}

std::string Checkpoint::dtype_summary() const {
  std::set<std::string> names;
  for (const auto& [name, t] : index_) names.insert(t->dtype_name);
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : "+") + n;
  return s;
}

}  // namespace wc
