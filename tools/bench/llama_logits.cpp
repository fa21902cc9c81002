// llama.cpp's logits of every position of a prompt of token ids, as a float32 .npy [n, vocab]:
// the reference issue 52's logits targets compare `wormchat logits --ids` against (same file,
// f32 KV, no flash attention). Built by tools/bench/gguf_logits.sh against the llama.cpp
// anchor's libllama (tools/bench/llama-cpp.sh); never part of wormchat's build.
//
//   llama_logits MODEL.gguf OUT.npy THREADS ID [ID ...]
//
// With GREEDY=N in the environment it then decodes N tokens greedily (argmax, one at a time, the
// lowest id on a tie) and prints one line per token to stdout: the id, then the gap between the
// best and the second-best logit divided by max |logit| of that step (how near a tie it was).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: llama_logits MODEL.gguf OUT.npy THREADS ID [ID ...]\n");
    return 2;
  }
  std::vector<llama_token> ids;
  for (int i = 4; i < argc; ++i) ids.push_back(std::atoi(argv[i]));
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) {
    std::fprintf(stderr, "llama_logits: cannot load %s\n", argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  const char* greedy = std::getenv("GREEDY");
  const int n_greedy = greedy ? std::atoi(greedy) : 0;
  cp.n_ctx = static_cast<uint32_t>(ids.size() + n_greedy + 8);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(ids.size());
  cp.n_threads = cp.n_threads_batch = std::atoi(argv[3]);
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  llama_batch batch = llama_batch_init(static_cast<int32_t>(ids.size()), 0, 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = static_cast<int32_t>(ids.size());
  if (llama_decode(ctx, batch) != 0) {
    std::fprintf(stderr, "llama_logits: llama_decode failed\n");
    return 1;
  }
  FILE* f = std::fopen(argv[2], "wb");
  if (f == nullptr) return 1;
  // .npy v1.0: magic, version, header length, a dict padded with spaces to 64 bytes, '\n'.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(ids.size()) + ", " + std::to_string(n_vocab) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  const unsigned char pre[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  std::fwrite(pre, 1, 8, f);
  const uint16_t len = static_cast<uint16_t>(header.size());
  std::fwrite(&len, 2, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  for (size_t i = 0; i < ids.size(); ++i)
    std::fwrite(llama_get_logits_ith(ctx, static_cast<int32_t>(i)), 4, n_vocab, f);
  std::fclose(f);
  // Greedy continuation: the last position's logits pick the next token, fed back one at a time.
  const float* logits = llama_get_logits_ith(ctx, static_cast<int32_t>(ids.size() - 1));
  llama_batch one = llama_batch_init(1, 0, 1);
  for (int i = 0; i < n_greedy; ++i) {
    int best = 0;
    float amax = 0;
    for (int v = 0; v < n_vocab; ++v) {
      if (logits[v] > logits[best]) best = v;
      amax = std::max(amax, std::fabs(logits[v]));
    }
    float second = -INFINITY;
    for (int v = 0; v < n_vocab; ++v)
      if (v != best) second = std::max(second, logits[v]);
    std::printf("%d %.3e\n", best, (logits[best] - second) / amax);
    one.token[0] = best;
    one.pos[0] = static_cast<llama_pos>(ids.size() + i);
    one.n_seq_id[0] = 1;
    one.seq_id[0][0] = 0;
    one.logits[0] = 1;
    one.n_tokens = 1;
    if (llama_decode(ctx, one) != 0) {
      std::fprintf(stderr, "llama_logits: llama_decode failed at greedy token %d\n", i);
      return 1;
    }
    logits = llama_get_logits_ith(ctx, 0);
  }
  llama_batch_free(one);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
