#include "attention/flash_decode.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <tuple>

#include <omp.h>

#include "attention/reference_attention.h"
#include "attention/softmax_partial.h"
#include "util/error.h"
#include "util/int_math.h"

namespace wc {
namespace {

// Tile geometry of one op: Q rows of a KV group padded to a half (16-row) or full tile.
struct Geometry {
  int qpk = 0;            // query heads per KV head (rows of the Q tile)
  int q_tile_rows = 0;    // 32-row tiles the Q rows occupy
  int q_tile_bytes = 0;   // bf16 tile (2048 B) or half tile (1024 B) for <= 16 rows
  int hd_tiles = 0;       // head_dim in tiles of 32
  int partial_bytes = 0;  // one partial (O, m, l) as bf16 tiles: what a worker sends
};

Geometry MakeGeometry(const DecodeAttentionOp& op) {
  Geometry g;
  g.qpk = op.n_q_heads / op.n_kv_heads;
  g.q_tile_rows = CeilDiv(g.qpk, 32);
  g.q_tile_bytes = g.qpk <= 16 ? 1024 : 2048;
  g.hd_tiles = CeilDiv(op.head_dim, 32);
  g.partial_bytes = g.q_tile_rows * (g.hd_tiles + 2) * g.q_tile_bytes;
  return g;
}

// Hops from core a to core b over NoC0 (+x, +y) on the chip's NoC torus; the compute grid sits at
// offset (1, 1) of the 10 x 12 NoC grid (DRAM and ethernet columns/rows around it).
int NocHops(const WormholeChipSpec& chip, int a, int b) {
  const int noc_x = chip.grid_x + 2, noc_y = chip.grid_y + 2;
  const int ax = a % chip.compute_x, ay = a / chip.compute_x;
  const int bx = b % chip.compute_x, by = b / chip.compute_x;
  return ((bx - ax) % noc_x + noc_x) % noc_x + ((by - ay) % noc_y + noc_y) % noc_y;
}

// One work (user, KV head, a run of the user's consecutive queries) and the chunks it reads.
struct Work {
  int b = 0, g = 0;
  int t0 = 0;        // token of its first query
  int nq = 1;        // queries in the run
  int limit0 = 0;    // rows its first query attends: cur_pos + first + 1 (causal) or kv_len
  int n_chunks = 0;  // chunks its last query attends (the chunks the work reads)
  // Rows query i of the run attends (causal within the run; non-causal works have one query).
  int Limit(int i) const { return limit0 + i; }
};

// The first `rows` rows of `r` (rows are self-contained: each carries its own scale).
RowsRef FirstRows(RowsRef r, int64_t rows) {
  r.rows = rows;
  return r;
}

// One active emulated core and what it runs.
struct CoreTask {
  int chip = 0, core = 0;
  std::vector<int> works;  // indices into the chip's works
  int group_size = 1, rank = 0;
  int chunk_begin = 0, chunk_end = 0;  // with group_size > 1: its range of the work's chunks
  int reducer_task = -1;               // task index of its group's rank 0
  std::vector<int> group_tasks;        // (reducer only) task indices of ranks 0..n_active-1
};

// The L1 state of an emulated core: its outgoing partials, and (reducers/receivers) the slots
// workers write into and the semaphore they increment.
// Partials are kept per query of the core's work: [query][nodes in ascending chunk order].
using QueryPartials = std::vector<std::vector<PartialNode>>;
struct CoreL1 {
  QueryPartials out;                 // partials ready to send (the out CB)
  std::vector<QueryPartials> slots;  // [group rank] received partials
  std::atomic<int> semaphore{0};
};

// A core's K and V chunk buffers (its L1 circular buffers): a chunk whose rows cannot be read in
// place (they span pages) is copied here as stored - still quantized - and computed from L1.
struct ChunkBuffers {
  std::vector<uint8_t> k, v;
  std::pair<RowsRef, RowsRef> Read(const KVView& view, int b, int g, int start, int rows) {
    const RowsRef mk = view.Keys(b, g, start, rows), mv = view.Values(b, g, start, rows);
    if (!mk.empty()) return {mk, mv};
    const size_t bytes = static_cast<size_t>(rows) * static_cast<size_t>(view.RowBytes());
    if (k.size() < bytes) {
      k.resize(bytes);
      v.resize(bytes);
    }
    return view.CopyRows(b, g, start, rows, k.data(), v.data());
  }
};

}  // namespace

int DecodeAttentionOp::tokens() const {
  if (q_len == nullptr) return bsz;
  int n = 0;
  for (int b = 0; b < bsz; ++b) n += q_len[b];
  return n;
}

const char* ReductionName(Reduction r) {
  return r == Reduction::kFlat ? "flat" : "tree";
}

Reduction ParseReduction(const std::string& name) {
  if (name == "flat") return Reduction::kFlat;
  if (name == "tree") return Reduction::kTree;
  throw Error(Cat("--reduction '", name, "' is not supported; choose flat or tree"));
}

FlashDecodeEngine::FlashDecodeEngine(const MeshSpec& mesh, const FlashDecodeConfig& config)
    : mesh_(mesh), config_(config) {
  const int c = config.k_chunk_size;
  if (c != 0 && (c < 32 || c % 32 != 0 || (c & (c - 1)) != 0))
    throw Error(
        Cat("k_chunk_size ", c, " must be a power of two and a multiple of 32 (or 0 = auto)"));
  if (config.max_cores_per_head_batch < 1)
    throw Error(
        Cat("max_cores_per_head_batch must be >= 1, got ", config.max_cores_per_head_batch));
}

int64_t FlashDecodeEngine::L1BytesPerCore(const DecodeAttentionOp& op, int chunk, int group_size,
                                          int queries) const {
  const Geometry g = MakeGeometry(op);
  // One 32 x 32 tile: 32 rows of 32 of the head_dim values (the row bytes cover head_dim values).
  const int kv_tile_bytes = static_cast<int>(std::ceil(op.kv->RowBytes() * 32 * 32 / op.head_dim));
  const int64_t chunk_tiles = static_cast<int64_t>(chunk / 32) * g.hd_tiles;
  // Shared by the work's queries (computed one after another against a chunk in L1).
  int64_t shared = 2 * 2 * chunk_tiles * kv_tile_bytes;  // K, V double-buffered
  shared += 2 * static_cast<int64_t>(g.q_tile_rows) * (chunk / 32) * g.q_tile_bytes;  // scores, exp
  // Per query.
  int64_t per_query = static_cast<int64_t>(g.q_tile_rows) * g.hd_tiles * g.q_tile_bytes;  // Q
  per_query += 2 * static_cast<int64_t>(g.partial_bytes);  // running and previous partial
  per_query += static_cast<int64_t>(g.q_tile_rows) * g.hd_tiles * g.q_tile_bytes;  // output
  // Reduction slots: flat reducers hold every worker's partials; tree receivers one at a time.
  const int slots = config_.reduction == Reduction::kFlat ? std::max(0, group_size - 1)
                                                          : (group_size > 1 ? 1 : 0);
  per_query += static_cast<int64_t>(slots) * g.partial_bytes;
  return shared + static_cast<int64_t>(queries) * per_query;
}

int FlashDecodeEngine::ChunkSizeFor(const DecodeAttentionOp& op) const {
  const int64_t l1 = mesh_.chip.l1_bytes;
  const int groups = std::min(config_.max_cores_per_head_batch, mesh_.cores_per_chip());
  if (config_.k_chunk_size != 0) {
    const int64_t need = L1BytesPerCore(op, config_.k_chunk_size, groups);
    if (need > l1)
      throw Error(Cat("k_chunk_size ", config_.k_chunk_size, " needs ", need >> 10,
                      " KiB of L1 per core but a Wormhole core has ", l1 >> 10,
                      " KiB; lower k_chunk_size (or use 0 = auto)"));
    return config_.k_chunk_size;
  }
  const int64_t padded = (static_cast<int64_t>(op.kv_len) + 31) / 32 * 32;
  int chunk = 32;
  while (chunk < 512 && padded % (2 * chunk) == 0) chunk *= 2;
  while (chunk > 32 && L1BytesPerCore(op, chunk, groups) > l1) chunk /= 2;  // as the real op must
  if (L1BytesPerCore(op, chunk, groups) > l1)
    throw Error(Cat("attention with head_dim ", op.head_dim, " and ", op.n_q_heads / op.n_kv_heads,
                    " query heads per KV head does not fit a core's L1 even with 32-row chunks"));
  return chunk;
}

OpTrace FlashDecodeEngine::Run(const DecodeAttentionOp& op, bool compute) const {
  if (op.bsz < 1 || op.n_q_heads < 1 || op.n_kv_heads < 1 || op.head_dim < 1 || op.kv_len < 1)
    throw Error(Cat("attention shape bsz ", op.bsz, ", heads ", op.n_q_heads, "/", op.n_kv_heads,
                    ", head_dim ", op.head_dim, ", kv_len ", op.kv_len, " has an empty dimension"));
  if (op.n_q_heads % op.n_kv_heads != 0)
    throw Error(Cat("n_q_heads ", op.n_q_heads, " is not divisible by n_kv_heads ", op.n_kv_heads));
  WC_CHECK(op.kv != nullptr && op.kv->head_dim() == op.head_dim, "K/V view");
  WC_CHECK(!op.causal || op.cur_pos != nullptr, "causal attention needs cur_pos");
  WC_CHECK(!compute || (op.q != nullptr && op.out != nullptr), "compute needs q and out");
  WC_CHECK(op.q_len == nullptr || op.causal, "several queries per user need causal attention");
  WC_CHECK(!op.alibi.enabled() || op.causal, "ALiBi needs causal attention (key positions)");
  auto q_len = [&](int b) { return op.q_len == nullptr ? 1 : op.q_len[b]; };
  int max_q_len = 1;
  for (int b = 0; b < op.bsz; ++b) {
    if (q_len(b) < 1) throw Error(Cat("q_len ", q_len(b), " of user ", b, " must be at least 1"));
    max_q_len = std::max(max_q_len, q_len(b));
    if (!op.causal) continue;
    if (op.cur_pos[b] < -1 || op.cur_pos[b] + q_len(b) - 1 >= op.kv_len)
      throw Error(Cat("cur_pos ", op.cur_pos[b], " (", q_len(b), " queries) of batch entry ", b,
                      " is outside [-1, kv_len ", op.kv_len, ")"));
  }
  const Geometry geo = MakeGeometry(op);
  const WormholeChipSpec& chip = mesh_.chip;
  const int n_cores = mesh_.cores_per_chip();
  const int chunk = ChunkSizeFor(op);
  const int64_t padded_len = (static_cast<int64_t>(op.kv_len) + 31) / 32 * 32;
  // The most queries of one user a work carries: as many as fit L1 beside the shared K/V chunks.
  int max_q = 1;
  {
    const int groups = std::min(config_.max_cores_per_head_batch, n_cores);
    while (max_q < max_q_len && L1BytesPerCore(op, chunk, groups, max_q + 1) <= chip.l1_bytes)
      ++max_q;
  }
  std::vector<int> first_token(op.bsz, 0);  // [bsz] token of each user's first query
  for (int b = 1; b < op.bsz; ++b) first_token[b] = first_token[b - 1] + q_len(b - 1);

  OpTrace trace;
  trace.k_chunk_size = chunk;
  trace.queries_per_work = std::min(max_q, max_q_len);

  // ---- Plan: KV heads over chips, works over cores, chunks over a work's cores.
  std::vector<std::vector<Work>> chip_works(mesh_.chips);
  std::vector<CoreTask> tasks;
  for (int c = 0; c < mesh_.chips; ++c) {
    const int h0 = static_cast<int>(static_cast<int64_t>(op.n_kv_heads) * c / mesh_.chips);
    const int h1 = static_cast<int>(static_cast<int64_t>(op.n_kv_heads) * (c + 1) / mesh_.chips);
    if (h1 == h0) continue;
    ++trace.chips_used;
    std::vector<Work>& works = chip_works[c];
    for (int b = 0; b < op.bsz; ++b) {
      for (int g = h0; g < h1; ++g) {
        for (int first = 0; first < q_len(b); first += max_q) {
          Work w;
          w.b = b;
          w.g = g;
          w.t0 = first_token[b] + first;
          w.nq = std::min(max_q, q_len(b) - first);
          w.limit0 = op.causal ? op.cur_pos[b] + first + 1 : op.kv_len;
          w.n_chunks = CeilDiv(w.Limit(w.nq - 1), chunk);
          works.push_back(w);
        }
      }
    }
    const int n_works = static_cast<int>(works.size());
    if (n_works >= n_cores) {  // several works per core, each whole: no reduction
      trace.cores_per_work = 1;
      for (int core = 0; core < n_cores; ++core) {
        CoreTask t;
        t.chip = c;
        t.core = core;
        for (int w = n_works * core / n_cores; w < n_works * (core + 1) / n_cores; ++w)
          t.works.push_back(w);
        t.reducer_task = static_cast<int>(tasks.size());
        tasks.push_back(t);
      }
      continue;
    }
    const int cpw = std::min(n_cores / n_works, config_.max_cores_per_head_batch);
    trace.cores_per_work = cpw;
    for (int w = 0; w < n_works; ++w) {
      const int n = works[w].n_chunks;
      const int active = std::max(1, std::min(cpw, n));  // rank 0 runs even with no chunks
      const int reducer = static_cast<int>(tasks.size());
      for (int r = 0; r < active; ++r) {
        CoreTask t;
        t.chip = c;
        t.core = w * cpw + r;
        t.works = {w};
        t.group_size = active;
        t.rank = r;
        t.chunk_begin = r * (n / active) + std::min(r, n % active);
        t.chunk_end = t.chunk_begin + n / active + (r < n % active ? 1 : 0);
        t.reducer_task = reducer;
        tasks.push_back(t);
        tasks[reducer].group_tasks.push_back(reducer + r);
      }
    }
  }
  int max_group = 1;
  for (const auto& t : tasks) max_group = std::max(max_group, t.group_size);
  trace.l1_bytes_per_core = L1BytesPerCore(op, chunk, max_group, trace.queries_per_work);

  // ---- Phase A (all cores in parallel): read chunks, compute partials, fold them canonically.
  const int n_tasks = static_cast<int>(tasks.size());
  std::vector<CoreTrace> traces(n_tasks);
  std::vector<std::unique_ptr<CoreL1>> l1(n_tasks);
  for (int i = 0; i < n_tasks; ++i) {
    l1[i] = std::make_unique<CoreL1>();
    l1[i]->slots.resize(tasks[i].group_size);
  }
  const PartialLayout layout(geo.qpk, op.head_dim);
  const int64_t merge_tiles = 3LL * geo.q_tile_rows * (geo.hd_tiles + 2);
  // Query i of work w: its token's Q heads of KV group g, and where its output goes.
  auto head_offset = [&](const Work& w, int i) {
    return (static_cast<int64_t>(w.t0 + i) * op.n_q_heads + w.g * geo.qpk) * op.head_dim;
  };
  auto q_of = [&](const Work& w, int i) { return compute ? op.q + head_offset(w, i) : nullptr; };

  // The last step of a work's query i: merge the optional new-token part, normalize, write it.
  auto finish_query = [&](const Work& w, int i, PartialNode cache_part, CoreTrace& ct,
                          float* scores, ChunkBuffers& buffers) {
    const int64_t normalize_tiles = static_cast<int64_t>(geo.q_tile_rows) * geo.hd_tiles;
    ct.merge_tiles += normalize_tiles;
    ct.final_merge_tiles += normalize_tiles;
    if (op.new_kv != nullptr) {
      ct.dram_bytes += 2 * op.new_kv->RowBytes();
      ct.merge_tiles += merge_tiles;
      ct.final_merge_tiles += merge_tiles;
    }
    if (!compute) return;
    if (op.new_kv != nullptr) {
      PartialNode extra;
      const auto [k, v] = buffers.Read(*op.new_kv, w.t0 + i, w.g, 0, 1);
      // The new token's own K/V sits at its own position: the rows its query attends in the cache.
      ChunkPartial(q_of(w, i), layout, k, v, op.scale, nullptr, 0, scores, &extra, {},
                   ChunkBias{op.alibi, w.g * geo.qpk, w.Limit(i)});
      layout.Merge(cache_part, extra);
    }
    layout.Normalize(cache_part, op.out + head_offset(w, i));
  };

  // Host units: a task's queries (flattened over its works) split when there are few tasks for the
  // host threads to share - a verify chunk of one row is one core per KV head for the cached
  // positions of its first chunk (and another for the few rows past it), so its 9 queries kept one
  // thread busy and the other idle. About 4 units a thread, for the dynamic schedule to balance
  // uneven tasks. A unit computes whole queries and the task's first unit alone counts its chunk
  // reads, so each query's numbers and each core's trace are the same whatever the split.
  struct Unit {
    int task = 0;
    int q_begin = 0, q_end = 0;  // of the task's queries
  };
  const int host_threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int target_units = host_threads > 1 ? 4 * host_threads : 1;
  const int max_slices = n_tasks >= target_units ? 1 : CeilDiv(target_units, n_tasks);
  std::vector<Unit> units;  // [n_units], a task's in query order
  for (int i = 0; i < n_tasks; ++i) {
    int queries = 0;
    for (int wi : tasks[i].works) queries += chip_works[tasks[i].chip][wi].nq;
    const int slices = std::max(1, std::min(max_slices, queries));
    for (int s = 0; s < slices; ++s)
      units.push_back({i, queries * s / slices, queries * (s + 1) / slices});
    if (tasks[i].group_size > 1) l1[i]->out.resize(chip_works[tasks[i].chip][tasks[i].works[0]].nq);
  }
  const int n_units = static_cast<int>(units.size());
  std::vector<CoreTrace> unit_traces(n_units);

  // Units are handed out dynamically (a busy host thread must not hold the others up); every
  // unit's result depends only on the unit, so the schedule never changes a bit.
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<size_t>(geo.qpk) * chunk);  // [qpk, chunk] scratch
    ChunkBuffers buffers;
#pragma omp for schedule(dynamic, 1)
    for (int u = 0; u < n_units; ++u) {
      const Unit& unit = units[u];
      const int i = unit.task;
      const CoreTask& t = tasks[i];
      const bool first_unit = unit.q_begin == 0;
      CoreTrace& ct = unit_traces[u];
      ct.chip = t.chip;
      ct.core = t.core;
      ct.works = static_cast<int>(t.works.size());
      ct.group_size = t.group_size;
      ct.rank = t.rank;
      ct.chunk_rows = chunk;
      int first_query = 0;  // the work's first query among the task's
      for (int wi : t.works) {
        const Work& w = chip_works[t.chip][wi];
        // This unit's queries of the work: [qa, qb).
        const int qa = std::max(0, unit.q_begin - first_query);
        const int qb = std::min(w.nq, unit.q_end - first_query);
        first_query += w.nq;
        if (qa >= qb && !first_unit) continue;
        ct.queries += std::max(0, qb - qa);
        const int c0 = t.group_size > 1 ? t.chunk_begin : 0;
        const int c1 = t.group_size > 1 ? t.chunk_end : w.n_chunks;
        std::vector<CanonicalMerger> mergers(w.nq, CanonicalMerger(layout));  // [query]
        for (int c = c0; c < c1; ++c) {
          const int start = c * chunk;
          if (first_unit) {
            const int64_t read_rows = std::min<int64_t>(chunk, padded_len - start);  // whole tiles
            ct.dram_bytes += 2.0 * static_cast<double>(read_rows) * op.kv->RowBytes();  // once
            ++ct.chunks;
          }
          if (qa >= qb) continue;
          const int rows = std::min(chunk, w.Limit(w.nq - 1) - start);  // rows the last attends
          const int64_t kt = CeilDiv(std::min<int64_t>(chunk, padded_len - start), 32);
          RowsRef k, v, next_k;
          if (compute) {
            const int next = start + chunk;  // prefetched while this chunk is summed
            if (c + 1 < c1)
              next_k = op.kv->Keys(w.b, w.g, next, std::min(chunk, w.Limit(w.nq - 1) - next));
            std::tie(k, v) = buffers.Read(*op.kv, w.b, w.g, start, rows);
          }
          for (int q = qa; q < qb; ++q) {
            const int q_rows = std::min(chunk, w.Limit(q) - start);  // rows query q attends
            if (q_rows <= 0) continue;  // the chunk lies past this query's position
            ct.matmul_tiles += 2LL * geo.q_tile_rows * kt * geo.hd_tiles;  // Q K^T and P V
            // Per score tile: scale, running max, exp, row sum - and with ALiBi the bias add (the
            // slopes times the key positions, made on the core: no mask read from DRAM).
            const int64_t per_score_tile = op.alibi.enabled() ? 5 : 4;
            ct.sfpu_tiles +=
                static_cast<int64_t>(geo.q_tile_rows) * (per_score_tile * kt + geo.hd_tiles + 2);
            PartialNode node{0, c, {}};
            if (compute) {
              const float* mask =
                  op.mask == nullptr
                      ? nullptr
                      : op.mask +
                            (static_cast<int64_t>(w.b) * op.n_q_heads + w.g * geo.qpk) * op.kv_len +
                            start;
              ChunkPartial(q_of(w, q), layout, FirstRows(k, q_rows), FirstRows(v, q_rows), op.scale,
                           mask, op.kv_len, scores.data(), &node, next_k,
                           ChunkBias{op.alibi, w.g * geo.qpk, start});
            }
            mergers[q].Push(std::move(node));
          }
        }
        for (int q = qa; q < qb; ++q) {
          if (t.group_size == 1) {
            PartialNode result = mergers[q].Finish(compute);
            ct.merge_tiles += merge_tiles * mergers[q].merges();
            finish_query(w, q, std::move(result), ct, scores.data(), buffers);
          } else {
            ct.merge_tiles += merge_tiles * mergers[q].merges();
            l1[i]->out[q] = mergers[q].TakeNodes();
          }
        }
      }
    }
  }
  // Each task's trace: its first unit's, plus its other units' per-query counts (integers, and
  // byte counts far below 2^53: the sums are exact in any order).
  for (int u = 0; u < n_units; ++u) {
    const CoreTrace& part = unit_traces[u];
    CoreTrace& ct = traces[units[u].task];
    if (units[u].q_begin == 0) {
      ct = part;
      continue;
    }
    ct.queries += part.queries;
    ct.dram_bytes += part.dram_bytes;
    ct.matmul_tiles += part.matmul_tiles;
    ct.sfpu_tiles += part.sfpu_tiles;
    ct.merge_tiles += part.merge_tiles;
    ct.final_merge_tiles += part.final_merge_tiles;
  }

  // ---- Reduction: NoC writes of partials into the receiver's L1 slot + a semaphore increment.
  // It merges a few small partials per core, so it runs on the calling thread: no parallel region
  // per step to wait in on a busy host.
  auto noc_write = [&](int src, int dst, int step) {
    int64_t nodes = 0;
    for (const auto& q : l1[src]->out) nodes += static_cast<int64_t>(q.size());
    const int64_t bytes = nodes * geo.partial_bytes;
    traces[src].writes.push_back(
        {tasks[dst].core, bytes, NocHops(chip, tasks[src].core, tasks[dst].core), step});
    l1[dst]->slots[tasks[src].rank] = std::move(l1[src]->out);
    l1[src]->out.clear();
    l1[dst]->semaphore.fetch_add(1);
  };
  // Receiver side: wait for `expected` increments, then fold, per query, its own and the received
  // partials.
  auto receive = [&](int i, int expected, int from_rank, int to_rank, int step) {
    CoreTrace& ct = traces[i];
    ++ct.sem_waits;
    WC_CHECK(l1[i]->semaphore.load() == expected, "semaphore ", l1[i]->semaphore.load(),
             " != ", expected);
    l1[i]->semaphore.store(0);
    ct.received_per_step.resize(step + 1, 0);
    ct.received_per_step[step] = expected;
    const int nq = chip_works[tasks[i].chip][tasks[i].works[0]].nq;
    std::vector<CanonicalMerger> mergers(nq, CanonicalMerger(layout));
    int64_t merges = 0;
    for (int q = 0; q < nq; ++q) {
      for (auto& n : l1[i]->out[q]) mergers[q].Push(std::move(n));
      for (int r = from_rank; r < to_rank; ++r)
        for (auto& n : l1[i]->slots[r][q]) mergers[q].Push(std::move(n));
      merges += mergers[q].merges();
    }
    ct.merge_tiles += merge_tiles * merges;
    ct.merge_tiles_per_step.resize(step + 1, 0);
    ct.merge_tiles_per_step[step] += merge_tiles * merges;
    return mergers;
  };
  auto take_nodes = [](std::vector<CanonicalMerger>& mergers) {
    QueryPartials out(mergers.size());
    for (size_t q = 0; q < mergers.size(); ++q) out[q] = mergers[q].TakeNodes();
    return out;
  };
  std::vector<int> reducers;
  for (int i = 0; i < n_tasks; ++i)
    if (tasks[i].group_size > 1 && tasks[i].rank == 0) reducers.push_back(i);
  const int n_reducers = static_cast<int>(reducers.size());
  if (config_.reduction == Reduction::kFlat) {
    for (int i = 0; i < n_tasks; ++i)
      if (tasks[i].group_size > 1 && tasks[i].rank > 0) noc_write(i, tasks[i].reducer_task, 0);
  } else {
    // Binary tree: at step s, rank r with r % 2^(s+1) == 2^s writes to rank r - 2^s.
    for (int step = 0; (1 << step) < max_group; ++step) {
      const int stride = 1 << step;
      for (int i = 0; i < n_tasks; ++i) {
        const CoreTask& t = tasks[i];
        if (t.group_size > 1 && t.rank % (2 * stride) == stride)
          noc_write(i, tasks[t.reducer_task].group_tasks[t.rank - stride], step);
      }
      for (int i = 0; i < n_tasks; ++i) {
        const CoreTask& t = tasks[i];
        if (t.group_size <= 1 || t.rank % (2 * stride) != 0 || t.rank + stride >= t.group_size)
          continue;
        std::vector<CanonicalMerger> mergers =
            receive(i, 1, t.rank + stride, t.rank + stride + 1, step);
        l1[i]->out = take_nodes(mergers);
      }
    }
  }
  {
    std::vector<float> scores(static_cast<size_t>(geo.qpk) * chunk);
    ChunkBuffers buffers;
    for (int k = 0; k < n_reducers; ++k) {
      const int i = reducers[k];
      const CoreTask& t = tasks[i];
      const Work& w = chip_works[t.chip][t.works[0]];
      std::vector<CanonicalMerger> mergers;
      if (config_.reduction == Reduction::kFlat) {
        mergers = receive(i, t.group_size - 1, 1, t.group_size, 0);
      } else {
        mergers.assign(w.nq, CanonicalMerger(layout));
        for (int q = 0; q < w.nq; ++q)
          for (auto& n : l1[i]->out[q]) mergers[q].Push(std::move(n));
      }
      for (int q = 0; q < w.nq; ++q) {
        const int64_t counted = config_.reduction == Reduction::kFlat ? mergers[q].merges() : 0;
        PartialNode result = mergers[q].Finish(compute);
        traces[i].merge_tiles += merge_tiles * (mergers[q].merges() - counted);
        traces[i].final_merge_tiles += merge_tiles * (mergers[q].merges() - counted);
        finish_query(w, q, std::move(result), traces[i], scores.data(), buffers);
      }
    }
  }

  for (auto& ct : traces) {
    trace.dram_bytes += ct.dram_bytes;
    for (const auto& w : ct.writes) trace.noc_bytes += static_cast<double>(w.bytes);
  }
  trace.cores_used = n_tasks;
  trace.cores = std::move(traces);
  return trace;
}

}  // namespace wc
