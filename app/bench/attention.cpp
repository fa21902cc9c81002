// `wormchat bench attention`: the host FlashDecode engine at long context, per KV-cache format.
// It measures the machine's read bandwidth itself (a multi-threaded streaming read of a buffer as
// big as the bf16 K+V, far larger than the caches) and times the engine's real run over the same
// tokens stored in each format (best of several, formats interleaved so load from other processes
// hits all alike). It prints, per format: engine time / (K+V bytes / read bandwidth) (target
// <= 1.25), the host speedup over bf16 (target >= 1.7 for int8/fp8 at 32k), and the emulated mesh's
// DRAM read time and total time next to the ratio of stored bytes.
#include "app/bench/attention.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/bench/bounds.h"
#include "app/model_options.h"
#include "attention/flash_decode.h"
#include "kernels/attention/decode_attention.h"
#include "kvcache/kv_cache.h"
#include "mesh/perf_model.h"
#include "util/error.h"
#include "util/memory.h"
#include "util/page_buffer.h"
#include "util/rng.h"

namespace wc {
namespace {

struct BenchAttentionOptions {
  int kv_len = 32768;
  int bsz = 1;
  int q_heads = 32;  // Llama-3.1-8B: 32 query heads on 8 KV heads
  int kv_heads = 8;
  int head_dim = 128;
  int repeats = 20;
  int threads = 0;
  std::vector<std::string> kv_dtypes = {"bf16", "int8", "fp8-e4m3", "fp8-e5m2", "bfp8"};
  std::string kv_scale = "token-head";
  int kv_block_size = 0;
  std::string mesh = "n150";
};

constexpr int kBlock = 4;  // timed runs of each measurement per block

// max |a - b| / max |b|.
double RelMaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, mag = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::fabs(static_cast<double>(b[i])));
  }
  return mag > 0 ? diff / mag : diff;
}

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One format under test: its cache (filled with the shared tokens), view and measurements.
struct FormatRun {
  KVDType dtype = KVDType::kBF16;
  std::unique_ptr<KVCache> cache;
  std::unique_ptr<KVCacheLayerView> view;
  std::vector<float> out;  // [bsz, q_heads, head_dim]
  double best_s = 1e30;
  OpTrace trace;
  PerfEstimate est;
};

