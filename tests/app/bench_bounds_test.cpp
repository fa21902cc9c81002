// The decode read-bandwidth probe (app/bench/bounds.h) on its structure, not its timing: a pass
// reads every byte of every matrix exactly once (its word sum equals a serial one, and a byte
// changed anywhere changes it) on any thread count, keeps the best pass and counts them; and the
// streams it reads for a model are exactly the packed matrices decode streams, in every format.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "app/bench/bounds.h"
#include "model/decoder_model.h"
#include "tests/test_util.h"
#include "util/page_buffer.h"
#include "util/rng.h"

namespace wc {
namespace {

// Matrices of odd panel counts (fewer and more than 4 a thread, none) in one buffer each.
struct Fixture {
  std::vector<PageBuffer> bufs;
  std::vector<StreamedMatrix> streams;
  Fixture() {
    Rng rng(7);
    for (const auto& [panels, panel_bytes] : std::vector<std::pair<int64_t, int64_t>>{
             {7, 64 * 5}, {1, 64}, {13, 1088}, {0, 576}, {22, 576}}) {
      PageBuffer b(static_cast<size_t>(std::max<int64_t>(1, panels * panel_bytes)));
      for (size_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<uint8_t>(rng.Next());
      streams.push_back({b.data(), panels, panel_bytes});
      bufs.push_back(std::move(b));
    }
  }
  uint64_t Sum() const {
    uint64_t s = 0;
    for (const StreamedMatrix& m : streams) s += WordSum(m.data, m.bytes());
    return s;
  }
};

TEST(DecodeReadProbe, EveryPassReadsEveryByteOnce) {
  Fixture f;
  int64_t bytes = 0;
  for (const StreamedMatrix& m : f.streams) bytes += m.bytes();
  for (int threads : {1, 2, 3, 5}) {
    DecodeReadProbe probe(f.streams, threads);
    EXPECT_EQ(probe.bytes(), bytes);
    EXPECT_EQ(probe.passes(), 0);
    EXPECT_EQ(probe.best(), 0);
    double best = 0;
    for (int i = 0; i < 3; ++i) {
      best = std::max(best, probe.Pass());
      EXPECT_EQ(probe.checksum(), f.Sum()) << threads << " threads, pass " << i;
    }
    EXPECT_EQ(probe.passes(), 3);
    EXPECT_GT(probe.best(), 0);
    EXPECT_EQ(probe.best(), best);  // the best pass, not the last
    EXPECT_EQ(probe.threads(), threads);
  }
}

TEST(DecodeReadProbe, AByteChangedAnywhereChangesTheSum) {
  Fixture f;
  DecodeReadProbe probe(f.streams, 2);
  probe.Pass();
  const uint64_t before = probe.checksum();
  // The first and last byte of each non-empty matrix and one inside a middle panel.
  for (const StreamedMatrix& m : f.streams) {
    if (m.bytes() == 0) continue;
    for (int64_t at : {int64_t{0}, m.bytes() / 2 + 3, m.bytes() - 1}) {
      auto* p = const_cast<uint8_t*>(m.data) + at;
      *p ^= 0x10;
      probe.Pass();
      EXPECT_NE(probe.checksum(), before) << at;
      EXPECT_EQ(probe.checksum(), f.Sum()) << at;
      *p ^= 0x10;
    }
  }
}

TEST(DecodeReadProbe, DescribesHowItMeasured) {
  Fixture f;
  DecodeReadProbe probe(f.streams, 2);
  for (int i = 0; i < 4; ++i) probe.Pass();
  const std::string d = probe.Describe();
  for (const char* needle : {"best of 4 passes", "2 threads", "5 matrices", "MiB", "huge pages"})
    EXPECT_NE(d.find(needle), std::string::npos) << needle << "\n" << d;
}

// What the probe reads of a model is what a decode step streams: every packed matrix (the layers'
// four in order, then the LM head), whole, in its own memory, in each weight format.
TEST(DecodeReadProbe, StreamsAreTheModelsPackedMatrices) {
  for (const char* spec : {"auto", "bf16", "bfp8", "bfp4", "attn=bfp8,mlp=bfp4"}) {
    ModelOptions mo;
    mo.weights = WeightSpec::Parse(spec);
    const auto model = DecoderModel::Load(test::FixtureDir("newarch_gqa_bias_bf16"), mo);
    const ModelWeights& w = model->weights();
    std::vector<const PackedMatrix*> want;
    for (const LayerWeights& l : w.layers)
      for (const Linear* m : l.Linears()) want.push_back(&m->p);
    want.push_back(&w.lm_head_p);
    const std::vector<StreamedMatrix> got = DecodeWeightStreams(w);
    ASSERT_EQ(got.size(), want.size()) << spec;
    for (size_t i = 0; i < got.size(); ++i) {
      const PackedMatrix& m = *want[i];
      EXPECT_EQ(got[i].bytes(), static_cast<int64_t>(m.bytes())) << spec << " " << i;
      EXPECT_EQ(got[i].data,
                IsBfp(m.format()) ? m.bfp().data() : static_cast<const uint8_t*>(m.data()))
          << spec << " " << i;
      EXPECT_EQ(got[i].panels, m.panels()) << spec << " " << i;
    }
    DecodeReadProbe probe(got, 2);
    probe.Pass();
    uint64_t sum = 0;
    for (const StreamedMatrix& s : got) sum += WordSum(s.data, s.bytes());
    EXPECT_EQ(probe.checksum(), sum) << spec;
  }
}

}  // namespace
}  // namespace wc
