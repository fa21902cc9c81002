#include "model/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

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

namespace {

// The first pass over a header: its JSON syntax only (a header that is not JSON is reported as
// such, whatever its structure up to the error), naming the tensor whose entry holds the error.
class SyntaxCheck {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit SyntaxCheck(const std::string& path) : path_(path) {}
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(number_integer_t) { return true; }
  bool number_unsigned(number_unsigned_t) { return true; }
  bool number_float(number_float_t, const string_t&) { return true; }
  bool string(string_t&) { return true; }
  bool binary(binary_t&) { return true; }
  bool start_object(std::size_t) { return Open(); }
  bool start_array(std::size_t) { return Open(); }
  bool end_object() { return --depth_, true; }
  bool end_array() { return --depth_, true; }
  bool key(string_t& k) {
    if (depth_ == 1) name_ = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& e) {
    throw Error(Cat(Where(), ": header is not valid JSON: ", JsonErrorText(e)));
  }

 private:
  bool Open() {
    if (++depth_ > kSafetensorsMaxDepth)
      throw Error(Cat(Where(), ": header nests deeper than ", kSafetensorsMaxDepth, " levels"));
    return true;
  }
  // The file, and the tensor whose entry is being read.
  std::string Where() const {
    return name_.empty() ? path_ : Cat(path_, ": tensor '", Printable(name_), "'");
  }

  const std::string& path_;
  int depth_ = 0;
  std::string name_;  // the last key of the header object
};

// Reads a safetensors header as a stream of JSON events (nlohmann's SAX interface) straight into
// TensorInfo entries, so memory follows the tensors listed, not the header's shape. Depth counts
// the open arrays and objects: 1 the header object, 2 an entry, 3 an entry's shape or offsets.
class HeaderReader {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  HeaderReader(const std::string& path, const uint8_t* buffer, uint64_t buffer_size,
               std::map<std::string, std::string>* metadata)
      : path_(path), buffer_(buffer), buffer_size_(buffer_size), metadata_(metadata) {}

  std::map<std::string, TensorInfo> Finish() {
    std::sort(ranges_.begin(), ranges_.end());
    for (size_t i = 1; i < ranges_.size(); ++i) {
      if (ranges_[i].first < ranges_[i - 1].second)
        throw Error(Cat(path_, ": tensors overlap at byte offsets [", ranges_[i].first, ", ",
                        ranges_[i - 1].second, "); the header is corrupt"));
    }
    return std::move(tensors_);
  }

  bool null() { return Scalar(nullptr, "null"); }
  bool boolean(bool) { return Scalar(nullptr, "a boolean"); }
  bool number_integer(number_integer_t v) {
    if (v >= 0) return number_unsigned(static_cast<number_unsigned_t>(v));
    return Scalar(nullptr, Cat(v));
  }
  bool number_unsigned(number_unsigned_t v) { return Scalar(&v, Cat(v)); }
  bool number_float(number_float_t, const string_t& text) { return Scalar(nullptr, text); }
  bool string(string_t& v) {
    if (InMetadata() && depth_ == 2 && metadata_ != nullptr) (*metadata_)[meta_key_] = v;
    if (Skipping()) return true;
    if (depth_ == 2 && field_ == Field::kDtype) {
      entry_.dtype_name = v;
      return true;
    }
    return Scalar(nullptr, "a string");
  }
  bool binary(binary_t&) { return Scalar(nullptr, "binary data"); }

  bool start_object(std::size_t) { return Open(true); }
  bool start_array(std::size_t) { return Open(false); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }

  bool key(string_t& k) {
    if (InMetadata() && depth_ == 2) meta_key_ = k;
    if (Skipping()) return true;
    if (depth_ == 1) {
      if (k == "__metadata__") {
        if (seen_metadata_) throw Error(Cat(path_, ": __metadata__ is listed twice"));
        seen_metadata_ = true;
      } else if (tensors_.count(k)) {
        throw Error(Cat(path_, ": tensor '", Printable(k), "' is listed twice"));
      }
      name_ = k;
      return true;
    }
    // depth_ == 2: a field of an entry.
    field_ = k == "dtype"          ? Field::kDtype
             : k == "shape"        ? Field::kShape
             : k == "data_offsets" ? Field::kOffsets
                                   : Field::kOther;
    if (field_ != Field::kOther) {
      const unsigned bit = 1u << static_cast<int>(field_);
      if (fields_seen_ & bit) throw Error(Cat(Where(), ": '", k, "' is listed twice"));
      fields_seen_ |= bit;
    }
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const json::exception& e) {
    throw Error(
        Cat(depth_ >= 2 ? Where() : path_, ": header is not valid JSON: ", JsonErrorText(e)));
  }

 private:
  enum class Field { kDtype, kShape, kOffsets, kOther };

  std::string Where() const { return Cat(path_, ": tensor '", Printable(name_), "'"); }
  bool InMetadata() const { return name_ == "__metadata__"; }
  // Inside a value that is not read: the metadata, an entry's unknown fields.
  bool Skipping() const { return skip_from_ > 0 && depth_ >= skip_from_; }