void RunBenchAttention(const BenchAttentionOptions& o) {
  ApplyThreads(o.threads);
  if (o.kv_len < 1) throw Error(Cat("--kv-len must be >= 1, got ", o.kv_len));
  if (o.bsz < 1) throw Error(Cat("--bsz must be >= 1, got ", o.bsz));
  if (o.repeats < 1) throw Error(Cat("--repeats must be >= 1, got ", o.repeats));
  if (o.kv_heads < 1 || o.q_heads < 1 || o.q_heads % o.kv_heads != 0)
    throw Error(
        Cat("--q-heads ", o.q_heads, " must be a positive multiple of --kv-heads ", o.kv_heads));
  if (o.head_dim < 1) throw Error(Cat("--head-dim must be >= 1, got ", o.head_dim));
  if (o.kv_dtypes.empty()) throw Error("--kv-dtype needs at least one format");
  const ScaleMode scale_mode = ParseScaleMode(o.kv_scale);
  const MeshSpec mesh = MeshPreset(o.mesh);
  const int threads = omp_get_max_threads();

  // The formats, bf16 first (the baseline of every ratio), each once.
  std::vector<KVDType> dtypes = {KVDType::kBF16};
  for (const auto& name : o.kv_dtypes) {
    const KVDType d = ParseKVDType(name);
    if (std::find(dtypes.begin(), dtypes.end(), d) == dtypes.end()) dtypes.push_back(d);
  }
  const KVCacheShape shape{1, o.bsz, o.kv_heads, o.kv_len, o.head_dim};
  std::vector<FormatRun> runs(dtypes.size());
  for (size_t i = 0; i < dtypes.size(); ++i) {
    KVCacheOptions co;
    co.dtype = dtypes[i];
    co.scale = scale_mode;
    co.block_size = o.kv_block_size;
    // Tensor scales calibrated to the tokens' range: every value lies in [-1, 1).
    if (HasScale(co.dtype) && scale_mode == ScaleMode::kTensor)
      co.tensor_scales.assign(2, 1.0f / KVQuantMax(QuantOf(co.dtype)));
    runs[i].dtype = co.dtype;
    runs[i].cache = std::make_unique<KVCache>(shape, co);
  }

  // The same seeded tokens into every cache: k, v [kv_heads, head_dim] per (user, position).
  std::vector<float> k(static_cast<size_t>(o.kv_heads) * o.head_dim), v(k.size());
  Rng rng(7);
  for (int u = 0; u < o.bsz; ++u)
    for (int pos = 0; pos < o.kv_len; ++pos) {
      for (size_t j = 0; j < k.size(); ++j) {
        const uint64_t bits = rng.Next();
        k[j] = static_cast<float>((bits & 0xffff) / 32768.0 - 1.0);
        v[j] = static_cast<float>(((bits >> 16) & 0xffff) / 32768.0 - 1.0);
      }
      for (auto& r : runs) r.cache->Write(0, u, pos, k.data(), v.data());
    }
  const int64_t q_values = int64_t{o.bsz} * o.q_heads * o.head_dim;  // <= 2^32 by the ranges
  CheckFitsInMemory(q_values * 8, "the queries and outputs of --bsz x --q-heads x --head-dim",
                    "lower them");
  std::vector<float> q(static_cast<size_t>(q_values));
  for (auto& x : q) x = static_cast<float>(rng.Uniform() * 2 - 1);
  std::vector<int32_t> users(o.bsz), offsets(o.bsz, 0);
  for (int u = 0; u < o.bsz; ++u) users[u] = u;

  DecodeAttentionOp op;
  op.bsz = o.bsz;
  op.n_q_heads = o.q_heads;
  op.n_kv_heads = o.kv_heads;
  op.head_dim = o.head_dim;
  op.kv_len = o.kv_len;
  op.q = q.data();
  op.causal = false;
  op.scale = 1.0f / std::sqrt(static_cast<float>(o.head_dim));
  const FlashDecodeConfig config;
  const FlashDecodeEngine engine(mesh, config);
  auto run_op = [&](FormatRun& r) {
    op.kv = r.view.get();
    op.out = r.out.data();
    r.trace = engine.Run(op);
  };
  for (auto& r : runs) {
    r.view = std::make_unique<KVCacheLayerView>(*r.cache, 0, users.data(), offsets.data());
    r.out.assign(q.size(), 0.0f);
  }

  // The machine's read bandwidth over a buffer as big as the bf16 K+V (at least 64 MiB: far
  // beyond a core's L2 and L3 share), so both see the same memory system - on this project's
  // virtual machines a 512 MiB stream reads ~30% slower than a 128 MiB one, which would flatter
  // the engine. Blocks of the stream and of each format alternate and the best time of each
  // counts, so a burst of load from other processes hits all alike.
  const double bf16_bytes = 2.0 * o.bsz * o.kv_heads * static_cast<double>(o.kv_len) *
                            static_cast<double>(runs[0].cache->RowBytes());
  const size_t buf_bytes =
      std::max<size_t>(size_t{64} << 20, static_cast<size_t>(bf16_bytes) / 64 * 64);
  PageBuffer buf(buf_bytes);  // allocated as the KV caches are (huge pages where the OS gives them)
  auto* words = reinterpret_cast<uint64_t*>(buf.data());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < static_cast<int64_t>(buf_bytes / 8); ++i)
    words[i] = static_cast<uint64_t>(i);
  uint64_t sink = 0;
  double read_s = 1e30;
  for (int done = 0; done < o.repeats;) {
    // A block of runs of each, the first of each block untimed: every timed run finds its own
    // buffer as a decode step finds its KV cache (page tables and TLBs warm - which matters a lot
    // on a virtual machine - but far too big for any cache).
    const int block = std::min(kBlock, o.repeats - done);
    StreamReadSeconds(buf, &sink);
    for (int r = 0; r < block; ++r) read_s = std::min(read_s, StreamReadSeconds(buf, &sink));
    for (auto& fr : runs) {
      run_op(fr);
      for (int r = 0; r < block; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        run_op(fr);
        fr.best_s = std::min(fr.best_s, Seconds(t0, std::chrono::steady_clock::now()));
      }
    }
    done += block;
  }
  volatile uint64_t keep = sink;  // the sums must be computed
  (void)keep;
  const double read_gbps = static_cast<double>(buf_bytes) / read_s / 1e9;
  for (auto& fr : runs) fr.est = EstimateFlashDecode(fr.trace, mesh, ShapeOf(op), config.fidelity);

  const FormatRun& base = runs[0];
  std::printf(
      "bench attention: bsz %d, %d q / %d KV heads, head_dim %d, kv_len %d, %s cache, %s scales, "
      "%d threads (emulated %s, %lld cores, k_chunk_size %d)\n",
      o.bsz, o.q_heads, o.kv_heads, o.head_dim, o.kv_len,
      o.kv_block_size > 0 ? Cat("paged (", o.kv_block_size, "-token blocks)").c_str()
                          : "contiguous",
      ScaleModeName(scale_mode), threads, o.mesh.c_str(),
      static_cast<long long>(base.trace.cores_used), base.trace.k_chunk_size);
  std::printf("  memory read   %zu MiB streamed, best of %d: %.3f ms -> %.2f GB/s\n",
              buf_bytes >> 20, o.repeats, read_s * 1e3, read_gbps);
  std::printf("  %-9s %6s %9s | %9s %8s %7s %8s | %9s %8s %8s %8s | %9s | %s\n", "format", "row B",
              "K+V MiB", "host ms", "GB/s", "bound", "speedup", "mesh us", "speedup", "DRAM us",
              "speedup", "bytes", "host kernels");
  for (const auto& fr : runs) {
    const double bytes = 2.0 * o.bsz * o.kv_heads * static_cast<double>(o.kv_len) *
                         static_cast<double>(fr.cache->RowBytes());
    const double bound_s = bytes / (read_gbps * 1e9);
    std::printf(
        "  %-9s %6.0f %9.1f | %9.3f %8.2f %7.3f %7.2fx | %9.1f %7.2fx %8.1f %7.2fx | %8.3fx | "
        "%s\n",
        KVDTypeName(fr.dtype), fr.cache->RowBytes(), bytes / (1 << 20), fr.best_s * 1e3,
        bytes / fr.best_s / 1e9, fr.best_s / bound_s, base.best_s / fr.best_s, fr.est.emulated_us,
        base.est.emulated_us / fr.est.emulated_us, fr.est.kv_read_us,
        base.est.kv_read_us / fr.est.kv_read_us, bytes / bf16_bytes,
        AttentionKernelName(fr.view->Keys(0, 0, 0, 1)).c_str());
  }
  double worst_err = 0;  // every format's output against bf16's: the runs computed real attention
  for (const auto& fr : runs) worst_err = std::max(worst_err, RelMaxDiff(fr.out, base.out));
  std::printf(
      "  host: bound = engine time / (K+V bytes / read bandwidth), target <= 1.25; speedup over "
      "bf16, target >= 1.7 for int8 and fp8 at 32k.\n"
      "  mesh: emulated op time and K/V DRAM read time (slowest core), speedup over bf16; bytes = "
      "stored K+V relative to bf16. Outputs agree with bf16 within %.3g (max abs diff / max "
      "abs).\n",
      worst_err);
}

}  // namespace

