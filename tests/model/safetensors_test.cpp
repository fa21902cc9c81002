// safetensors validation: every corruption the loader must refuse, by name of file and problem.
#include <cstring>

#include <gtest/gtest.h>

#include "model/checkpoint.h"
#include "model/decoder_model.h"
#include "tests/test_util.h"
#include "util/error.h"

namespace wc {
namespace {

// A safetensors file with the given header JSON and `data_bytes` zero bytes of data.
std::string MakeFile(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  const uint64_t len = header.size();
  std::memcpy(s.data(), &len, 8);
  return s + header + std::string(data_bytes, '\0');
}

// Expects opening `bytes` as a safetensors file to fail with a message containing the path and
// `needle`.
void ExpectRejected(const std::string& bytes, const std::string& needle) {
  test::TempDir dir;
  const std::string path = dir.File("model.safetensors");
  test::WriteFile(path, bytes);
  try {
    SafetensorsFile f(path);
    FAIL() << "accepted a file that should be rejected for: " << needle;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

TEST(Safetensors, ReadsWhatItWrites) {
  test::TempDir dir;
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const uint16_t b[2] = {0x3f80, 0x4000};
  WriteSafetensors(dir.File("t.safetensors"),
                   {{"a", DType::kF32, {2, 3}, a, {}}, {"b.weight", DType::kBF16, {2}, b, {}}});
  SafetensorsFile f(dir.File("t.safetensors"));
  ASSERT_EQ(f.tensors().size(), 2u);
  const TensorInfo& ta = f.tensors().at("a");
  EXPECT_EQ(ta.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(0, std::memcmp(ta.data, a, sizeof a));
  EXPECT_EQ(f.tensors().at("b.weight").dtype, DType::kBF16);
}

TEST(Safetensors, RejectsTruncatedHeader) {
  ExpectRejected(std::string(4, '\0'), "truncated");
  std::string big(8, '\0');
  const uint64_t len = 1 << 20;
  std::memcpy(big.data(), &len, 8);
  ExpectRejected(big + "{}", "header length 1048576 runs past the end");
}

TEST(Safetensors, RejectsInvalidJson) {
  ExpectRejected(MakeFile("{\"a\": [", 0), "not valid JSON");
}

TEST(Safetensors, RejectsUnknownDtype) {
  ExpectRejected(MakeFile(R"({"w":{"dtype":"F12","shape":[2],"data_offsets":[0,4]}})", 4),
                 "unknown dtype 'F12'");
}

TEST(Safetensors, RejectsOffsetsOutOfRange) {
  ExpectRejected(MakeFile(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
                 "out of range");
  ExpectRejected(MakeFile(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8),
                 "out of range");
}

TEST(Safetensors, RejectsOverlappingTensors) {
  ExpectRejected(MakeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                          12),
                 "overlap");
}

TEST(Safetensors, RejectsByteCountNotMatchingShape) {
  ExpectRejected(MakeFile(R"({"w":{"dtype":"BF16","shape":[3,2],"data_offsets":[0,8]}})", 8),
                 "do not match shape [3, 2]");
}

TEST(Safetensors, RejectsBadShapeEntries) {
  ExpectRejected(MakeFile(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0),
                 "not a non-negative integer");
  ExpectRejected(MakeFile(R"({"w":{"dtype":"F32","data_offsets":[0,0]}})", 0),
                 "needs dtype, shape and data_offsets");
}

TEST(Checkpoint, NamesMissingAndMisshapedTensors) {
  test::TempDir dir;
  test::CopyDir(test::FixtureDir("mq_f32"), dir.path());
  const auto ck = Checkpoint::Open(dir.path());
  try {
    ck->Get("transformer.h.9.mlp.dense_h_to_4h.weight", {4, 4});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("missing tensor 'transformer.h.9.mlp.dense_h_to_4h.weight'"),
        std::string::npos)
        << e.what();
  }
  try {
    ck->Get("transformer.ln_f.weight", {65});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has shape [64], expected [65]"), std::string::npos)
        << e.what();
  }
}

TEST(Checkpoint, ConfigThatDoesNotMatchTheWeightsIsRefusedByName) {
  test::TempDir dir;
  test::CopyDir(test::FixtureDir("mq_f32"), dir.path());
  std::string cfg = test::ReadFile(dir.File("config.json"));
  const size_t at = cfg.find("\"vocab_size\": 347");
  ASSERT_NE(at, std::string::npos) << cfg;
  cfg.replace(at, 17, "\"vocab_size\": 348");
  test::WriteFile(dir.File("config.json"), cfg);
  try {
    DecoderModel::Load(dir.path(), ModelOptions{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "word_embeddings.weight' has shape [347, 64], expected [348, 64]"),
              std::string::npos)
        << e.what();
  }
}

TEST(Checkpoint, ShardedIndexProblemsAreNamed) {
  test::TempDir dir;
  test::CopyDir(test::FixtureDir("mq_bias_bf16"), dir.path());
  ASSERT_NO_THROW(Checkpoint::Open(dir.path()));
  std::remove(dir.File("model-00002-of-00002.safetensors").c_str());
  try {
    Checkpoint::Open(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model-00002-of-00002.safetensors' listed for tensor"),
              std::string::npos)
        << e.what();
  }
  test::WriteFile(dir.File("model.safetensors.index.json"), "{\"weight_map\": 3}");
  EXPECT_THROW(Checkpoint::Open(dir.path()), Error);
}

TEST(Checkpoint, EmptyDirectoryAndMissingDirectory) {
  test::TempDir dir;
  EXPECT_THROW(Checkpoint::Open(dir.path()), Error);
  EXPECT_THROW(Checkpoint::Open(dir.File("nope")), Error);
}

}  // namespace
}  // namespace wc
