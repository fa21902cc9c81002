// Issue 15: bad JSON, safetensors and .npy inputs end as one-line wc::Errors naming the file (and
// the key or tensor) - numbers out of range, overflowing shapes, oversized or deeply nested files -
// never as another exception, undefined behaviour or an allocation the input does not justify.
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

#include "kvcache/kv_scales.h"
#include "model/chat/chat_format.h"
#include "model/checkpoint.h"
#include "serving/text_stream.h"
#include "tests/test_util.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/npy.h"

namespace wc {
namespace {

// Runs `f`, expecting a one-line wc::Error whose message holds every one of `needles`.
template <typename F>
void ExpectError(F f, const std::vector<std::string>& needles) {
  try {
    f();
    FAIL() << "no error; expected one naming " << needles[0];
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

std::string Safetensors(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  const uint64_t len = header.size();
  std::memcpy(s.data(), &len, 8);
  return s + header + std::string(data_bytes, '\0');
}

// Defect 4: a number out of range (1e400) named by file and key, not an internal error.
TEST(ParserHardening, JsonNumberOutOfRangeNamesFileAndKey) {
  test::TempDir dir;
  const std::string config = dir.File("config.json");
  test::WriteFile(config, R"({"hidden_size": 64, "rope_scaling": {"factor": 1e400}})");
  ExpectError([&] { ReadJsonFile(config); },
              {config, "key 'rope_scaling.factor'", "number overflow", "1e400"});
  ExpectError([&] { ParseJson(R"({"a": {"b": [1]}, "c": [2, -1e400]})", "p.json"); },
              {"p.json: key 'c': number overflow"});

  test::WriteFile(dir.File("kv_scales.json"),
                  R"({"fingerprint": "x", "n_layers": 1, "k_amax": [1e400], "v_amax": [1]})");
  ExpectError([&] { KVScaleFile::Load(dir.path(), "x", 1); },
              {dir.File("kv_scales.json"), "key 'k_amax'", "1e400"});

  test::WriteFile(dir.File("chat_format.json"), R"({"add_bos": -1e999})");
  ExpectError([&] { ChatFormat::Load(dir.path()); }, {dir.File("chat_format.json"), "add_bos"});

  test::WriteFile(dir.File("model.safetensors.index.json"), R"({"weight_map": {"a": 1e400}})");
  ExpectError([&] { Checkpoint::Open(dir.path()); },
              {dir.File("model.safetensors.index.json"), "weight_map.a", "1e400"});

  // Typed keys name the file and key on a wrong type too.
  const nlohmann::json j = ParseJson(R"({"n": "three", "f": 1e300, "i": 2.5})", "x.json");
  ExpectError([&] { JsonGet<int>(j, "n", "x.json"); }, {"x.json: key 'n'", "integer", "three"});
  ExpectError([&] { JsonGet<float>(j, "f", "x.json"); }, {"x.json: key 'f'", "finite number"});
  ExpectError([&] { JsonGet<int64_t>(j, "i", "x.json"); }, {"x.json: key 'i'", "integer"});
  ExpectError([&] { JsonGet<bool>(j, "missing", "x.json"); }, {"x.json: missing key 'missing'"});
}

// Defect 5: the element count and byte count are overflow-checked; the header is capped in size
// and nesting.
TEST(ParserHardening, SafetensorsShapeOverflowHeaderSizeAndNesting) {
  test::TempDir dir;
  const std::string path = dir.File("model.safetensors");
  // 2^32 x 2^32 bytes wrapped to 0 and matched data_offsets [0, 0] before.
  test::WriteFile(path, Safetensors(R"({"w": {"dtype": "U8", "shape": [4294967296, 4294967296],
                                            "data_offsets": [0, 0]}})",
                                    0));
  ExpectError([&] { SafetensorsFile f(path); }, {path, "tensor 'w'", "more elements than 2^63"});
  // 2^62 F32 elements: the count fits, the bytes do not.
  test::WriteFile(path, Safetensors(R"({"w": {"dtype": "F32", "shape": [4611686018427387904],
                                            "data_offsets": [0, 0]}})",
                                    0));
  ExpectError([&] { SafetensorsFile f(path); }, {path, "tensor 'w'", "more than 2^64 bytes"});
  test::WriteFile(path, Safetensors(R"({"w": {"dtype": "F32", "shape": [-1],
                                            "data_offsets": [0, 0]}})",
                                    0));
  ExpectError([&] { SafetensorsFile f(path); }, {path, "tensor 'w'", "shape entry -1"});

  // Nesting: a metadata value or an unknown field nested past the cap.
  const std::string deep = std::string(1000, '[') + std::string(1000, ']');
  test::WriteFile(path, Safetensors(R"({"__metadata__": )" + deep + "}", 0));
  ExpectError([&] { SafetensorsFile f(path); }, {path, "nests deeper than"});
  test::WriteFile(path,
                  Safetensors(R"({"w": {"dtype": "U8", "shape": [], "x": )" + deep + "}}", 0));
  ExpectError([&] { SafetensorsFile f(path); }, {path, "tensor 'w'", "nests deeper than"});
  test::WriteFile(path, Safetensors(R"({"w": {"dtype": "U8", "shape": [[1]]}})", 0));
  ExpectError([&] { SafetensorsFile f(path); }, {path, "tensor 'w'", "shape entry"});

  // A header above the 100 MB cap (a sparse file: nothing is read or allocated for it).
  std::string head(8, '\0');
  const uint64_t len = kSafetensorsMaxHeaderBytes + 1;
  std::memcpy(head.data(), &len, 8);
  test::WriteFile(path, head);
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(8 + len)), 0);
  ExpectError([&] { SafetensorsFile f(path); }, {path, "above the safetensors limit"});

  // A tensor name with control bytes stays on one line.
  test::WriteFile(path, Safetensors(R"({"a\nb": {"dtype": "Q"}})", 0));
  ExpectError([&] { SafetensorsFile f(path); }, {path, "tensor 'a\\x0ab'"});
}

