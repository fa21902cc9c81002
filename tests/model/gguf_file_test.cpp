// The GGUF reader (model/gguf/gguf_file.h): a valid file's keys and tensors as written, and every
// malformed file refused in one line naming the key or tensor (gguf.cpp's checks and the ones
// wormchat adds), never read out of bounds (the fuzzer drives the same parser).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/fingerprint.h"
#include "model/gguf/ggml_types.h"
#include "model/gguf/gguf_file.h"
#include "tests/model/gguf_writer.h"
#include "tests/test_util.h"
#include "util/error.h"

namespace wc {
namespace {

using test::GgufWriter;

const std::string kPath = "m.gguf";

std::vector<uint8_t> Bytes(size_t n, uint8_t fill) {
  return std::vector<uint8_t>(n, fill);
}

// A small valid file: keys of several types, an F32 [8, 2], an F16 [32] and a Q8_0 [32, 2].
GgufWriter Valid() {
  GgufWriter w;
  w.Str("general.architecture", "llama");
  w.U32("llama.block_count", 2);
  w.F32("llama.rope.freq_base", 10000.0f);
  w.Bool("tokenizer.ggml.add_bos_token", true);
  w.U64("llama.context_length", 4096);
  w.Strs("tokenizer.ggml.tokens", {"<s>", "a", "\xc4\xa0"});
  w.I32s("tokenizer.ggml.token_type", {3, 1, 1});
  w.F32s("tokenizer.ggml.scores", {0.0f, -1.0f, -2.0f});
  w.Tensor("token_embd.weight", 0, {8, 2}, Bytes(64, 1));
  w.Tensor("output_norm.weight", 1, {32}, Bytes(64, 2));
  w.Tensor("output.weight", 8, {32, 2}, Bytes(68, 3));
  return w;
}

GgufContents Parse(const std::vector<uint8_t>& b) {
  return ParseGguf(b.data(), b.size(), kPath);
}

// The parse's error message (fails the test when it parses).
std::string ErrorOf(const std::vector<uint8_t>& b) {
  try {
    Parse(b);
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind(kPath + ": ", 0), 0u) << msg;
    return msg;
  }
  ADD_FAILURE() << "parsed";
  return "";
}

TEST(GgufFile, ReadsKeysAndTensorsAsWritten) {
  const std::vector<uint8_t> b = Valid().Bytes();
  const GgufContents c = Parse(b);
  EXPECT_EQ(c.version, 3u);
  EXPECT_EQ(c.alignment, 32u);
  ASSERT_EQ(c.key_order.size(), 8u);
  EXPECT_EQ(c.metadata.at("general.architecture").s, "llama");
  EXPECT_EQ(c.metadata.at("llama.block_count").i, 2);
  EXPECT_EQ(c.metadata.at("llama.rope.freq_base").f, 10000.0);
  EXPECT_EQ(c.metadata.at("llama.context_length").i, 4096);
  EXPECT_EQ(c.metadata.at("tokenizer.ggml.add_bos_token").i, 1);
  EXPECT_EQ(c.metadata.at("tokenizer.ggml.tokens").strings,
            (std::vector<std::string>{"<s>", "a", "\xc4\xa0"}));
  EXPECT_EQ(c.metadata.at("tokenizer.ggml.token_type").ints, (std::vector<int64_t>{3, 1, 1}));
  EXPECT_EQ(c.metadata.at("tokenizer.ggml.scores").floats, (std::vector<double>{0, -1, -2}));
  ASSERT_EQ(c.tensors.size(), 3u);
  const GgufTensor& q = c.tensors[2];
  EXPECT_EQ(q.name, "output.weight");
  EXPECT_STREQ(q.type->name, "Q8_0");
  EXPECT_EQ(q.ne, (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(q.rows(), 2);
  EXPECT_EQ(q.n_bytes, 68u);
  EXPECT_EQ(q.shape(), "[32, 2]");
  EXPECT_EQ(c.data_offset % 32, 0u);
  EXPECT_EQ(q.data, b.data() + c.data_offset + q.offset);
  EXPECT_EQ(q.data[0], 3);
  EXPECT_EQ(c.tensors[0].data[63], 1);
}

TEST(GgufFile, EveryTruncationIsRefused) {
  // Any cut before the last tensor's last byte (the padding after it may go).
  const std::vector<uint8_t> b = Valid().Bytes();
  const GgufContents whole = Parse(b);
  const GgufTensor& last = whole.tensors.back();
  const size_t end = static_cast<size_t>(last.data - b.data()) + last.n_bytes;
  ASSERT_LT(end, b.size());
  EXPECT_NO_THROW(
      Parse(std::vector<uint8_t>(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(end))));
  for (size_t n = 0; n < end; ++n) {
    const std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(Parse(cut), Error) << n << " of " << b.size() << " bytes";
  }
}

TEST(GgufFile, VersionTwoAndAlignmentKey) {
  GgufWriter w = Valid();
  w.version = 2;
  w.alignment = 64;
  w.U32("general.alignment", 64);
  const std::vector<uint8_t> b = w.Bytes();
  const GgufContents c = Parse(b);
  EXPECT_EQ(c.alignment, 64u);
  EXPECT_EQ(c.data_offset % 64, 0u);
  for (const GgufTensor& t : c.tensors) EXPECT_EQ(t.offset % 64, 0u);
}

TEST(GgufFile, HeaderProblemsAreNamed) {
  std::vector<uint8_t> b = Valid().Bytes();
  std::vector<uint8_t> x = b;
  x[0] = 'X';
  EXPECT_NE(ErrorOf(x).find("not a GGUF file"), std::string::npos);
  x = b;
  std::reverse(x.begin(), x.begin() + 4);
  EXPECT_NE(ErrorOf(x).find("big-endian"), std::string::npos);
  GgufWriter w = Valid();
  w.version = 1;
  EXPECT_NE(ErrorOf(w.Bytes()).find("version 1 is not supported"), std::string::npos);
  w.version = 0x03000000;  // 3 as a big-endian writer puts it
  EXPECT_NE(ErrorOf(w.Bytes()).find("big-endian"), std::string::npos);
  x = b;
  const uint64_t huge = uint64_t{1} << 40;
  std::memcpy(&x[8], &huge, 8);
  EXPECT_NE(ErrorOf(x).find("tensors, more than"), std::string::npos);
  std::memcpy(&x[8], &b[8], 8);
  std::memcpy(&x[16], &huge, 8);
  EXPECT_NE(ErrorOf(x).find("metadata keys, more than"), std::string::npos);
}

TEST(GgufFile, KeyProblemsNameTheKey) {
  {
    GgufWriter w = Valid();
    w.U32("llama.block_count", 3);
    EXPECT_NE(ErrorOf(w.Bytes()).find("key 'llama.block_count' is listed twice"),
              std::string::npos);
  }
  {
    GgufWriter w = Valid();
    w.Key("odd", 13, GgufWriter::Value().Put<uint32_t>(0));
    EXPECT_NE(ErrorOf(w.Bytes()).find("key 'odd': unknown value type 13"), std::string::npos);
  }
  {
    GgufWriter w = Valid();
    w.Key("nested", 9, GgufWriter::Value().Put<uint32_t>(9).Put<uint64_t>(0));
    EXPECT_NE(ErrorOf(w.Bytes()).find("key 'nested': arrays of arrays"), std::string::npos);
  }
  {
    GgufWriter w = Valid();
    w.Key("many", 9, GgufWriter::Value().Put<uint32_t>(8).Put<uint64_t>(uint64_t{1} << 25));
    EXPECT_NE(ErrorOf(w.Bytes()).find("key 'many': an array of 33554432 elements runs past"),
              std::string::npos);
  }
  {
    GgufWriter w = Valid();
    w.Key("b", 7, GgufWriter::Value().Put<uint8_t>(2));
    EXPECT_NE(ErrorOf(w.Bytes()).find("key 'b': bool byte 2"), std::string::npos);
  }
  {
    GgufWriter w = Valid();
    w.Str("bad\xff", "x");
    EXPECT_NE(ErrorOf(w.Bytes()).find("name is not UTF-8"), std::string::npos);
  }
  {
    GgufWriter w = Valid();
    w.Key("two\nlines", 13, GgufWriter::Value());
    EXPECT_NE(ErrorOf(w.Bytes()).find("key 'two\\x0alines': unknown value type 13"),
              std::string::npos);
  }
  for (uint32_t a : {0u, 48u}) {
    GgufWriter w = Valid();
    w.U32("general.alignment", a);
    EXPECT_NE(ErrorOf(w.Bytes()).find("'general.alignment' is " + std::to_string(a) +
                                      ", not a power of two"),
              std::string::npos);
  }
  {
    GgufWriter w = Valid();
    w.U64("general.alignment", 64);
    EXPECT_NE(ErrorOf(w.Bytes()).find("'general.alignment' is u64, expected u32"),
              std::string::npos);
  }
}

TEST(GgufFile, TensorProblemsNameTheTensor) {
  auto with = [](auto&& edit) {
    GgufWriter w = Valid();
    edit(w);
    return ErrorOf(w.Bytes());
  };
  EXPECT_NE(with([](GgufWriter& w) {
              w.Tensor("output.weight", 0, {4}, Bytes(16, 0));
            }).find("tensor 'output.weight' is listed twice"),
            std::string::npos);
  EXPECT_NE(with([](GgufWriter& w) {
              w.Tensor("t", 0, {1, 1, 1, 1, 1}, Bytes(4, 0));
            }).find("tensor 't': 5 dimensions"),
            std::string::npos);
  EXPECT_NE(with([](GgufWriter& w) {
              w.Tensor("t", 31, {4}, Bytes(16, 0));
            }).find("tensor 't': unknown GGML type 31"),
            std::string::npos);
  EXPECT_NE(with([](GgufWriter& w) {
              w.Tensor("t", 8, {48, 1}, Bytes(68, 0));
            }).find("tensor 't': row length 48 is not a whole number of Q8_0 blocks of 32"),
            std::string::npos);
  EXPECT_NE(with([](GgufWriter& w) {
              w.Tensor("t", 0, {uint64_t{1} << 63, 1}, {});
            }).find("tensor 't': dimension 0 is negative"),
            std::string::npos);
  EXPECT_NE(with([](GgufWriter& w) {
              w.Tensor("t", 0, {uint64_t{1} << 40, uint64_t{1} << 40}, {});
            }).find("tensor 't': element count overflows"),
            std::string::npos);
  EXPECT_NE(with([](GgufWriter& w) {
              w.Tensor("t", 0, {4}, Bytes(16, 0), 40);
            }).find("tensor 't': offset 40 is not a multiple of the alignment 32"),
            std::string::npos);
  EXPECT_NE(with([](GgufWriter& w) {
              w.Tensor("t", 0, {4}, Bytes(16, 0), 32);
            }).find("overlap in the file"),
            std::string::npos);
  EXPECT_NE(with([](GgufWriter& w) {
              w.Tensor("t", 0, {4}, Bytes(16, 0), 1 << 20);
            }).find("tensor 't' (F32 [4], 16 bytes at data offset 1048576) runs past the end"),
            std::string::npos);
  EXPECT_NE(with([](GgufWriter& w) {
              w.Tensor("t\xc3", 0, {4}, Bytes(16, 0));
            }).find("name is not UTF-8"),
            std::string::npos);
}

TEST(GgufFile, EmptyTensorsParseAndEmptyKeysDoNot) {
  GgufWriter w = Valid();
  w.Tensor("zero_rows", 0, {4, 0}, {});
  w.Tensor("zero_cols", 0, {0, 3}, {});
  const std::vector<uint8_t> b = w.Bytes();
  const GgufContents c = Parse(b);
  EXPECT_EQ(c.tensors[3].rows(), 0);
  EXPECT_EQ(c.tensors[3].n_bytes, 0u);
  EXPECT_EQ(c.tensors[4].rows(), 3);
  EXPECT_EQ(c.tensors[4].numel(), 0);
  GgufWriter e = Valid();
  e.U32("", 1);
  EXPECT_NE(ErrorOf(e.Bytes()).find("key 8 has an empty name"), std::string::npos);
}

// Files written by llama.cpp's own gguf-py (tests/fuzz/make_gguf_seeds.py): every value type, the
// alignment key, quantized tensors.
TEST(GgufFile, ReadsFilesGgufPyWrote) {
  const std::string dir = test::FixtureDir("gguf");
  const GgufFile f(dir + "/v3_llama.gguf");
  EXPECT_EQ(f.String("general.architecture"), "llama");
  EXPECT_EQ(f.Int("llama.context_length"), 64);
  EXPECT_EQ(f.Int("test.u32"), 4000000000);
  EXPECT_EQ(f.Int("test.i64"), -1099511627776);
  EXPECT_EQ(f.Float("test.f32"), 0.15625);
  EXPECT_EQ(f.Float("test.f64"), -1e-300);
  EXPECT_TRUE(f.Bool("test.bool"));
  EXPECT_EQ(f.String("test.str"), "h\xc3\xa9llo gguf");
  EXPECT_EQ(f.Strings("test.arr_str"),
            (std::vector<std::string>{"a", "", "\xc3\x9f\xc3\xa7", "last"}));
  EXPECT_EQ(f.Find("test.arr_u8")->ints, (std::vector<int64_t>{0, 1, 255}));
  auto error = [&](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error([&] { f.Int("test.u64"); }),
            dir + "/v3_llama.gguf: key 'test.u64' is a u64 above 2^63 - 1");
  EXPECT_EQ(error([&] { f.Int("test.str"); }),
            dir + "/v3_llama.gguf: key 'test.str' is string, expected an integer");
  EXPECT_EQ(
      error([&] { f.Strings("test.arr_i32"); }),
      dir + "/v3_llama.gguf: key 'test.arr_i32' is an array of i32, expected an array of strings");
  EXPECT_EQ(error([&] { f.String("llama.missing"); }),
            dir + "/v3_llama.gguf: key 'llama.missing' is missing");
  const GgufTensor* q = f.FindTensor("blk.0.ffn_up.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_STREQ(q->type->name, "Q8_0");
  EXPECT_EQ(q->shape(), "[32, 2]");
  EXPECT_EQ(q->data - f.bytes(), 1440);  // as gguf-py's reader reports it

  const GgufFile a(dir + "/v3_llama_align64.gguf");
  EXPECT_EQ(a.contents().alignment, 64u);
  EXPECT_EQ(a.FindTensor("blk.0.ffn_up.weight")->data - a.bytes(), 1472);

  const GgufFile k(dir + "/v3_bf16_q4.gguf");
  std::vector<std::string> types;
  for (const GgufTensor& t : k.contents().tensors) types.push_back(t.type->name);
  EXPECT_EQ(types, (std::vector<std::string>{"BF16", "Q4_0", "Q4_K"}));
  EXPECT_TRUE(LooksLikeGguf(dir + "/v3_bf16_q4.gguf"));
  EXPECT_FALSE(LooksLikeGguf(dir + "/missing.gguf"));
}

TEST(GgufFile, TypeTableNamesEveryType) {
  EXPECT_EQ(GgmlTypeName(10), "Q2_K");
  EXPECT_EQ(GgmlTypeName(30), "BF16");
  EXPECT_EQ(GgmlTypeName(31), "type 31");  // a retired number
  EXPECT_EQ(GgmlTypeOf(GgmlType::kQ4_K).block_bytes, 144);
  EXPECT_EQ(GgmlTypeOf(GgmlType::kQ6_K).block_bytes, 210);
  EXPECT_EQ(GgmlTypeOf(GgmlType::kQ5_0).block, 32);
}

// A GGUF model's fingerprint (model/fingerprint.h) reads its size, header, tensor table and each
// tensor's first page, not the whole file: a renamed copy is the same model; a change in the keys
// or the first page of a tensor is another; a change past every tensor's first page is not seen
// (the price of not reading a multi-GB file).
TEST(GgufFile, TheFingerprintReadsTheHeaderTableAndAPageOfEachTensor) {
  test::TempDir dir;
  const auto write = [&](const std::string& name, const GgufWriter& w, size_t poke = 0) {
    std::vector<uint8_t> b = w.Bytes();
    if (poke > 0) b[b.size() - poke] ^= 1;
    test::WriteFile(dir.File(name), std::string(b.begin(), b.end()));
    return ModelFingerprint(dir.File(name), false);
  };
  const auto model = [](const std::string& name) {
    GgufWriter w;
    w.Str("general.architecture", "llama");
    w.Str("general.name", name);
    w.Tensor("a.weight", 0, {2048, 2}, Bytes(2048 * 2 * 4, 1));  // 16 KiB each, the file's last
    w.Tensor("b.weight", 0, {2048, 2}, Bytes(2048 * 2 * 4, 2));
    return w;
  };
  const std::string fp = write("m.gguf", model("m"));
  EXPECT_EQ(fp.size(), 32u);
  EXPECT_EQ(write("renamed.gguf", model("m")), fp);
  EXPECT_NE(write("named.gguf", model("n")), fp);                     // a key
  EXPECT_NE(write("first_page.gguf", model("m"), 2048 * 2 * 4), fp);  // b's first byte
  EXPECT_EQ(write("last_page.gguf", model("m"), 1), fp);              // b's last byte
  EXPECT_EQ(GgufModelSize(dir.File("m.gguf")), static_cast<int64_t>(model("m").Bytes().size()));
  EXPECT_EQ(GgufModelSize(dir.path()), -1);  // a directory
}

}  // namespace
}  // namespace wc
