#include "model/gguf/gguf_tensors.h"

#include <cstring>
#include <optional>
#include <set>

#include "model/tensor_table.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc {

std::vector<uint8_t> RopePairsToHalves(const uint8_t* data, int64_t rows, int64_t row_bytes,
                                       int64_t head_dim) {
  WC_CHECK(head_dim > 0 && head_dim % 2 == 0 && rows % head_dim == 0, "bad rope row split");
  std::vector<uint8_t> out(static_cast<size_t>(rows * row_bytes));
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < rows; h += head_dim)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(out.data() + (h + j * half + i) * row_bytes, data + (h + 2 * i + j) * row_bytes,
                    static_cast<size_t>(row_bytes));
  return out;
}

std::vector<uint8_t> QkvBlocksToGroups(const uint8_t* data, int64_t row_bytes, int64_t n_head,
                                       int64_t n_kv, int64_t head_dim) {
  WC_CHECK(n_kv > 0 && n_head % n_kv == 0, "bad qkv grouping");
  const int64_t per_group = n_head / n_kv, head_bytes = head_dim * row_bytes;
  std::vector<uint8_t> out(static_cast<size_t>((n_head + 2 * n_kv) * head_bytes));
  uint8_t* o = out.data();
  const auto copy_head = [&](int64_t gguf_head) {
    std::memcpy(o, data + gguf_head * head_bytes, static_cast<size_t>(head_bytes));
    o += head_bytes;
  };
  for (int64_t g = 0; g < n_kv; ++g) {
    for (int64_t q = 0; q < per_group; ++q) copy_head(g * per_group + q);
    copy_head(n_head + g);         // K head g
    copy_head(n_head + n_kv + g);  // V head g
  }
  return out;
}

GgufTensors BindGgufTensors(const std::string& path, const ModelConfig& c) {
  std::shared_ptr<const GgufFile> file = OpenGgufFile(path);
  GgufTensors out = BindGgufTensors(*file, c);
  out.file = std::move(file);
  return out;
}

GgufTensors BindGgufTensors(const GgufFile& g, const ModelConfig& c) {
  GgufTensors out;
  const std::string& path = g.path();
  std::set<std::string> bound;
  for (const TensorEntry& e : ModelTensors(c)) {
    if (e.gguf_name.empty())
      throw Error(Cat(path, ": tensor '", e.name, "' of this layout has no GGUF name"));
    const GgufTensor* t = g.FindTensor(e.gguf_name);
    if (t == nullptr) throw Error(Cat(path, ": tensor '", e.gguf_name, "' is missing"));
    std::vector<int64_t> hf_shape(t->ne.rbegin(), t->ne.rend());
    if (hf_shape != e.shape)
      throw Error(Cat(path, ": tensor '", e.gguf_name, "' is ", t->shape(), ", expected ",
                      ShapeString({e.shape.rbegin(), e.shape.rend()})));
    TensorInfo info;
    info.name = e.name;
    info.dtype_name = GgmlTypeName(t->type_id);
    if (!GgmlTypeRead(t->type_id))
      throw Error(Cat(path, ": tensor '", e.gguf_name, "' is ", info.dtype_name,
                      "; wormchat reads GGUF tensors of ", GgmlTypeNames(GgmlUse::kComputes), ", ",
                      GgmlTypeNames(GgmlUse::kQuantized)));
    if (t->type->use != GgmlUse::kQuantized) {
      const std::optional<DType> dtype = DTypeNamed(info.dtype_name);
      WC_CHECK(dtype.has_value(), "GGML type ", info.dtype_name, " computed but no dtype");
      info.readable = true;
      info.dtype = *dtype;
    }
    info.shape = e.shape;
    info.data = t->data;
    info.n_bytes = t->n_bytes;
    info.file = path;
    // Back into HF's row order where llama.cpp's converter changed it (the table says where).
    const int64_t rows = e.shape[0];
    const int64_t row_bytes = static_cast<int64_t>(t->n_bytes) / rows;
    switch (e.gguf_rows) {
      case GgufRows::kAsHf:
        break;
      case GgufRows::kRopePairs:
        out.reordered.push_back(RopePairsToHalves(t->data, rows, row_bytes, c.head_dim()));
        break;
      case GgufRows::kQkvBlocks:
        out.reordered.push_back(
            QkvBlocksToGroups(t->data, row_bytes, c.n_head, c.n_kv_heads, c.head_dim()));
        break;
    }
    if (e.gguf_rows != GgufRows::kAsHf) info.data = out.reordered.back().data();
    bound.insert(e.gguf_name);
    out.tensors.emplace(e.name, std::move(info));
  }
  for (const GgufTensor& t : g.contents().tensors)
    if (!bound.count(t.name))
      throw Error(Cat(path, ": tensor '", Printable(t.name), "' is not one the ",
                      ArchitectureOf(c.arch).name, " layout of its keys has"));
  return out;
}

}  // namespace wc