// Defect 7: values that do not fit the key's type (n_layers 1e20 into an int, an amax beyond
// float) are refused by name instead of converted with undefined behaviour.
TEST(ParserHardening, KvScalesOutOfRangeValuesAreRefused) {
  test::TempDir dir;
  const std::string path = dir.File("kv_scales.json");
  test::WriteFile(path, R"({"fingerprint": "x", "n_layers": 1e20, "k_amax": [1], "v_amax": [1]})");
  ExpectError([&] { KVScaleFile::Load(dir.path(), "x", 1); }, {path, "key 'n_layers'", "integer"});
  test::WriteFile(path,
                  R"({"fingerprint": "x", "n_layers": 4294967297, "k_amax": [], "v_amax": []})");
  ExpectError([&] { KVScaleFile::Load(dir.path(), "x", 1); }, {path, "key 'n_layers'"});
  test::WriteFile(path, R"({"fingerprint": "x", "n_layers": 1, "k_amax": [1e39], "v_amax": [1]})");
  ExpectError([&] { KVScaleFile::Load(dir.path(), "x", 1); }, {path, "key 'k_amax'[0]", "finite"});
  test::WriteFile(path, R"({"fingerprint": "x", "n_layers": 1, "k_amax": [1], "v_amax": [1],
                            "calibration_tokens": 1e300})");
  ExpectError([&] { KVScaleFile::Load(dir.path(), "x", 1); }, {path, "key 'calibration_tokens'"});
  test::WriteFile(path, R"({"fingerprint": "x", "n_layers": 2, "k_amax": [1], "v_amax": [1, 2]})");
  ExpectError([&] { KVScaleFile::Load(dir.path(), "x", 2); }, {path, "needs 2 k_amax"});
}

