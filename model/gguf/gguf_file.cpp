#include "model/gguf/gguf_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>

#include "tokenizer/unicode.h"
#include "util/error.h"
#include "util/json_file.h"

namespace wc {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32

// Reads the file front to back; every read is checked against the bytes left.
class Reader {
 public:
  Reader(const uint8_t* bytes, size_t size, const std::string& path)
      : bytes_(bytes), size_(size), path_(path) {}

  template <class... Args>
  [[noreturn]] void Fail(const Args&... args) const {
    throw Error(Cat(path_, ": ", args...));
  }

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  template <class T>
  T Scalar(const std::string& what) {
    if (left() < sizeof(T))
      Fail(what, " runs past the end of the file (", sizeof(T), " bytes at offset ", pos_, " of ",
           size_, ")");
    T v;
    std::memcpy(&v, bytes_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A GGUF string: u64 length, bytes. `utf8`: refused unless valid UTF-8 (names and keys).
  std::string String(const std::string& what, bool utf8) {
    const uint64_t len = Scalar<uint64_t>(what + "'s length");
    if (len > left())
      Fail(what, " of ", len, " bytes runs past the end of the file (offset ", pos_, ")");
    std::string s(reinterpret_cast<const char*>(bytes_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    if (utf8 && !unicode::IsValidUtf8(s)) Fail(what, " is not UTF-8");
    return s;
  }

  void Skip(uint64_t n, const std::string& what) {
    if (n > left()) Fail(what, " runs past the end of the file");
    pos_ += n;
  }

 private:
  const uint8_t* bytes_;
  size_t size_;
  const std::string& path_;
  uint64_t pos_ = 0;
};

// Bytes of one scalar of `t` (0 for string and array).
uint64_t ScalarBytes(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

bool KnownType(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufType::kF64);
}

bool IsFloat(GgufType t) {
  return t == GgufType::kF32 || t == GgufType::kF64;
}

// One scalar of type t: an integer or bool into *i (a u64 above INT64_MAX sets *big instead), a
// float into *f, a string into *s.
void ReadScalar(Reader& r, GgufType t, const std::string& what, int64_t* i, bool* big, double* f,
                std::string* s) {
  switch (t) {
    case GgufType::kU8:
      *i = r.Scalar<uint8_t>(what);
      return;
    case GgufType::kI8:
      *i = r.Scalar<int8_t>(what);
      return;
    case GgufType::kU16:
      *i = r.Scalar<uint16_t>(what);
      return;
    case GgufType::kI16:
      *i = r.Scalar<int16_t>(what);
      return;
    case GgufType::kU32:
      *i = r.Scalar<uint32_t>(what);
      return;
    case GgufType::kI32:
      *i = r.Scalar<int32_t>(what);
      return;
    case GgufType::kU64: {
      const uint64_t v = r.Scalar<uint64_t>(what);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        *big = true;
        *i = 0;
        return;
      }
      *i = static_cast<int64_t>(v);
      return;
    }
    case GgufType::kI64:
      *i = r.Scalar<int64_t>(what);
      return;
    case GgufType::kBool: {
      const uint8_t v = r.Scalar<uint8_t>(what);
      if (v > 1) r.Fail(what, ": bool byte ", static_cast<int>(v), " is neither 0 nor 1");
      *i = v;
      return;
    }
    case GgufType::kF32:
      *f = r.Scalar<float>(what);
      return;
    case GgufType::kF64:
      *f = r.Scalar<double>(what);
      return;
    case GgufType::kString:
      *s = r.String(what, false);
      return;
    case GgufType::kArray:
      break;
  }
  r.Fail(what, ": not a scalar type");
}

GgufValue ReadValue(Reader& r, const std::string& key) {
  const std::string what = Cat("key '", Printable(key), "'");
  GgufValue v;
  const uint32_t type = r.Scalar<uint32_t>(what + "'s type");
  if (!KnownType(type)) r.Fail(what, ": unknown value type ", type);
  v.type = static_cast<GgufType>(type);
  if (v.type != GgufType::kArray) {
    ReadScalar(r, v.type, what, &v.i, &v.u64_above_int64, &v.f, &v.s);
    return v;
  }
  const uint32_t elem = r.Scalar<uint32_t>(what + "'s element type");
  if (!KnownType(elem)) r.Fail(what, ": unknown array element type ", elem);
  v.elem_type = static_cast<GgufType>(elem);
  if (v.elem_type == GgufType::kArray) r.Fail(what, ": arrays of arrays are not supported");
  const uint64_t n = r.Scalar<uint64_t>(what + "'s element count");
  // Each element takes at least one byte (a string its 8-byte length): a count the rest of the
  // file cannot hold is refused before anything is allocated.
  const uint64_t min_bytes = v.elem_type == GgufType::kString ? 8 : ScalarBytes(v.elem_type);
  if (n > kGgufMaxArray) r.Fail(what, ": ", n, " array elements, more than ", kGgufMaxArray);
  if (n > r.left() / min_bytes)
    r.Fail(what, ": an array of ", n, " elements runs past the end of the file");
  for (uint64_t k = 0; k < n; ++k) {
    int64_t i = 0;
    double f = 0;
    std::string s;
    ReadScalar(r, v.elem_type, what, &i, &v.u64_above_int64, &f, &s);
    if (v.elem_type == GgufType::kString)
      v.strings.push_back(std::move(s));
    else if (IsFloat(v.elem_type))
      v.floats.push_back(f);
    else
      v.ints.push_back(i);
  }
  return v;
}

// a * b, or false when it overflows int64.
bool Mul(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

}  // namespace

std::string GgufTypeName(uint32_t type) {
  static const char* const kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  return KnownType(type) ? kNames[type] : Cat("type ", type);
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // checked not to overflow when parsed
  return n;
}

int64_t GgufTensor::rows() const {
  int64_t n = 1;
  for (size_t d = 1; d < ne.size(); ++d) n *= ne[d];
  return n;
}

std::string GgufTensor::shape() const {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += Cat(i ? ", " : "", ne[i]);
  return s + "]";
}

GgufContents ParseGguf(const uint8_t* bytes, size_t size, const std::string& path) {
  Reader r(bytes, size, path);
  GgufContents c;
  const uint32_t magic = r.Scalar<uint32_t>("the GGUF magic");
  if (magic == __builtin_bswap32(kMagic))
    r.Fail("a big-endian GGUF file; only little-endian is read");
  if (magic != kMagic) r.Fail("not a GGUF file (no 'GGUF' magic at its start)");
  c.version = r.Scalar<uint32_t>("the version");
  if (c.version == __builtin_bswap32(2u) || c.version == __builtin_bswap32(3u))
    r.Fail("a big-endian GGUF file; only little-endian is read");
  if (c.version != 2 && c.version != 3)
    r.Fail("GGUF version ", c.version, " is not supported (2 and 3 are)");
  const uint64_t n_tensors = r.Scalar<uint64_t>("the tensor count");
  const uint64_t n_keys = r.Scalar<uint64_t>("the key count");
  if (n_tensors > kGgufMaxTensors) r.Fail(n_tensors, " tensors, more than ", kGgufMaxTensors);
  if (n_keys > kGgufMaxKeys) r.Fail(n_keys, " metadata keys, more than ", kGgufMaxKeys);

  for (uint64_t k = 0; k < n_keys; ++k) {
    std::string key = r.String(Cat("key ", k, "'s name"), true);
    if (key.empty()) r.Fail("key ", k, " has an empty name");
    if (c.metadata.count(key)) r.Fail("key '", Printable(key), "' is listed twice");
    GgufValue v = ReadValue(r, key);
    c.key_order.push_back(key);
    c.metadata.emplace(std::move(key), std::move(v));
  }
  if (auto it = c.metadata.find("general.alignment"); it != c.metadata.end()) {
    const GgufValue& a = it->second;
    if (a.type != GgufType::kU32)
      r.Fail("key 'general.alignment' is ", GgufTypeName(static_cast<uint32_t>(a.type)),
             ", expected u32");
    if (a.i == 0 || (a.i & (a.i - 1)) != 0)
      r.Fail("key 'general.alignment' is ", a.i, ", not a power of two");
    c.alignment = static_cast<uint32_t>(a.i);
  }

  // Each tensor info takes at least 8 + 4 + 4 + 8 bytes: a count the file cannot hold is refused
  // before anything is allocated.
  if (n_tensors > r.left() / 24) r.Fail(n_tensors, " tensors' infos run past the end of the file");
  c.tensors.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = r.String(Cat("tensor ", k, "'s name"), true);
    const std::string what = Cat("tensor '", Printable(t.name), "'");
    if (c.tensor_index.count(t.name)) r.Fail(what, " is listed twice");
    const uint32_t n_dims = r.Scalar<uint32_t>(what + "'s dimension count");
    if (n_dims > kGgufMaxDims) r.Fail(what, ": ", n_dims, " dimensions, at most 4");
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = r.Scalar<uint64_t>(what + "'s dimensions");
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        r.Fail(what, ": dimension ", d, " is negative");
      t.ne.push_back(static_cast<int64_t>(ne));
      if (!Mul(numel, static_cast<int64_t>(ne), &numel)) r.Fail(what, ": element count overflows");
    }
    t.type_id = r.Scalar<uint32_t>(what + "'s type");
    t.type = FindGgmlType(t.type_id);
    if (t.type == nullptr) r.Fail(what, ": unknown GGML type ", t.type_id);
    t.offset = r.Scalar<uint64_t>(what + "'s offset");
    const int64_t row = t.ne.empty() ? 1 : t.ne[0];
    if (row % t.type->block != 0)
      r.Fail(what, ": row length ", row, " is not a whole number of ", t.type->name, " blocks of ",
             t.type->block);
    int64_t n_bytes = 0;
    if (!Mul(numel / t.type->block, t.type->block_bytes, &n_bytes))
      r.Fail(what, ": byte count overflows");
    t.n_bytes = static_cast<size_t>(n_bytes);
    if (t.offset % c.alignment != 0)
      r.Fail(what, ": offset ", t.offset, " is not a multiple of the alignment ", c.alignment);
    c.tensor_index.emplace(t.name, c.tensors.size());
    c.tensors.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t pad = (c.alignment - r.pos() % c.alignment) % c.alignment;
  if (!c.tensors.empty()) r.Skip(pad, "the padding before the tensor data");
  c.data_offset = r.pos();
  const uint64_t data_size = size - c.data_offset;
  std::vector<std::pair<uint64_t, size_t>> spans;  // (offset, tensor) sorted to find overlaps
  for (size_t k = 0; k < c.tensors.size(); ++k) {
    GgufTensor& t = c.tensors[k];
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      r.Fail("tensor '", Printable(t.name), "' (", t.type->name, " ", t.shape(), ", ", t.n_bytes,
             " bytes at data offset ", t.offset, ") runs past the end of the file");
    t.data = bytes + c.data_offset + t.offset;
    spans.emplace_back(t.offset, k);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t k = 1; k < spans.size(); ++k) {
    const GgufTensor& a = c.tensors[spans[k - 1].second];
    const GgufTensor& b = c.tensors[spans[k].second];
    if (a.offset + a.n_bytes > b.offset && a.n_bytes > 0 && b.n_bytes > 0)
      r.Fail("tensors '", Printable(a.name), "' and '", Printable(b.name), "' overlap in the file");
  }
  return c;
}

bool LooksLikeGguf(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  uint32_t magic = 0;
  const bool read = std::fread(&magic, 4, 1, f) == 1;
  std::fclose(f);
  return read && (magic == kMagic || magic == __builtin_bswap32(kMagic));
}

GgufFile::GgufFile(const std::string& path)
    : file_(std::make_unique<MappedFile>(path)),
      path_(path),
      bytes_(file_->data()),
      size_(file_->size()),
      contents_(ParseGguf(bytes_, size_, path)) {}

GgufFile::GgufFile(const uint8_t* bytes, size_t size, const std::string& path)
    : path_(path), bytes_(bytes), size_(size), contents_(ParseGguf(bytes, size, path)) {}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = contents_.metadata.find(key);
  return it == contents_.metadata.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::FindTensor(const std::string& name) const {
  auto it = contents_.tensor_index.find(name);
  return it == contents_.tensor_index.end() ? nullptr : &contents_.tensors[it->second];
}

const GgufValue& GgufFile::Get(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) throw Error(Cat(path(), ": key '", Printable(key), "' is missing"));
  return *v;
}

namespace {

[[noreturn]] void WrongType(const std::string& path, const std::string& key, const GgufValue& v,
                            const char* expected) {
  std::string got = GgufTypeName(static_cast<uint32_t>(v.type));
  if (v.is_array()) got = Cat("an array of ", GgufTypeName(static_cast<uint32_t>(v.elem_type)));
  throw Error(Cat(path, ": key '", Printable(key), "' is ", got, ", expected ", expected));
}

bool IsInteger(GgufType t) {
  return t != GgufType::kString && t != GgufType::kArray && t != GgufType::kBool && !IsFloat(t);
}

}  // namespace

std::string GgufFile::String(const std::string& key) const {
  const GgufValue& v = Get(key);
  if (v.type != GgufType::kString) WrongType(path(), key, v, "a string");
  return v.s;
}

int64_t GgufFile::Int(const std::string& key) const {
  const GgufValue& v = Get(key);
  if (!IsInteger(v.type)) WrongType(path(), key, v, "an integer");
  if (v.u64_above_int64)
    throw Error(Cat(path(), ": key '", Printable(key), "' is a u64 above 2^63 - 1"));
  return v.i;
}

double GgufFile::Float(const std::string& key) const {
  const GgufValue& v = Get(key);
  if (!IsFloat(v.type)) WrongType(path(), key, v, "a float");
  return v.f;
}

bool GgufFile::Bool(const std::string& key) const {
  const GgufValue& v = Get(key);
  if (v.type != GgufType::kBool) WrongType(path(), key, v, "a bool");
  return v.i != 0;
}

const std::vector<std::string>& GgufFile::Strings(const std::string& key) const {
  const GgufValue& v = Get(key);
  if (!v.is_array() || v.elem_type != GgufType::kString)
    WrongType(path(), key, v, "an array of strings");
  return v.strings;
}

std::shared_ptr<const GgufFile> OpenGgufFile(const std::string& path) {
  struct Identity {
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_ns;
    bool operator==(const Identity& o) const {
      return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
    }
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::make_shared<const GgufFile>(path);  // names why
  const Identity id{st.st_dev, st.st_ino, st.st_size,
                    int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
  static std::mutex mu;
  static std::string last_path;
  static Identity last_id{};
  static std::shared_ptr<const GgufFile> last;
  const std::lock_guard<std::mutex> lock(mu);
  if (last != nullptr && last_path == path && last_id == id) return last;
  last = std::make_shared<const GgufFile>(path);
  last_path = path;
  last_id = id;
  return last;
}

}  // namespace wc
