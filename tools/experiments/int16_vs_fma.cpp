// Prefill-shaped GEMM on AVX2: f32 FMAs against 16-bit integer products (vpmaddwd) at the same
// blocking, to see whether BF16 weights could run faster than the FMA rate on AVX2 machines in an
// opt-in integer mode (issue 54). Weights: 16-bit integers, one power-of-two scale per row and 32 k
// (a bf16 weight is exact in them when its exponent is within 7 of its block's largest);
// activations: 12-bit integers (|q| <= 2047), one scale per token and 32 k, so 32 products of at
// most 32767 x 2047 sum exactly in int32. Each block's int32 sum goes into an f32 accumulator once.
// Build: g++ -O3 -mavx2 -mfma -fopenmp [-DTOKENS=4..6] [-DPIN] int16_vs_fma.cpp -o int16_vs_fma
// (TOKENS: a tile's tokens, default 5; PIN: hold the int16 sums in registers with an empty asm,
// without which GCC 12 keeps some on the stack - with clang the tile needs no pin).
// Run:   ./int16_vs_fma [tokens K N reps]   (one thread each kernel, then both threads)
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

constexpr int kRows = 8;    // rows a panel (one 32-bit lane each)
constexpr int kPanels = 2;  // panels a register tile
#ifndef TOKENS
#define TOKENS 5
#endif
constexpr int kTokens = TOKENS;  // tokens a register tile
constexpr int kBlock = 32;       // k a scale covers
constexpr int kChunk = 512;      // k a cache block covers (the weights' chunk stays in L1)

static double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---- f32 FMA: W f32 [N/8][K][8] (a panel's 8 rows for each k), X f32 [T][K], Y f32 [T][N].
static void FmaTile(const float* w0, const float* w1, const float* x, int64_t K, int k0, int k1,
                    float* y, int64_t N) {
  __m256 acc[kPanels][kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) {
    acc[0][t] = _mm256_loadu_ps(y + t * N);
    acc[1][t] = _mm256_loadu_ps(y + t * N + 8);
  }
  for (int k = k0; k < k1; ++k) {
    const __m256 a = _mm256_load_ps(w0 + 8 * k), b = _mm256_load_ps(w1 + 8 * k);
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      const __m256 xv = _mm256_broadcast_ss(x + t * K + k);
      acc[0][t] = _mm256_fmadd_ps(a, xv, acc[0][t]);
      acc[1][t] = _mm256_fmadd_ps(b, xv, acc[1][t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) {
    _mm256_storeu_ps(y + t * N, acc[0][t]);
    _mm256_storeu_ps(y + t * N + 8, acc[1][t]);
  }
}

static void FmaGemm(const float* W, const float* X, float* Y, int64_t T, int64_t K, int64_t N) {
#pragma omp parallel for schedule(static)
  for (int64_t pp = 0; pp < N / 16; ++pp)
    for (int64_t kc = 0; kc < K; kc += kChunk)
      for (int64_t t = 0; t + kTokens <= T; t += kTokens)
        FmaTile(W + (2 * pp) * K * 8, W + (2 * pp + 1) * K * 8, X + t * K, K, kc,
                std::min<int64_t>(kc + kChunk, K), Y + t * N + 16 * pp, N);
}

// ---- int16: W16 [N/8][K/2][8][2] (lane r holds rows r's k, k + 1), SW [N/8][K/32][8];
// X16 [T][K], SX [T][K/32].
static void Int16Tile(const int16_t* w0, const int16_t* w1, const float* sw0, const float* sw1,
                      const int16_t* x, const float* sx, int64_t K, int b0, int b1, float* y,
                      int64_t N) {
  const int64_t nb = K / kBlock;
  for (int b = b0; b < b1; ++b) {
    __m256i acc[kPanels][kTokens];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) acc[0][t] = acc[1][t] = _mm256_setzero_si256();
    const int16_t* a = w0 + b * kBlock * 8;
    const int16_t* c = w1 + b * kBlock * 8;
#pragma GCC unroll 1
    for (int j = 0; j < kBlock / 2; ++j) {
      const __m256i wa = _mm256_load_si256(reinterpret_cast<const __m256i*>(a + 16 * j));
      const __m256i wc = _mm256_load_si256(reinterpret_cast<const __m256i*>(c + 16 * j));
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        int32_t pair;
        std::memcpy(&pair, x + t * K + b * kBlock + 2 * j, 4);
        const __m256i xv = _mm256_set1_epi32(pair);
        acc[0][t] = _mm256_add_epi32(_mm256_madd_epi16(wa, xv), acc[0][t]);
        acc[1][t] = _mm256_add_epi32(_mm256_madd_epi16(wc, xv), acc[1][t]);
#ifdef PIN
        __asm__("" : "+x"(acc[0][t]), "+x"(acc[1][t]));
#endif
      }
    }
    const __m256 s0 = _mm256_load_ps(sw0 + 8 * b), s1 = _mm256_load_ps(sw1 + 8 * b);
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      const __m256 st = _mm256_set1_ps(sx[t * nb + b]);
      float* yt = y + t * N;
      _mm256_storeu_ps(yt, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[0][t]), _mm256_mul_ps(s0, st),
                                           _mm256_loadu_ps(yt)));
      _mm256_storeu_ps(yt + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[1][t]), _mm256_mul_ps(s1, st),
                                               _mm256_loadu_ps(yt + 8)));
    }
  }
}

