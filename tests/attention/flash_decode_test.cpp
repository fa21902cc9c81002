// The FlashDecode engine on the emulated mesh against the reference attention: every layout and
// split the issue lists, bit-exact determinism, and planning runs that count like real runs.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "attention/flash_decode.h"
#include "attention/reference_attention.h"
#include "tests/test_util.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/rng.h"

namespace wc {
namespace {

struct Case {
  int bsz = 1, n_q = 8, n_kv = 1, head_dim = 64, kv_len = 128;
  bool causal = true, masked = false, new_token = false, bf16 = false;
  bool alibi = false;  // ALiBi over the query heads' slopes, rounded to bf16 as HF's Falcon
  std::string mesh = "n150";
  int max_cores = 16, chunk = 0;
  Reduction reduction = Reduction::kTree;
  uint64_t seed = 1;
};

// Inputs of one op, generated from a seed.
struct Inputs {
  std::vector<float> q;            // [bsz, n_q, hd]
  std::vector<float> k, v;         // [bsz, n_kv, kv_len, hd] exact values
  std::vector<uint16_t> k16, v16;  // bf16 copies when the case is bf16
  std::vector<float> nk, nv;       // [bsz, n_kv, 1, hd]
  std::vector<int32_t> cur_pos;    // [bsz]
  std::vector<float> mask;         // [bsz, n_q, kv_len]
};

Inputs MakeInputs(const Case& c) {
  Rng rng(c.seed);
  auto fill = [&](std::vector<float>& x, size_t n, double amp) {
    x.resize(n);
    for (auto& e : x) e = static_cast<float>((rng.Uniform() * 2 - 1) * amp);
  };
  Inputs in;
  fill(in.q, size_t(c.bsz) * c.n_q * c.head_dim, 2.0);
  fill(in.k, size_t(c.bsz) * c.n_kv * c.kv_len * c.head_dim, 1.0);
  fill(in.v, in.k.size(), 1.0);
  fill(in.nk, size_t(c.bsz) * c.n_kv * c.head_dim, 1.0);
  fill(in.nv, in.nk.size(), 1.0);
  if (c.bf16) {
    for (auto* pair : {&in.k, &in.v}) {
      auto& dst = pair == &in.k ? in.k16 : in.v16;
      dst.resize(pair->size());
      for (size_t i = 0; i < pair->size(); ++i) {
        dst[i] = F32ToBF16((*pair)[i]);
        (*pair)[i] = BF16ToF32(dst[i]);
      }
    }
  }
  in.cur_pos.resize(c.bsz);
  for (int b = 0; b < c.bsz; ++b)  // a spread of positions, including -1 and the last one
    in.cur_pos[b] = b == 0 ? c.kv_len - 1 : static_cast<int32_t>(rng.Next() % (c.kv_len + 1)) - 1;
  if (c.masked) {
    in.mask.resize(size_t(c.bsz) * c.n_q * c.kv_len);
    for (auto& m : in.mask)
      m = rng.Uniform() < 0.3 ? -std::numeric_limits<float>::infinity() : 0.0f;
  }
  return in;
}

// The oracle: per (b, KV head) group, ReferenceAttentionGroup over the attended rows (plus the new
// token, appended); masked mode in double precision directly.
std::vector<float> Reference(const Case& c, const Inputs& in) {
  const int qpk = c.n_q / c.n_kv, hd = c.head_dim;
  const std::vector<float> slopes = AlibiSlopes(c.n_q);
  const AlibiBias alibi = c.alibi ? AlibiBias{slopes.data(), true} : AlibiBias{};
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> out(in.q.size(), 0.0f);
  for (int b = 0; b < c.bsz; ++b) {
    for (int g = 0; g < c.n_kv; ++g) {
      const int64_t base = (int64_t(b) * c.n_kv + g) * c.kv_len;
      const float* q = &in.q[(int64_t(b) * c.n_q + g * qpk) * hd];
      float* o = &out[(int64_t(b) * c.n_q + g * qpk) * hd];
      if (c.masked) {
        for (int h = 0; h < qpk; ++h) {
          const float* mrow = &in.mask[(int64_t(b) * c.n_q + g * qpk + h) * c.kv_len];
          std::vector<double> s(c.kv_len);
          double mx = -INFINITY;
          for (int p = 0; p < c.kv_len; ++p) {
            double d = 0;
            for (int e = 0; e < hd; ++e) d += double(q[h * hd + e]) * in.k[(base + p) * hd + e];
            s[p] = d * scale + mrow[p];
            mx = std::max(mx, s[p]);
          }
          if (mx == -INFINITY) continue;  // fully masked: zeros
          double sum = 0;
          std::vector<double> acc(hd, 0.0);
          for (int p = 0; p < c.kv_len; ++p) {
            const double e = std::exp(s[p] - mx);
            sum += e;
            for (int d = 0; d < hd; ++d) acc[d] += e * in.v[(base + p) * hd + d];
          }
          for (int d = 0; d < hd; ++d) o[h * hd + d] = static_cast<float>(acc[d] / sum);
        }
        continue;
      }
      const int len = c.causal ? in.cur_pos[b] + 1 : c.kv_len;
      std::vector<float> kk(in.k.begin() + base * hd, in.k.begin() + (base + len) * hd);
      std::vector<float> vv(in.v.begin() + base * hd, in.v.begin() + (base + len) * hd);
      if (c.new_token) {
        const int64_t nb = (int64_t(b) * c.n_kv + g) * hd;
        kk.insert(kk.end(), in.nk.begin() + nb, in.nk.begin() + nb + hd);
        vv.insert(vv.end(), in.nv.begin() + nb, in.nv.begin() + nb + hd);
      }
      const int rows = static_cast<int>(kk.size() / hd);
      if (rows == 0) continue;  // skipped user: zeros
      std::vector<float> scores(size_t(qpk) * rows);
      ReferenceAttentionGroup(q, qpk, MatrixRef{DType::kF32, rows, hd, hd, kk.data()},
                              MatrixRef{DType::kF32, rows, hd, hd, vv.data()}, scale, scores.data(),
                              o, alibi, g * qpk);
    }
  }
  return out;
}

std::vector<float> RunEngine(const Case& c, const Inputs& in, OpTrace* trace = nullptr,
                             bool compute = true) {
  FlashDecodeConfig cfg;
  cfg.max_cores_per_head_batch = c.max_cores;
  cfg.k_chunk_size = c.chunk;
  cfg.reduction = c.reduction;
  FlashDecodeEngine engine(MeshPreset(c.mesh), cfg);
  ContiguousKV kv =
      c.bf16
          ? ContiguousKV(DType::kBF16, in.k16.data(), in.v16.data(), c.n_kv, c.kv_len, c.head_dim)
          : ContiguousKV(DType::kF32, in.k.data(), in.v.data(), c.n_kv, c.kv_len, c.head_dim);
  ContiguousKV new_kv(DType::kF32, in.nk.data(), in.nv.data(), c.n_kv, 1, c.head_dim);
  std::vector<float> out(in.q.size(), -99.0f);
  DecodeAttentionOp op;
  op.bsz = c.bsz;
  op.n_q_heads = c.n_q;
  op.n_kv_heads = c.n_kv;
  op.head_dim = c.head_dim;
  op.kv_len = c.kv_len;
  op.q = in.q.data();
  op.kv = &kv;
  op.causal = c.causal;
  op.cur_pos = in.cur_pos.data();
  op.mask = c.masked ? in.mask.data() : nullptr;
  op.new_kv = c.new_token ? &new_kv : nullptr;
  op.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const std::vector<float> slopes = AlibiSlopes(c.n_q);
  if (c.alibi) op.alibi = AlibiBias{slopes.data(), true};
  op.out = out.data();
  OpTrace t = engine.Run(op, compute);
  if (trace != nullptr) *trace = std::move(t);
  return out;
}

void ExpectMatches(const Case& c, const char* what) {
  const Inputs in = MakeInputs(c);
  const auto got = RunEngine(c, in);
  EXPECT_LE(test::RelMaxError(got, Reference(c, in)), 1e-5)
      << what << ": bsz " << c.bsz << " heads " << c.n_q << "/" << c.n_kv << " hd " << c.head_dim
      << " kv_len " << c.kv_len << " mesh " << c.mesh << " max_cores " << c.max_cores << " "
      << ReductionName(c.reduction);
}

TEST(FlashDecode, MhaMqaGqaAcrossBatchSizes) {
  for (auto [nq, nkv] :
       std::vector<std::pair<int, int>>{{4, 4}, {8, 1}, {8, 2}, {32, 8}, {16, 16}}) {
    for (int bsz : {1, 3, 8, 32}) {
      Case c;
      c.n_q = nq;
      c.n_kv = nkv;
      c.bsz = bsz;
      c.kv_len = 300;
      c.seed = nq * 100 + bsz;
      ExpectMatches(c, "layouts");
    }
  }
}

// ALiBi's bias inside every chunk's scores (and the new token's, at its own position) gives the
// reference's (q k^T + bias) * scale: GQA and MHA, 6 heads (extra slopes), positions past 256
// (where bf16 rounds the position), several chunk sizes and core splits; and a bias that moved
// one position would show (the check can fail).
TEST(FlashDecode, AlibiBiasInEveryChunkMatchesTheReference) {
  for (auto [nq, nkv] : std::vector<std::pair<int, int>>{{4, 4}, {6, 6}, {8, 2}, {12, 1}}) {
    for (int chunk : {0, 32, 128}) {
      for (bool new_token : {false, true}) {
        Case c;
        c.n_q = nq;
        c.n_kv = nkv;
        c.bsz = 3;
        c.kv_len = 700;
        c.head_dim = 32;
        c.chunk = chunk;
        c.new_token = new_token;
        c.alibi = true;
        c.seed = nq * 10 + chunk + new_token;
        ExpectMatches(c, "alibi");
      }
    }
  }
  Case c;
  c.n_q = 4;
  c.n_kv = 4;
  c.kv_len = 300;
  c.head_dim = 32;
  c.alibi = true;
  const Inputs in = MakeInputs(c);
  Case without = c;
  without.alibi = false;
  EXPECT_GT(test::RelMaxError(RunEngine(c, in), Reference(without, in)), 1e-3)
      << "the bias changes nothing";
}

TEST(FlashDecode, KvLengthsAtChunkBoundaries) {
  for (int len : {1, 2, 31, 32, 33, 63, 64, 65, 511, 512, 513, 1000, 1024, 1025}) {
    for (int chunk : {0, 32, 64}) {
      Case c;
      c.bsz = 2;
      c.n_q = 8;
      c.n_kv = 2;
      c.kv_len = len;
      c.chunk = chunk;
      c.seed = len * 7 + chunk;
      ExpectMatches(c, "lengths");
    }
  }
}

TEST(FlashDecode, LongContext16k) {
  Case c;
  c.bsz = 2;
  c.n_q = 8;
  c.n_kv = 1;
  c.head_dim = 64;
  c.kv_len = 16384;
  c.bf16 = true;
  ExpectMatches(c, "16k");
}

TEST(FlashDecode, CausalMaskedAndNewTokenModes) {
  for (bool bf16 : {false, true}) {
    Case c;
    c.bsz = 4;
    c.n_q = 8;
    c.n_kv = 2;
    c.kv_len = 700;
    c.bf16 = bf16;
    c.new_token = true;
    ExpectMatches(c, "causal + new token (seed 001 split)");
    c.new_token = false;
    c.causal = false;
    ExpectMatches(c, "non-causal, no mask");
    c.masked = true;
    ExpectMatches(c, "non-causal with mask");
  }
}

TEST(FlashDecode, FlatAndTreeReductionOneToSixtyFourCoresOneTwoEightChips) {
  for (Reduction r : {Reduction::kFlat, Reduction::kTree}) {
    for (int cores : {1, 2, 3, 7, 16, 64}) {
      for (const char* mesh : {"n150", "n300", "t3k"}) {
        Case c;
        c.bsz = 1;
        c.n_q = 16;
        c.n_kv = 8;
        c.kv_len = 4096;
        c.chunk = 32;  // 128 chunks: enough to give every core work
        c.max_cores = cores;
        c.reduction = r;
        c.mesh = mesh;
        c.bf16 = true;
        ExpectMatches(c, "split");
      }
    }
  }
}

TEST(FlashDecode, OneWorkOverSixtyFourCores) {
  Case c;
  c.bsz = 1;
  c.n_q = 4;
  c.n_kv = 1;
  c.kv_len = 8192;
  c.chunk = 64;
  c.max_cores = 64;
  OpTrace trace;
  const Inputs in = MakeInputs(c);
  const auto got = RunEngine(c, in, &trace);
  EXPECT_LE(test::RelMaxError(got, Reference(c, in)), 1e-5);
  EXPECT_EQ(trace.cores_per_work, 64);
  EXPECT_EQ(trace.cores_used, 64);
}

TEST(FlashDecode, MoreWorksThanCoresNeedNoReduction) {
  Case c;
  c.bsz = 32;
  c.n_q = 32;
  c.n_kv = 8;  // 256 works on 64 cores
  c.kv_len = 200;
  OpTrace trace;
  const Inputs in = MakeInputs(c);
  const auto got = RunEngine(c, in, &trace);
  EXPECT_LE(test::RelMaxError(got, Reference(c, in)), 1e-5);
  EXPECT_EQ(trace.cores_per_work, 1);
  EXPECT_EQ(trace.noc_bytes, 0.0);
}

TEST(FlashDecode, BitIdenticalForAnyThreadsSplitReductionAndBatch) {
  Case c;
  c.bsz = 3;
  c.n_q = 8;
  c.n_kv = 2;
  c.kv_len = 2048;
  c.chunk = 32;
  c.bf16 = true;
  c.new_token = true;
  const Inputs in = MakeInputs(c);
  omp_set_num_threads(1);
  const auto base = RunEngine(c, in);
  auto same = [&](const std::vector<float>& x, const char* what) {
    EXPECT_EQ(0, std::memcmp(base.data(), x.data(), base.size() * sizeof(float))) << what;
  };
  for (int t : {2, 8}) {
    omp_set_num_threads(t);
    same(RunEngine(c, in), "threads");
  }
  omp_set_num_threads(omp_get_num_procs());
  for (int cores : {1, 5, 16, 64}) {
    Case d = c;
    d.max_cores = cores;
    same(RunEngine(d, in), "cores per work");
    d.reduction = Reduction::kFlat;
    same(RunEngine(d, in), "flat reduction");
  }
  Case e = c;
  e.mesh = "t3k";
  same(RunEngine(e, in), "chips");
  // Batch entry 0 alone gives the same bits as inside the batch of 3.
  Case alone = c;
  alone.bsz = 1;
  Inputs one = in;
  const size_t per_q = size_t(c.n_q) * c.head_dim, per_kv = size_t(c.n_kv) * c.kv_len * c.head_dim;
  one.q.resize(per_q);
  one.k16.resize(per_kv);
  one.v16.resize(per_kv);
  one.nk.resize(size_t(c.n_kv) * c.head_dim);
  one.nv.resize(one.nk.size());
  one.cur_pos.resize(1);
  const auto single = RunEngine(alone, one);
  EXPECT_EQ(0, std::memcmp(base.data(), single.data(), per_q * sizeof(float))) << "batch";
}

TEST(FlashDecode, PlanningRunCountsExactlyLikeARealRun) {
  for (Reduction r : {Reduction::kFlat, Reduction::kTree}) {
    Case c;
    c.bsz = 2;
    c.n_q = 8;
    c.n_kv = 2;
    c.kv_len = 3000;
    c.chunk = 64;
    c.reduction = r;
    c.new_token = true;
    const Inputs in = MakeInputs(c);
    OpTrace real, plan;
    RunEngine(c, in, &real, true);
    RunEngine(c, in, &plan, false);
    ASSERT_EQ(real.cores.size(), plan.cores.size());
    EXPECT_EQ(real.dram_bytes, plan.dram_bytes);
    EXPECT_EQ(real.noc_bytes, plan.noc_bytes);
    for (size_t i = 0; i < real.cores.size(); ++i) {
      EXPECT_EQ(real.cores[i].chunks, plan.cores[i].chunks);
      EXPECT_EQ(real.cores[i].merge_tiles, plan.cores[i].merge_tiles);
      EXPECT_EQ(real.cores[i].writes.size(), plan.cores[i].writes.size());
      EXPECT_EQ(real.cores[i].sem_waits, plan.cores[i].sem_waits);
    }
  }
}

TEST(FlashDecode, CountsFollowTheWorkSplit) {
  Case c;
  c.bsz = 1;
  c.n_q = 8;
  c.n_kv = 1;
  c.kv_len = 8192;
  c.chunk = 256;  // 32 chunks over 16 cores: 2 each, aligned, one partial per worker
  c.max_cores = 16;
  c.reduction = Reduction::kFlat;
  c.bf16 = true;
  OpTrace t;
  const Inputs in = MakeInputs(c);
  RunEngine(c, in, &t);
  EXPECT_EQ(t.cores_used, 16);
  EXPECT_EQ(t.dram_bytes, 2.0 * 8192 * 64 * 2);  // K + V, bf16, read once
  int writes = 0;
  for (const auto& core : t.cores) {
    if (core.rank == 0) {
      EXPECT_EQ(core.sem_waits, 1);
      EXPECT_EQ(core.received_per_step[0], 15);
    }
    for (const auto& w : core.writes) {
      ++writes;
      EXPECT_EQ(w.bytes, 1024 * (2 + 2));  // one half-tile partial: O (2 tiles) + m + l
      EXPECT_GT(w.hops, 0);
    }
  }
  EXPECT_EQ(writes, 15);
}

TEST(FlashDecode, L1BudgetRefusesOrLowersTheChunk) {
  Case c;
  c.bsz = 1;
  c.n_q = 32;
  c.n_kv = 1;
  c.head_dim = 256;
  c.kv_len = 4096;
  c.chunk = 512;  // f32 K/V double-buffered: 4 x 512 x 256 x 4 B = 2 MiB > 1464 KiB
  const Inputs in = MakeInputs(c);
  try {
    RunEngine(c, in);
    FAIL() << "accepted a chunk that does not fit L1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("k_chunk_size 512 needs"), std::string::npos) << e.what();
  }
  c.chunk = 0;  // auto: lowered until it fits
  OpTrace t;
  RunEngine(c, in, &t);
  EXPECT_LT(t.k_chunk_size, 512);
  EXPECT_LE(t.l1_bytes_per_core, 1464 * 1024);
  EXPECT_THROW(FlashDecodeEngine(MeshPreset("n150"), FlashDecodeConfig{48}), Error);
}

TEST(FlashDecode, RejectsBadShapesAndPositions) {
  Case c;
  c.kv_len = 64;
  Inputs in = MakeInputs(c);
  in.cur_pos[0] = 64;
  EXPECT_THROW(RunEngine(c, in), Error);
  EXPECT_THROW(MeshPreset("n9000"), Error);
}

}  // namespace
}  // namespace wc