  bool Scalar(const number_unsigned_t* unsigned_value, const std::string& got) {
    if (Skipping()) return true;
    switch (depth_) {
      case 0:
        throw Error(Cat(path_, ": header is not a JSON object"));
      case 1:
        if (InMetadata()) return true;
        throw Error(Cat(Where(), ": entry needs dtype, shape and data_offsets"));
      case 2:
        if (field_ == Field::kOther) return true;
        BadField();
      default:  // 3: an element of shape or data_offsets
        if (field_ == Field::kShape) {
          if (unsigned_value == nullptr || *unsigned_value > uint64_t{INT64_MAX})
            throw Error(Cat(Where(), ": shape entry ", Printable(got, 40),
                            " is not a non-negative integer"));
          if (entry_.shape.size() >= kSafetensorsMaxRank)
            throw Error(Cat(Where(), ": shape has more than ", kSafetensorsMaxRank, " dimensions"));
          entry_.shape.push_back(static_cast<int64_t>(*unsigned_value));
        } else {
          if (unsigned_value == nullptr || offsets_.size() >= 2)
            throw Error(Cat(Where(), ": data_offsets must be two non-negative integers"));
          offsets_.push_back(*unsigned_value);
        }
        return true;
    }
  }

  bool Open(bool object) {
    if (Skipping()) {
      if (++depth_ > kSafetensorsMaxDepth) TooDeep();
      return true;
    }
    ++depth_;
    switch (depth_) {
      case 1:
        if (!object) throw Error(Cat(path_, ": header is not a JSON object"));
        return true;
      case 2:
        if (InMetadata()) {
          skip_from_ = 2;
          return true;
        }
        if (!object) throw Error(Cat(Where(), ": entry needs dtype, shape and data_offsets"));
        entry_ = TensorInfo{};
        offsets_.clear();
        fields_seen_ = 0;
        return true;
      case 3:
        if (field_ == Field::kOther) {
          skip_from_ = 3;
          return true;
        }
        if (object || field_ == Field::kDtype) BadField();
        return true;
      default:  // nested inside shape or data_offsets
        return Scalar(nullptr, object ? "{...}" : "[...]");
    }
  }

  // The current field's value has the wrong type.
  [[noreturn]] void BadField() const {
    throw Error(Cat(Where(), field_ == Field::kDtype ? ": dtype is not a string"
                             : field_ == Field::kShape
                                 ? ": shape is not an array"
                                 : ": data_offsets must be two non-negative integers"));
  }

  [[noreturn]] void TooDeep() const {
    throw Error(Cat(depth_ >= 2 ? Where() : path_, ": header nests deeper than ",
                    kSafetensorsMaxDepth, " levels"));
  }

  bool Close() {
    if (Skipping()) {
      if (depth_-- == skip_from_) skip_from_ = 0;
      return true;
    }
    if (depth_ == 2) EndEntry();
    --depth_;
    return true;
  }

  void EndEntry() {
    const unsigned all = (1u << static_cast<int>(Field::kDtype)) |
                         (1u << static_cast<int>(Field::kShape)) |
                         (1u << static_cast<int>(Field::kOffsets));
    if ((fields_seen_ & all) != all)
      throw Error(Cat(Where(), ": entry needs dtype, shape and data_offsets"));
    TensorInfo t = std::move(entry_);
    t.name = name_;
    t.file = path_;
    const int elem = ElementSize(t.dtype_name);
    if (elem == 0) throw Error(Cat(Where(), ": unknown dtype '", Printable(t.dtype_name), "'"));
    const std::optional<DType> dtype = DTypeNamed(t.dtype_name);
    t.readable = dtype.has_value();
    t.dtype = dtype.value_or(DType::kF32);
    if (offsets_.size() != 2)
      throw Error(Cat(Where(), ": data_offsets must be two non-negative integers"));
    const uint64_t begin = offsets_[0], end = offsets_[1];
    if (begin > end || end > buffer_size_)
      throw Error(Cat(Where(), ": data_offsets [", begin, ", ", end, "] out of range (data is ",
                      buffer_size_, " bytes); the file is truncated or corrupt"));
    // The byte count, multiplied in TensorInfo::numel()'s order, never overflowing on the way.
    uint64_t expect = 1;
    for (int64_t d : t.shape) {
      if (__builtin_mul_overflow(expect, static_cast<uint64_t>(d), &expect) ||
          expect > uint64_t{INT64_MAX})
        throw Error(Cat(Where(), ": shape ", ShapeString(t.shape), " has more elements than 2^63"));
    }
    if (__builtin_mul_overflow(expect, static_cast<uint64_t>(elem), &expect))
      throw Error(Cat(Where(), ": shape ", ShapeString(t.shape), " of ", t.dtype_name,
                      " needs more than 2^64 bytes"));
    if (end - begin != expect)
      throw Error(Cat(Where(), ": ", end - begin, " bytes do not match shape ",
                      ShapeString(t.shape), " of ", t.dtype_name, " (", expect, " bytes)"));
    t.data = buffer_ + begin;
    t.n_bytes = end - begin;
    ranges_.emplace_back(begin, end);
    tensors_.emplace(t.name, std::move(t));
  }