static void Int16Gemm(const int16_t* W, const float* SW, const int16_t* X, const float* SX,
                      float* Y, int64_t T, int64_t K, int64_t N) {
  const int64_t nb = K / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t pp = 0; pp < N / 16; ++pp)
    for (int64_t kc = 0; kc < K; kc += kChunk)
      for (int64_t t = 0; t + kTokens <= T; t += kTokens)
        Int16Tile(W + (2 * pp) * K * 8, W + (2 * pp + 1) * K * 8, SW + (2 * pp) * nb * 8,
                  SW + (2 * pp + 1) * nb * 8, X + t * K, SX + t * nb, K, kc / kBlock,
                  std::min<int64_t>(kc + kChunk, K) / kBlock, Y + t * N + 16 * pp, N);
}

static float RoundBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

int main(int argc, char** argv) {
  const int64_t T = argc > 1 ? atoll(argv[1]) : 510;  // a multiple of kTokens
  const int64_t K = argc > 2 ? atoll(argv[2]) : 4544;
  const int64_t N = argc > 3 ? atoll(argv[3]) : 4544;
  const int reps = argc > 4 ? atoi(argv[4]) : 3;
  if (T % kTokens || K % kChunk % kBlock || K % kBlock || N % 16) {
    std::fprintf(stderr, "T %% %d, K %% 32, N %% 16 must be 0\n", kTokens);
    return 2;
  }
  const int64_t nb = K / kBlock;
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> w(N * K), x(T * K);  // bf16-valued weights, activations
  for (auto& v : w) v = RoundBf16(0.02f * g(rng));
  for (auto& v : x) v = g(rng) * (1 + 3 * (rng() % 16 == 0));
  // Packed f32 weights.
  float* Wf = static_cast<float*>(aligned_alloc(64, N * K * 4));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) Wf[(n / 8) * K * 8 + k * 8 + n % 8] = w[n * K + k];
  // Packed int16 weights: per row and block, 2^e with the block's largest |w| < 32768 2^e.
  int16_t* W16 = static_cast<int16_t*>(aligned_alloc(64, N * K * 2));
  float* SW = static_cast<float*>(aligned_alloc(64, N * nb * 4));
  int64_t inexact = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < nb; ++b) {
      float m = 0;
      for (int k = 0; k < kBlock; ++k) m = std::max(m, std::fabs(w[n * K + b * kBlock + k]));
      int e;
      std::frexp(m, &e);  // m < 2^e
      const float scale = std::ldexp(1.f, e - 15);
      SW[(n / 8) * nb * 8 + b * 8 + n % 8] = scale;
      for (int k = 0; k < kBlock; ++k) {
        const float v = w[n * K + b * kBlock + k] / scale;
        const float q = std::nearbyint(v);
        inexact += q != v;
        const int64_t kk = b * kBlock + k;
        W16[(n / 8) * K * 8 + (kk / 2) * 16 + (n % 8) * 2 + kk % 2] = static_cast<int16_t>(q);
      }
    }
  std::vector<int16_t> X16(T * K);
  std::vector<float> SX(T * nb);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      float m = 0;
      for (int k = 0; k < kBlock; ++k) m = std::max(m, std::fabs(x[t * K + b * kBlock + k]));
      const float d = m / 2047;
      SX[t * nb + b] = d;
      for (int k = 0; k < kBlock; ++k)
        X16[t * K + b * kBlock + k] =
            static_cast<int16_t>(d > 0 ? std::nearbyint(x[t * K + b * kBlock + k] / d) : 0);
    }
  std::vector<float> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = RoundBf16(x[i]);
  std::vector<float> y1(T * N), y2(T * N);
  // Errors against double sums of the unrounded activations, over 64 outputs.
  double err_fma = 0, err_int = 0, ref_norm = 0;
  FmaGemm(Wf, xb.data(), y1.data(), T, K, N);
  Int16Gemm(W16, SW, X16.data(), SX.data(), y2.data(), T, K, N);
  for (int i = 0; i < 64; ++i) {
    const int64_t t = (i * 37) % T, n = (i * 101) % N;
    double r = 0;
    for (int64_t k = 0; k < K; ++k) r += double(w[n * K + k]) * x[t * K + k];
    err_fma += std::fabs(y1[t * N + n] - r);
    err_int += std::fabs(y2[t * N + n] - r);
    ref_norm += std::fabs(r);
  }
  std::printf("T %ld K %ld N %ld; weights inexact in int16: %.4f%%\n", long(T), long(K), long(N),
              100.0 * inexact / double(N * K));
  std::printf("mean |error| / mean |y|: bf16 activations + f32 FMA %.2e, int16 x 12-bit %.2e\n",
              err_fma / ref_norm, err_int / ref_norm);
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    double best_f = 1e9, best_i = 1e9;
    for (int r = 0; r < reps; ++r) {
      std::fill(y1.begin(), y1.end(), 0.f);
      double t0 = Now();
      FmaGemm(Wf, xb.data(), y1.data(), T, K, N);
      best_f = std::min(best_f, Now() - t0);
      std::fill(y2.begin(), y2.end(), 0.f);
      t0 = Now();
      Int16Gemm(W16, SW, X16.data(), SX.data(), y2.data(), T, K, N);
      best_i = std::min(best_i, Now() - t0);
    }
    const double macs = double(T) * K * N;
    std::printf("%d thread(s): f32 FMA %.1f GFLOP/s, int16 %.1f GOP/s: %.2fx\n", threads,
                2 * macs / best_f / 1e9, 2 * macs / best_i / 1e9, best_f / best_i);
  }
}
