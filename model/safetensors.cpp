#include "model/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace wc {
namespace {

using nlohmann::json;

// Element sizes of the dtypes the safetensors format defines.
int ElementSize(const std::string& dtype) {
  static const std::map<std::string, int> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
      {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  const size_t size = file_.size();
  if (size < 8)
    throw Error(Cat(path, ": truncated safetensors file (", size, " bytes, no header)"));
  uint64_t header_len;
  std::memcpy(&header_len, file_.data(), 8);
  if (header_len > size - 8)
    throw Error(Cat(path, ": header length ", header_len, " runs past the end of the file (", size,
                    " bytes); the file is truncated or not safetensors"));
  json header;
  try {
    header = json::parse(file_.data() + 8, file_.data() + 8 + header_len);
  } catch (const json::parse_error& e) {
    throw Error(Cat(path, ": header is not valid JSON: ", e.what()));
  }
  if (!header.is_object()) throw Error(Cat(path, ": header is not a JSON object"));
  const uint8_t* buffer = file_.data() + 8 + header_len;
  const uint64_t buffer_size = size - 8 - header_len;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) per tensor
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string where = Cat(path, ": tensor '", it.key(), "'");
    const json& e = it.value();
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets"))
      throw Error(Cat(where, ": entry needs dtype, shape and data_offsets"));
    TensorInfo t;
    t.name = it.key();
    t.file = path;
    if (!e["dtype"].is_string()) throw Error(Cat(where, ": dtype is not a string"));
    t.dtype_name = e["dtype"].get<std::string>();
    const int elem = ElementSize(t.dtype_name);
    if (elem == 0) throw Error(Cat(where, ": unknown dtype '", t.dtype_name, "'"));
    t.readable = t.dtype_name == "F32" || t.dtype_name == "BF16" || t.dtype_name == "F16";
    t.dtype = t.dtype_name == "BF16"  ? DType::kBF16
              : t.dtype_name == "F16" ? DType::kF16
                                      : DType::kF32;
    if (!e["shape"].is_array()) throw Error(Cat(where, ": shape is not an array"));
    for (const json& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (1LL << 40))
        throw Error(Cat(where, ": shape entry ", d.dump(), " is not a non-negative integer"));
      t.shape.push_back(d.get<int64_t>());
    }
    const json& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      throw Error(Cat(where, ": data_offsets must be two non-negative integers"));
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > buffer_size)
      throw Error(Cat(where, ": data_offsets [", begin, ", ", end, "] out of range (data is ",
                      buffer_size, " bytes); the file is truncated or corrupt"));
    const uint64_t expect = static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(elem);
    if (end - begin != expect)
      throw Error(Cat(where, ": ", end - begin, " bytes do not match shape ", ShapeString(t.shape),
                      " of ", t.dtype_name, " (", expect, " bytes)"));
    t.data = buffer + begin;
    t.n_bytes = end - begin;
    ranges.emplace_back(begin, end);
    tensors_.emplace(t.name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second)
      throw Error(Cat(path, ": tensors overlap at byte offsets [", ranges[i].first, ", ",
                      ranges[i - 1].second, "); the header is corrupt"));
  }
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
    json index;
    try {
      index = json::parse(ReadTextFile(index_path));
    } catch (const json::parse_error& e) {
      throw Error(Cat(index_path, ": invalid JSON: ", e.what()));
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      throw Error(Cat(index_path, ": missing object 'weight_map'"));
    std::map<std::string, SafetensorsFile*> shards;
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        throw Error(Cat(index_path, ": weight_map['", it.key(), "'] is not a file name"));
      const std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos)
        throw Error(Cat(index_path, ": shard '", shard, "' must be a file name in the directory"));
      if (!shards.count(shard)) {
        const std::string shard_path = JoinPath(dir, shard);
        if (!FileExists(shard_path))
          throw Error(Cat(index_path, ": shard '", shard, "' listed for tensor '", it.key(),
                          "' does not exist"));
        ck->files_.push_back(std::make_unique<SafetensorsFile>(shard_path));
        shards[shard] = ck->files_.back().get();
      }
      const auto& tensors = shards[shard]->tensors();
      auto t = tensors.find(it.key());
      if (t == tensors.end())
        throw Error(Cat(index_path, ": tensor '", it.key(), "' is not in its shard '", shard, "'"));
      ck->index_[it.key()] = &t->second;
    }
    return ck;
  } else {
    if (!DirExists(dir)) throw Error(Cat(dir, ": model directory not found"));
    throw Error(Cat(dir, ": no model.safetensors or model.safetensors.index.json"));
  }
  for (const auto& [name, info] : ck->files_[0]->tensors()) ck->index_[name] = &info;
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

void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t n = static_cast<uint64_t>(DTypeSize(t.dtype));
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    header[t.name] = {
        {"dtype", DTypeName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(Cat(path, ": cannot write: ", std::strerror(errno)));
  const uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<uint8_t> buffer;
  for (const auto& t : tensors) {
    int64_t n = DTypeSize(t.dtype);
    for (int64_t d : t.shape) n *= d;
    const void* bytes = t.data;
    if (bytes == nullptr) {
      buffer.resize(static_cast<size_t>(n));
      t.fill(buffer.data());
      bytes = buffer.data();
    }
    out.write(static_cast<const char*>(bytes), n);
  }
  if (!out) throw Error(Cat(path, ": write failed (disk full?)"));
}

}  // namespace wc