void RegisterBenchAttention(CLI::App* bench) {
  auto o = std::make_shared<BenchAttentionOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "attention", "FlashDecode engine time per KV-cache format against memory bandwidth and bf16");
  // Ranges as a model's (model/config.cpp); the KV caches' size is checked against free memory
  // when they are built.
  cmd->add_option("--kv-len", o->kv_len, "Cached positions attended (1-16777216)")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--bsz", o->bsz, "Batch size (1-1024)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--q-heads", o->q_heads, "Query heads (1-4096)")
      ->check(CLI::Range(1, 1 << 12))
      ->capture_default_str();
  cmd->add_option("--kv-heads", o->kv_heads, "KV heads (1-4096)")
      ->check(CLI::Range(1, 1 << 12))
      ->capture_default_str();
  cmd->add_option("--head-dim", o->head_dim, "Head dimension (1-1024)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "Timed runs (best is reported; 1-10000)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  AddThreadsOption(cmd, o->threads);
  cmd->add_option("--kv-dtype", o->kv_dtypes,
                  "KV cache formats to compare with bf16 (comma-separated): bf16, f32, int8, "
                  "fp8-e4m3, fp8-e5m2, bfp8")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--kv-scale", o->kv_scale, "int8/fp8 scales: token-head or tensor")
      ->capture_default_str();
  cmd->add_option("--kv-block-size", o->kv_block_size,
                  "Paged KV cache with blocks of this many tokens (0 = contiguous)")
      ->capture_default_str();
  cmd->add_option("--mesh", o->mesh, "Emulated Wormhole mesh: n150, n300, n300x2, t3k, galaxy")
      ->capture_default_str();
  cmd->callback([o] { RunBenchAttention(*o); });
}

}  // namespace wc
