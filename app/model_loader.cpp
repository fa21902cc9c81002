#include "app/model_loader.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <xxhash.h>

#include "app/bench/bounds.h"
#include "app/progress.h"
#include "dist/communicator.h"
#include "kernels/cpu_kernels.h"
#include "kvcache/kv_scales.h"
#include "model/fingerprint.h"
#include "model/model_tokenizer.h"
#include "tokenizer/ids_tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/openmp_thread.h"

namespace wc {

FollowersStop::~FollowersStop() {
  try {
    if (model) model->StopFollowers();
  } catch (const std::exception&) {
    // a rank is gone: the job is ending with the error that said so
  }
}

LoadedModel LoadModel(const ModelRunOptions& o, bool need_tokenizer) {
  ApplyThreads(o.threads);
  LoadedModel m;
  m.dir = o.model_dir.empty() ? DefaultModelDir() : o.model_dir;
  CheckKVDTypeName(o.kv_dtype);  // before any file is read
  m.kv.scale = ParseScaleMode(o.kv_scale);
  if (o.kv_block_size < 0) throw Error(Cat("--kv-block-size must be >= 0, got ", o.kv_block_size));
  m.kv.block_size = o.kv_block_size;
  if (m.kv.scale == ScaleMode::kTensor &&
      (o.kv_dtype == "auto" || !HasScale(ParseKVDType(o.kv_dtype))))
    throw Error(Cat("--kv-scale tensor applies to int8 and fp8 caches, not ", o.kv_dtype));
  ModelOptions mo;
  mo.lm_head_fractures = o.lm_head_fractures;
  if (o.attention != "flash" && o.attention != "reference")
    throw Error(Cat("--attention '", o.attention, "' is not supported; choose flash or reference"));
  mo.attention = o.attention == "flash" ? AttentionImpl::kFlashDecode : AttentionImpl::kReference;
  mo.mesh = o.mesh;
  MeshPreset(o.mesh);  // validates the name before any file is read
  mo.flash.reduction = ParseReduction(o.reduction);
  mo.flash.max_cores_per_head_batch = o.max_cores_per_head;
  mo.flash.k_chunk_size = o.k_chunk_size;
  mo.matmul_precision = ParseMatmulPrecision(o.matmul_precision);
  mo.weights = WeightSpec::Parse(o.weights);
  if (o.tensor_parallel < 1)
    throw Error(Cat("--tensor-parallel must be >= 1, got ", o.tensor_parallel));
  if (o.tensor_parallel > 1) {
    Communicator& world = World();
    if (world.size() != o.tensor_parallel)
      throw Error(Cat("--tensor-parallel ", o.tensor_parallel, " runs under mpirun -np ",
                      o.tensor_parallel, ", but this run has ", world.size(),
                      world.size() == 1 ? " process" : " ranks"));
    mo.tensor_group = &world;
    m.kv.journal = true;  // rank 0's cache operations, replayed by the others
  }
  // One line redrawn while the matrices are packed, on a terminal only (rank 0's); Progress draws
  // nothing for a load under a second, so small models stay silent.
  std::unique_ptr<Progress> packing;
  if (isatty(STDERR_FILENO) != 0 && (o.tensor_parallel <= 1 || World().rank() == 0)) {
    const std::string spec = mo.weights.ToString();
    const std::string label = spec == "auto" ? "packing weights" : "packing weights " + spec;
    mo.pack_progress = [&packing, label](int64_t done, int64_t total) {
      if (!packing) packing = std::make_unique<Progress>(label, total, "bytes", true, 0.0);
      packing->Update(done);
    };
  }
  // The packing's parallel regions on a thread that ends with the load (util/openmp_thread.h).
  RunInOwnOpenMPPool([&] { m.model = DecoderModel::Load(m.dir, mo); });
  if (packing) packing->Finish();
  // int8 and int7 are the block-float matrices' modes (kernels/gemm/bfp/bfp_int8.h): without one,
  // the run would multiply as bf16 while its header said int8.
  if (IsInt8Codes(mo.matmul_precision) && !m.model->weights().holds_bfp())
    throw Error(Cat("--matmul-precision ", o.matmul_precision,
                    " multiplies block-float matrices, and this model's are ",
                    m.model->weights().packed_formats(),
                    "; add --weights bfp8 or bfp4 (or a group: mlp=bfp4)"));
  // int16 is the BF16 matrices' mode (kernels/gemm/bf16/bf16_int16.h): the same, without one.
  if (mo.matmul_precision == ActivationPrecision::kInt16 && !m.model->weights().holds_bf16())
    throw Error(Cat("--matmul-precision int16 multiplies BF16 matrices, and this model's are ",
                    m.model->weights().packed_formats(),
                    "; add --weights bf16 (or a group: mlp=bf16)"));
  if (o.tensor_parallel > 1) {  // what each rank holds, for --stats
    const int64_t mine[2] = {m.model->weights().HeldBytes(), PeakRssBytes()};
    std::vector<int64_t> all(2 * static_cast<size_t>(o.tensor_parallel));  // [ranks, 2]
    World().AllGather(mine, sizeof mine, all.data());
    for (int r = 0; r < o.tensor_parallel; ++r) {
      m.rank_weight_bytes.push_back(all[2 * r]);
      m.rank_peak_rss.push_back(all[2 * r + 1]);
    }
  }
  if (o.tensor_parallel > 1 && World().rank() == 0) {
    m.followers = std::make_unique<FollowersStop>();
    m.followers->model = m.model.get();
  }
  m.kv.dtype = ResolveKVDType(o.kv_dtype, m.model->weights().matrix_dtype());
  if (o.ctx < 0) throw Error(Cat("--ctx must be >= 0, got ", o.ctx));
  KVRowBytes(m.kv.dtype, m.kv.scale, m.model->config().head_dim());  // bfp8 needs head_dim % 16
  if (m.kv.scale == ScaleMode::kTensor) {
    m.kv.tensor_scales =
        KVScaleFile::Load(m.dir, m.model->Fingerprint(), m.model->config().n_layers)
            .Scales(QuantOf(m.kv.dtype));
  }
  m.ctx = o.ctx > 0 ? o.ctx : m.model->config().max_position_embeddings;
  if (o.ids) {
    m.tokenizer = std::make_unique<IdsTokenizer>(m.model->config().vocab_size);
    m.chat_format = ChatFormat::Unframed();
    return m;
  }
  if (need_tokenizer) {
    m.tokenizer = LoadModelTokenizer(m.dir);
    if (m.tokenizer->piece_count() > m.model->config().vocab_size)
      throw Error(Cat(m.tokenizer->path(), " has ", m.tokenizer->piece_count(),
                      " pieces but config.json's vocab_size is ", m.model->config().vocab_size,
                      "; the tokenizer does not belong to this model"));
  }
  m.chat_format = ChatFormat::ForModel(m.dir, o.chat_format);
  return m;
}

ServingOptions ServingOptionsFor(const ModelRunOptions& o, const LoadedModel& m, int user_rows,
                                 int max_batch_tokens) {
  ServingOptions so;
  so.user_rows = user_rows;
  so.max_batch_tokens = max_batch_tokens;
  so.threads = o.threads;
  so.ctx = m.ctx;
  so.kv = m.kv;
  if (o.kv_blocks < 0)
    throw Error(
        Cat("--kv-blocks must be >= 0 (0 = every user row's full context), got ", o.kv_blocks));
  if (o.kv_blocks > 0 && o.kv_block_size == 0)
    throw Error("--kv-blocks sizes the paged pool; it needs --kv-block-size > 0");
  so.kv.n_blocks = o.kv_blocks;
  if (o.prefix_cache != "on" && o.prefix_cache != "off")
    throw Error(Cat("--prefix-cache '", o.prefix_cache, "' is not supported; choose on or off"));
  so.prefix_cache = o.prefix_cache == "on";
  // At most 1 TiB: past that the figure is a typo.
  if (o.prefix_cache_dir_max_mb < 1 || o.prefix_cache_dir_max_mb > (int64_t{1} << 20))
    throw Error(
        Cat("--prefix-cache-dir-max-mb must be in [1, 1048576], got ", o.prefix_cache_dir_max_mb));
  if (!o.prefix_cache_dir.empty()) {
    if (o.tensor_parallel > 1)
      throw Error(
          "--prefix-cache-dir is not supported with --tensor-parallel (each rank holds only its "
          "KV heads of a block)");
    so.prefix_cache_dir = o.prefix_cache_dir;
    so.prefix_cache_dir_max_bytes = o.prefix_cache_dir_max_mb << 20;
    so.prefix_cache_key = PrefixCacheKey(o, m);
  }
  return so;
}

namespace {

// XXH3-64 of this process's executable (/proc/self/exe) as 16 hex digits, computed once: tells one
// build from another (files a build writes that another must not trust); "unknown" if unreadable.
std::string ExecutableDigest() {
  static const std::string digest = [] {
    try {
      const MappedFile exe("/proc/self/exe");
      char buf[17];
      std::snprintf(buf, sizeof buf, "%016llx",
                    static_cast<unsigned long long>(XXH3_64bits(exe.data(), exe.size())));
      return std::string(buf);
    } catch (const Error&) {
      return std::string("unknown");
    }
  }();
  return digest;
}

}  // namespace

std::string PrefixCacheKey(const ModelRunOptions& o, const LoadedModel& m) {
  // Everything that decides the K/V bytes a prompt's tokens give, beside the KV layout (the loop
  // adds it): the architecture that runs them (named, not only implied by the config's hash, so a
  // cache file says which graph wrote it), the weights and their in-memory form, the numerics of
  // the layers below the cache (attention's mesh and chunking feed later layers' K/V), the kernels
  // this CPU runs, and the build itself (a new build may change any kernel's rounding).
  std::string key = Cat("wormchat ", WORMCHAT_VERSION, " build ", ExecutableDigest());
  key += Cat("\narchitecture ", m.model->architecture().name);
  key += Cat("\nmodel ", ModelFingerprint(m.dir, /*with_kv_scales=*/false));
  // A GGUF file's fingerprint reads its header, tensor table and a page of each tensor; its size
  // beside it names the file in the key text every cache file keeps.
  if (const int64_t size = GgufModelSize(m.dir); size >= 0) key += Cat(" gguf ", size, " bytes");
  key += Cat("\nweights ", o.weights, " matmul ", o.matmul_precision, " attention ", o.attention,
             " mesh ", o.mesh, " reduction ", o.reduction, " cores_per_head ", o.max_cores_per_head,
             " k_chunk ", o.k_chunk_size);
  key += Cat("\nkernels ", CpuKernelsName(CpuKernels::kPortable));
  for (CpuKernels f : {CpuKernels::kAvx512Vnni, CpuKernels::kAvx512Bf16Vbmi,
                       CpuKernels::kAvx512Gemm, CpuKernels::kAmxBf16Gemm})
    key += KernelsOn(f) ? " 1" : " 0";
  return key;
}

}  // namespace wc