  const std::string& path_;
  const uint8_t* buffer_;
  uint64_t buffer_size_;
  int depth_ = 0;
  int skip_from_ = 0;  // > 0: the depth of the value being skipped
  std::string name_;   // the header key being read
  bool seen_metadata_ = false;
  Field field_ = Field::kOther;  // the entry's field being read
  unsigned fields_seen_ = 0;     // bit per Field
  TensorInfo entry_;
  std::vector<uint64_t> offsets_;
  std::map<std::string, TensorInfo> tensors_;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;  // [begin, end) per tensor
  std::map<std::string, std::string>* metadata_;       // __metadata__'s string values, or null
  std::string meta_key_;                               // the __metadata__ key being read
};

}  // namespace

std::map<std::string, TensorInfo> ParseSafetensors(const uint8_t* bytes, size_t size,
                                                   const std::string& path,
                                                   std::map<std::string, std::string>* metadata) {
  if (size < 8)
    throw Error(Cat(path, ": truncated safetensors file (", size, " bytes, no header)"));
  uint64_t header_len;
  std::memcpy(&header_len, bytes, 8);
  if (header_len > size - 8)
    throw Error(Cat(path, ": header length ", header_len, " runs past the end of the file (", size,
                    " bytes); the file is truncated or not safetensors"));
  if (header_len > kSafetensorsMaxHeaderBytes)
    throw Error(Cat(path, ": header length ", header_len, " is above the safetensors limit of ",
                    kSafetensorsMaxHeaderBytes, " bytes"));
  const char* header = reinterpret_cast<const char*>(bytes) + 8;
  SyntaxCheck syntax(path);
  json::sax_parse(header, header + header_len, &syntax);
  HeaderReader reader(path, bytes + 8 + header_len, size - 8 - header_len, metadata);
  json::sax_parse(header, header + header_len, &reader);
  return reader.Finish();
}

std::map<std::string, std::string> ParseSafetensorsIndex(std::string_view text,
                                                         const std::string& path) {
  const json index = ParseJson(text, path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw Error(Cat(path, ": missing object 'weight_map'"));
  std::map<std::string, std::string> shards;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    const std::string where = Cat(path, ": weight_map['", Printable(tensor), "']");
    if (!shard.is_string()) throw Error(Cat(where, " is not a file name"));
    const std::string name = shard.get<std::string>();
    bool plain = !name.empty() && name != "." && name != "..";
    for (const char c : name) plain = plain && c != '/' && static_cast<unsigned char>(c) >= 0x20;
    if (!plain)
      throw Error(
          Cat(where, ": shard '", Printable(name), "' must be a file name in the directory"));
    shards.emplace(tensor, name);
  }
  return shards;
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(path), tensors_(ParseSafetensors(file_.data(), file_.size(), path, &metadata_)) {}

int64_t TensorToWrite::bytes() const {
  int64_t n = raw_dtype != nullptr ? ElementSize(raw_dtype) : DTypeSize(dtype);
  for (int64_t d : shape) n *= d;
  return n;
}

void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    WC_CHECK(t.raw_dtype == nullptr || ElementSize(t.raw_dtype) > 0, "unknown safetensors dtype");
    const auto n = static_cast<uint64_t>(t.bytes());
    header[t.name] = {{"dtype", t.raw_dtype != nullptr ? t.raw_dtype : DTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  json meta = {{"format", "pt"}};
  for (const auto& [key, value] : metadata) meta[key] = value;
  header["__metadata__"] = meta;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  // Written to PATH.tmp and renamed at the end: a failed write (a full disk) leaves no truncated
  // checkpoint behind, and is noticed at the tensor where it happens, not after the last.
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(Cat(path, ": cannot write: ", std::strerror(errno)));
  auto fail = [&](const char* what) {
    const std::string reason = errno != 0 ? std::strerror(errno) : "disk full?";
    out.close();
    std::remove(tmp.c_str());
    return Error(Cat(path, ": ", what, " (", reason, ")"));
  };
  const uint64_t len = text.size();
  errno = 0;
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<uint8_t> buffer;
  for (const auto& t : tensors) {
    const int64_t n = t.bytes();
    const void* bytes = t.data;
    if (bytes == nullptr) {
      buffer.resize(static_cast<size_t>(n));
      t.fill(buffer.data());
      bytes = buffer.data();
    }
    out.write(static_cast<const char*>(bytes), n);
    out.flush();
    if (!out) throw fail("write failed");
  }
  out.close();
  if (!out) throw fail("write failed");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw fail("cannot rename the finished file");
}

}  // namespace wc
