// A GGUF file built in memory, for tests and fuzzer seeds: keys and tensors in the order added,
// little-endian as the format is; Bytes() lays them out as ggml/src/gguf.cpp writes them. Fields
// a test wants wrong can be set wrong (any type number, offset or dimension).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace wc::test {

class GgufWriter {
 public:
  uint32_t version = 3;
  uint32_t alignment = 32;  // for laying out the data (general.alignment is a key like any other)

  // Raw appenders for a key's value.
  struct Value {
    std::vector<uint8_t> bytes;
    template <class T>
    Value& Put(T v) {
      const auto* p = reinterpret_cast<const uint8_t*>(&v);
      bytes.insert(bytes.end(), p, p + sizeof(T));
      return *this;
    }
    Value& Str(const std::string& s) {
      Put<uint64_t>(s.size());
      bytes.insert(bytes.end(), s.begin(), s.end());
      return *this;
    }
  };

  void Key(const std::string& key, uint32_t type, const Value& v) {
    keys_.push_back({key, type, v});
  }
  void U32(const std::string& key, uint32_t v) { Key(key, 4, Value().Put(v)); }
  void I32(const std::string& key, int32_t v) { Key(key, 5, Value().Put(v)); }
  void U64(const std::string& key, uint64_t v) { Key(key, 10, Value().Put(v)); }
  void F32(const std::string& key, float v) { Key(key, 6, Value().Put(v)); }
  void Bool(const std::string& key, bool v) { Key(key, 7, Value().Put<uint8_t>(v ? 1 : 0)); }
  void Str(const std::string& key, const std::string& v) { Key(key, 8, Value().Str(v)); }
  void Strs(const std::string& key, const std::vector<std::string>& v) {
    Value a;
    a.Put<uint32_t>(8).Put<uint64_t>(v.size());
    for (const std::string& s : v) a.Str(s);
    Key(key, 9, a);
  }
  void I32s(const std::string& key, const std::vector<int32_t>& v) {
    Value a;
    a.Put<uint32_t>(5).Put<uint64_t>(v.size());
    for (int32_t x : v) a.Put(x);
    Key(key, 9, a);
  }
  void F32s(const std::string& key, const std::vector<float>& v) {
    Value a;
    a.Put<uint32_t>(6).Put<uint64_t>(v.size());
    for (float x : v) a.Put(x);
    Key(key, 9, a);
  }

  // A tensor of GGML type `type` with dims ne (ne[0] the row length) and these data bytes; its
  // offset is the next aligned one unless `offset` is given (then its data is written only where
  // it falls inside the others').
  void Tensor(const std::string& name, uint32_t type, std::vector<uint64_t> ne,
              std::vector<uint8_t> data, int64_t offset = -1) {
    tensors_.push_back({name, type, std::move(ne), std::move(data), offset});
  }

  // The keys alone, as Bytes() lays them out (AddKeys splices them into a file).
  std::vector<uint8_t> KeyBytes() const {
    Value out;
    for (const auto& k : keys_) {
      out.Str(k.key).Put(k.type);
      out.bytes.insert(out.bytes.end(), k.value.bytes.begin(), k.value.bytes.end());
    }
    return out.bytes;
  }
  size_t key_count() const { return keys_.size(); }

  std::vector<uint8_t> Bytes() const {
    Value out;
    out.Put<uint32_t>(0x46554747)
        .Put(version)
        .Put<uint64_t>(tensors_.size())
        .Put<uint64_t>(keys_.size());
    for (const auto& k : keys_) {
      out.Str(k.key).Put(k.type);
      out.bytes.insert(out.bytes.end(), k.value.bytes.begin(), k.value.bytes.end());
    }
    std::vector<uint64_t> offsets;
    uint64_t at = 0;
    for (const auto& t : tensors_) {
      const uint64_t off = t.offset >= 0 ? static_cast<uint64_t>(t.offset) : at;
      offsets.push_back(off);
      // A tensor placed by hand takes no room of its own (a test puts it where it wants it).
      if (t.offset < 0) at = (off + t.data.size() + alignment - 1) / alignment * alignment;
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      out.Str(t.name).Put<uint32_t>(t.ne.size());
      for (uint64_t d : t.ne) out.Put(d);
      out.Put(t.type).Put(offsets[i]);
    }
    if (!tensors_.empty()) {
      while (out.bytes.size() % alignment) out.bytes.push_back(0);
      const size_t base = out.bytes.size();
      out.bytes.resize(base + at, 0);
      for (size_t i = 0; i < tensors_.size(); ++i) {
        const auto& t = tensors_[i];
        if (!t.data.empty() && offsets[i] + t.data.size() <= at)
          std::memcpy(&out.bytes[base + offsets[i]], t.data.data(), t.data.size());
      }
    }
    return out.bytes;
  }

 private:
  struct K {
    std::string key;
    uint32_t type;
    Value value;
  };
  struct T {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> ne;
    std::vector<uint8_t> data;
    int64_t offset;
  };
  std::vector<K> keys_;
  std::vector<T> tensors_;
};

// A whole GGUF file `file` with `keys`' keys put before its own (none of them may be in it
// already) and a string key "test.padding" that keeps the data at the same `alignment` (the
// file's general.alignment, 32 when it has none): the tensor table and data are unchanged, so the
// model computes the same bits. Tensors added to `keys` are ignored.
inline std::vector<uint8_t> AddKeys(const std::vector<uint8_t>& file, const GgufWriter& keys,
                                    uint32_t alignment = 32) {
  constexpr size_t kCountsEnd = 24;  // magic, version, n_tensors, n_kv
  std::vector<uint8_t> added = keys.KeyBytes();
  const std::string pad_key = "test.padding";
  const size_t pad_fixed = 8 + pad_key.size() + 4 + 8;  // key, type, string length
  const size_t pad = (alignment - (added.size() + pad_fixed) % alignment) % alignment;
  GgufWriter padding;
  padding.Str(pad_key, std::string(pad, ' '));
  const std::vector<uint8_t> p = padding.KeyBytes();
  added.insert(added.end(), p.begin(), p.end());
  std::vector<uint8_t> out(file.begin(), file.begin() + kCountsEnd);
  uint64_t n_kv;
  std::memcpy(&n_kv, &out[16], sizeof n_kv);
  n_kv += keys.key_count() + 1;
  std::memcpy(&out[16], &n_kv, sizeof n_kv);
  out.insert(out.end(), added.begin(), added.end());
  out.insert(out.end(), file.begin() + kCountsEnd, file.end());
  return out;
}

}  // namespace wc::test