// Defect 8: JSON files are capped before they are read.
TEST(ParserHardening, OversizedJsonFilesAreRefusedBeforeReading) {
  test::TempDir dir;
  for (const char* name : {"chat_format.json", "kv_scales.json"}) {
    const std::string path = dir.File(name);
    test::WriteFile(path, "{");
    ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(kJsonFileMaxBytes + 1)), 0);  // sparse
  }
  ExpectError([&] { ChatFormat::Load(dir.path()); },
              {dir.File("chat_format.json"), "at most 16777216 bytes"});
  ExpectError([&] { KVScaleFile::Load(dir.path(), "x", 1); },
              {dir.File("kv_scales.json"), "at most 16777216 bytes"});
  const std::string small = dir.File("small.json");
  test::WriteFile(small, "[" + std::string(2000, ' ') + "]");
  ExpectError([&] { ReadJsonFile(small, 1024); }, {small, "at most 1024 bytes"});
  EXPECT_TRUE(ReadJsonFile(small, 4096).is_array());
  // Nesting is capped too (a deep document costs memory per level and recursion to print).
  ExpectError([&] { ParseJson(std::string(100000, '['), "deep.json"); },
              {"deep.json", "nested deeper than 64"});
}

// Defect 10: the .npy reader throws wc::Error only and never copies from a null pointer.
TEST(ParserHardening, NpyReaderErrorsAreTheProjects) {
  auto npy = [](const std::string& dims, size_t data_bytes) {
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    dict.append((64 - (10 + dict.size() + 1) % 64) % 64, ' ');
    dict += '\n';
    std::string s = "\x93NUMPY\x01";
    s += '\0';
    s += static_cast<char>(dict.size() & 0xff);
    s += static_cast<char>(dict.size() >> 8);
    return s + dict + std::string(data_bytes, '\0');
  };
  ExpectError([&] { ParseNpyF32(npy("abc,", 0), "x.npy"); }, {"x.npy", "shape entry 'abc'"});
  ExpectError([&] { ParseNpyF32(npy("99999999999999999999999,", 0), "x.npy"); },
              {"x.npy", "not a non-negative integer"});
  ExpectError([&] { ParseNpyF32(npy("-1,", 0), "x.npy"); }, {"x.npy", "shape entry '-1'"});
  ExpectError([&] { ParseNpyF32(npy("4611686018427387904, 8", 0), "x.npy"); },
              {"x.npy", "too many elements"});
  ExpectError([&] { ParseNpyF32(npy("2, 3", 20), "x.npy"); }, {"x.npy", "do not match shape"});
  ExpectError([&] { ParseNpyF32("\x93NUMPY\x07", "x.npy"); }, {"x.npy", "not a .npy file"});
  const NpyArray empty = ParseNpyF32(npy("0,", 0), "x.npy");  // memcpy from null before
  EXPECT_EQ(empty.shape, std::vector<int64_t>{0});
  EXPECT_TRUE(empty.data.empty());
  const NpyArray two = ParseNpyF32(npy("2,", 8), "x.npy");
  EXPECT_EQ(two.data.size(), 2u);
}

// Found by the text stream's fuzzer: with overlapping stop strings the text depended on how the
// bytes were split into tokens (the stop starting first won, though it completed last).
TEST(ParserHardening, TextStreamTextDoesNotDependOnTheTokenSplit) {
  const std::vector<std::string> stop = {"dXX", "X"};
  StringSink whole_sink, split_sink;
  TextStream whole(stop, whole_sink, false), split(stop, split_sink, false);
  EXPECT_TRUE(whole.Add("dXX"));
  EXPECT_TRUE(split.Add("dX"));
  whole.Finish();
  split.Finish();
  EXPECT_EQ(whole_sink.text(), "d");
  EXPECT_EQ(split_sink.text(), "d");
}

}  // namespace
}  // namespace wc
