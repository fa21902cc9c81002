// AMX TDPBF16PS vs AVX-512 VDPBF16PS pair chain: bit-exactness experiment + rough throughput.
// Build: g++ -O2 -mamx-tile -mamx-bf16 -mavx512bf16 -mavx512f -mavx512bw -mfma amx_vs_dp.cpp
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static inline float bf2f(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline float daz(float x) {  // bf16 input denormal -> signed zero
  uint32_t u = fbits(x);
  if ((u & 0x7f800000u) == 0) return bitsf(u & 0x80000000u);
  return x;
}
static inline float ftz(float x) {  // flush subnormal result to signed zero
  uint32_t u = fbits(x);
  if ((u & 0x7f800000u) == 0) return bitsf(u & 0x80000000u);
  return x;
}

struct TileCfg {
  uint8_t palette_id, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

static void amx_init() {
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) {
    perror("arch_prctl");
    exit(1);
  }
  TileCfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

// A: [16][K] bf16 row-major. Bv: VNNI [K/2][16][2] bf16 (Bv[kp][n][j] = B[2kp+j][n]).
// C: [16][16] f32.
static void gemm_amx(const uint16_t* A, const uint16_t* Bv, int K, float* C) {
  _tile_zero(0);
  for (int k0 = 0; k0 < K; k0 += 32) {
    _tile_loadd(1, A + k0, K * 2);
    _tile_loadd(2, Bv + (k0 / 2) * 32, 64);
    _tile_dpbf16ps(0, 1, 2);
  }
  _tile_stored(0, C, 64);
}

static void gemm_vdp(const uint16_t* A, const uint16_t* Bv, int K, float* C) {
  for (int m = 0; m < 16; ++m) {
    __m512 acc = _mm512_setzero_ps();
    for (int kp = 0; kp < K / 2; ++kp) {
      uint32_t pair;
      memcpy(&pair, A + m * K + 2 * kp, 4);
      __m512i a = _mm512_set1_epi32(pair);
      __m512i b = _mm512_loadu_si512(Bv + kp * 32);
      acc = _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
    }
    _mm512_storeu_ps(C + m * 16, acc);
  }
}

// AMX order on plain AVX-512 BF16: per 32-k block, an even-k chain and an odd-k chain, each
// 8 vdpbf16ps whose bf16 pair slot holds (elem0 = k + 2 of the chain, elem1 = k) so that
// vdpbf16ps's "odd element first" does two consecutive steps of one chain; then c += (e + o)
// with vaddps under MXCSR FTZ. Same vdpbf16ps count as the pair chain (+2 vaddps / 32 k).
static void gemm_vdp_amxorder(const uint16_t* A, const uint16_t* B /*[K][16]*/, int K, float* C) {
  for (int m = 0; m < 16; ++m) {
    __m512 c = _mm512_setzero_ps();
    for (int k0 = 0; k0 < K; k0 += 32) {
      __m512 e = _mm512_setzero_ps(), o = _mm512_setzero_ps();
      for (int j = 0; j < 8; ++j) {
        for (int par = 0; par < 2; ++par) {
          const int k = k0 + 4 * j + par;  // chain steps k, k + 2
          const uint32_t ap = uint32_t(A[m * K + k + 2]) | (uint32_t(A[m * K + k]) << 16);
          alignas(64) uint32_t bp[16];  // (a real kernel packs this once, like Bv)
          for (int n = 0; n < 16; ++n)
            bp[n] = uint32_t(B[(k + 2) * 16 + n]) | (uint32_t(B[k * 16 + n]) << 16);
          const __m512i av = _mm512_set1_epi32(ap), bv = _mm512_load_si512(bp);
          if (par == 0)
            e = _mm512_dpbf16_ps(e, (__m512bh)av, (__m512bh)bv);
          else
            o = _mm512_dpbf16_ps(o, (__m512bh)av, (__m512bh)bv);
        }
      }
      c = _mm512_add_ps(c, _mm512_add_ps(e, o));  // FTZ/DAZ from MXCSR
    }
    _mm512_storeu_ps(C + m * 16, c);
  }
}

// ---- scalar emulations (MXCSR DAZ+FTZ set; fma via -mfma hardware) ----
enum Emu {
  kChainOddEven,       // vdpbf16ps chain: acc += a1 b1; acc += a0 b0 (two roundings/pair)
  kChainEvenOdd,       // intrinsics-guide reading: acc += a0 b0; acc += a1 b1
  kSdmTwoLanes,        // SDM: per instr, even/odd lane accumulators from 0 (FMA), then
                       //      t = even + odd, C = C + t
  kSdmTwoLanesCfirst,  // variant: C + (even) + (odd)
  kExact32Then,        // per instr: exact sum of 32 products, one rounding, then C + that
  kExact33,            // per instr: exact C + 32 products, one rounding
  kPairExactChain,     // per pair: acc = round(acc + a0b0 + a1b1) (one rounding per pair)
  kSdmLanesReversed,   // control: SDM lanes but k pairs in reverse order inside the instruction
  kSdmNoFtzLanes,      // control: SDM without flushing the lane accumulators
  kNumEmu
};
static const char* kEmuName[kNumEmu] = {"chain odd-then-even (vdpbf16ps)",
                                        "chain even-then-odd (intrinsics guide)",
                                        "SDM: 2 lane accs, t=e+o, C+=t",
                                        "SDM variant: C=(C+e)+o",
                                        "per-instr exact sum32, round, C+=",
                                        "per-instr exact C+sum32, 1 rounding",
                                        "per-pair exact a0b0+a1b1+acc, 1 rounding",
                                        "control: SDM lanes, k reversed in instr",
                                        "control: SDM, no FTZ on lane accs"};

// Exact sum of a few doubles via long double is not exact in general; products of bf16 are
// exact in float (16-bit significands). Sum exactly with a 2048-bit fixed-point accumulator.
struct ExactAcc {
  // bit position 0 = 2^-400; products >= 2^-300 (after DAZ bf16 min normal 2^-126, product 2^-252)
  static constexpr int kLimbs = 40;  // 2560 bits
  int64_t limb[kLimbs];              // each limb holds 32 bits value + carry room
  ExactAcc() { memset(limb, 0, sizeof limb); }
  void add(double x) {  // x must be exact: a float or a product of two bf16 (in double)
    if (x == 0) return;
    int e;
    double m = frexp(x, &e);             // x = m 2^e, 0.5<=|m|<1
    int64_t mi = (int64_t)ldexp(m, 53);  // 53-bit integer significand
    int pos = e - 53 + 400;              // bit position of mi's lsb
    int li = pos / 32, sh = pos % 32;
    __int128 v = (__int128)mi << sh;
    for (int i = 0; i < 3; ++i) {
      limb[li + i] += (int64_t)(v & 0xffffffff);
      v >>= 32;  // arithmetic shift (floor)
    }
    limb[li + 3] += (int64_t)v;
  }
  float round_to_float() const {
    // normalize into carries
    int64_t l[kLimbs];
    memcpy(l, limb, sizeof l);
    for (int i = 0; i < kLimbs - 1; ++i) {
      int64_t c = l[i] >> 32;
      l[i] -= c << 32;
      l[i + 1] += c;
    }
    bool neg = l[kLimbs - 1] < 0;
    if (neg) {  // negate
      for (int i = 0; i < kLimbs; ++i) l[i] = -l[i];
      for (int i = 0; i < kLimbs - 1; ++i) {
        int64_t c = l[i] >> 32;
        l[i] -= c << 32;
        l[i + 1] += c;
      }
    }
    int top = -1;
    for (int i = kLimbs - 1; i >= 0; --i)
      if (l[i]) {
        top = i;
        break;
      }
    if (top < 0) return 0.0f;
    // collect bits: find msb
    int msb = 63 - __builtin_clzll((uint64_t)l[top]) + top * 32;
    // get 24 bits starting at msb, plus round/sticky
    auto bit = [&](int p) -> int { return p < 0 ? 0 : (int)((l[p / 32] >> (p % 32)) & 1); };
    uint64_t sig = 0;
    for (int p = msb; p > msb - 24; --p) sig = (sig << 1) | bit(p);
    int rbit = bit(msb - 24);
    bool sticky = false;
    for (int p = msb - 25; p >= 0 && !sticky; --p) sticky = bit(p);
    if (rbit && (sticky || (sig & 1))) sig++;
    int e = msb - 23 - 400;
    if (sig == (1u << 24)) {
      sig >>= 1;
      e++;
    }
    double r = ldexp((double)sig, e);  // exact in double; float conversion exact if in range
    float f = (float)r;                // may overflow to inf / be subnormal (then FTZ)
    // (subnormal results would be double-rounded here, but they are flushed anyway)
    return ftz(neg ? -f : f);
  }
};

static void gemm_emu(Emu emu, const uint16_t* A, const uint16_t* Bv, int K, float* C) {
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float c = 0.0f;
      for (int k0 = 0; k0 < K; k0 += 32) {
        float e = 0.0f, o = 0.0f;
        ExactAcc ex;
        if (emu == kExact33) ex.add(c);
        for (int kq = 0; kq < 16; ++kq) {
          const int kp = k0 / 2 + (emu == kSdmLanesReversed ? 15 - kq : kq);
          float a0 = daz(bf2f(A[m * K + 2 * kp])), a1 = daz(bf2f(A[m * K + 2 * kp + 1]));
          float b0 = daz(bf2f(Bv[kp * 32 + 2 * n])), b1 = daz(bf2f(Bv[kp * 32 + 2 * n + 1]));
          switch (emu) {
            case kChainOddEven:
              c = ftz(std::fma(a1, b1, c));
              c = ftz(std::fma(a0, b0, c));
              break;
            case kChainEvenOdd:
              c = ftz(std::fma(a0, b0, c));
              c = ftz(std::fma(a1, b1, c));
              break;
            case kSdmTwoLanes:
            case kSdmTwoLanesCfirst:
            case kSdmLanesReversed:
              e = ftz(std::fma(a0, b0, e));
              o = ftz(std::fma(a1, b1, o));
              break;
            case kExact32Then:
            case kExact33:
              ex.add((double)a0 * b0);  // exact product, no FTZ of products
              ex.add((double)a1 * b1);
              break;
            case kSdmNoFtzLanes: {
              const unsigned csr = _mm_getcsr();
              _mm_setcsr(csr & ~0x8040u);  // lanes keep subnormals (inputs already DAZ'd)
              e = std::fma(a0, b0, e);
              o = std::fma(a1, b1, o);
              _mm_setcsr(csr);
              break;
            }
            case kPairExactChain: {
              ExactAcc p;
              p.add(c);
              p.add((double)a0 * b0);
              p.add((double)a1 * b1);
              c = p.round_to_float();
              break;
            }
            default:
              break;
          }
        }
        if (emu == kSdmTwoLanes || emu == kSdmLanesReversed) c = ftz(c + ftz(e + o));
        if (emu == kSdmNoFtzLanes) {
          const unsigned csr = _mm_getcsr();
          _mm_setcsr(csr & ~0x8040u);
          const float t = e + o;
          _mm_setcsr(csr);
          c = ftz(c + ftz(t));
        }
        if (emu == kSdmTwoLanesCfirst) c = ftz(ftz(c + e) + o);
        if (emu == kExact32Then) c = ftz(c + ex.round_to_float());
        if (emu == kExact33) c = ex.round_to_float();
      }
      C[m * 16 + n] = c;
    }
}

// ---- random data ----
static std::mt19937_64 rng(12345);
static uint16_t f2bf(float f) {  // RNE, keep as bf16 bits
  uint32_t u = fbits(f);
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}
static uint16_t rand_bf(int emin, int emax, double p_tiny) {
  std::uniform_int_distribution<int> de(emin, emax);
  uint16_t sign = (rng() & 1) << 15;
  uint16_t mant = rng() & 0x7f;
  std::uniform_real_distribution<double> u(0, 1);
  if (u(rng) < p_tiny) {  // denormal or zero bf16
    return sign | (uint16_t)(rng() & 0x7f);
  }
  int e = de(rng) + 127;
  if (e < 1) e = 1;
  if (e > 254) e = 254;
  return sign | (uint16_t)(e << 7) | mant;
}

enum Dist { kGauss, kWide, kCancel, kTiny, kHuge, kNumDist };
static const char* kDistName[kNumDist] = {"gauss", "wide exp [-40,40]", "cancellation",
                                          "tiny (near 2^-126, denormals)", "near overflow"};

static void fill(Dist d, int K, std::vector<uint16_t>& A, std::vector<uint16_t>& B /*[K][16]*/) {
  std::normal_distribution<float> g(0, 1);
  for (int i = 0; i < 16 * K; ++i) {
    switch (d) {
      case kGauss:
        A[i] = f2bf(g(rng));
        B[i] = f2bf(g(rng));
        break;
      case kWide:
        A[i] = rand_bf(-40, 40, 0.0);
        B[i] = rand_bf(-40, 40, 0.0);
        break;
      case kCancel:
        A[i] = rand_bf(-12, 12, 0.0);
        B[i] = rand_bf(-12, 12, 0.0);
        break;
      case kTiny:
        A[i] = rand_bf(-126, -100, 0.1);
        B[i] = rand_bf(-30, 5, 0.05);
        break;
      case kHuge:
        A[i] = rand_bf(40, 63, 0.0);
        B[i] = rand_bf(40, 63, 0.0);
        break;
      default:
        break;
    }
  }
  if (d == kCancel) {
    // make many pairs / neighbouring pairs cancel exactly or nearly: A[m][2kp+1] = -A[m][2kp],
    // B[2kp+1][n] = B[2kp][n] (+ tiny perturbation sometimes), and big-small-big patterns.
    for (int m = 0; m < 16; ++m)
      for (int k = 0; k + 1 < K; k += 2) {
        uint64_t r = rng() % 4;
        if (r == 0) A[m * K + k + 1] = A[m * K + k] ^ 0x8000;
        if (r == 1) A[m * K + k + 1] = (A[m * K + k] ^ 0x8000) + 1;
      }
    for (int k = 0; k + 1 < K; k += 2)
      for (int n = 0; n < 16; ++n)
        if (rng() % 2) B[(k + 1) * 16 + n] = B[k * 16 + n];
    for (int m = 0; m < 16; ++m)  // occasional huge terms that later cancel
      for (int k = 0; k + 33 < K; k += 64) {
        if (rng() % 3 == 0) {
          A[m * K + k] = rand_bf(20, 24, 0);
          A[m * K + k + 33] = A[m * K + k] ^ 0x8000;
        }
      }
    for (int k = 0; k + 33 < K; k += 64)
      for (int n = 0; n < 16; ++n) B[(k + 33) * 16 + n] = B[k * 16 + n];
  }
}

static void to_vnni(const std::vector<uint16_t>& B, int K, std::vector<uint16_t>& Bv) {
  for (int kp = 0; kp < K / 2; ++kp)
    for (int n = 0; n < 16; ++n)
      for (int j = 0; j < 2; ++j) Bv[kp * 32 + n * 2 + j] = B[(2 * kp + j) * 16 + n];
}

static bool same(float x, float y) {
  return fbits(x) == fbits(y) || (x != x && y != y);
}

static void bench();

int main(int argc, char** argv) {
  amx_init();
  _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ | DAZ for scalar emulation
  int trials = argc > 1 ? atoi(argv[1]) : 20;
  if (trials == 0) {
    bench();
    bench();
    _tile_release();
    return 0;
  }
  const int Ks[] = {32, 64, 96, 128, 512, 1024, 4096};
  // counts[dist][0 = amx vs vdp, 1+e = amx vs emu e], plus vdp vs chain emu sanity
  for (int d = 0; d < kNumDist; ++d) {
    long total = 0, amx_vs_vdp = 0, vdp_vs_emu = 0, amx_vs_vdpamx = 0, amx_vs_emu[kNumEmu] = {0};
    long ulp_hist[4] = {0};  // amx vs vdp: 1 ulp, 2-15, >=16 ulp, sign/zero/inf-class diffs
    for (int K : Ks) {
      int tr = K >= 1024 ? std::max(1, trials / 8) : trials;
      for (int t = 0; t < tr; ++t) {
        std::vector<uint16_t> A(16 * K), B(16 * K), Bv(16 * K);
        fill((Dist)d, K, A, B);
        to_vnni(B, K, Bv);
        float Ca[256], Cv[256], Ce[kNumEmu][256];
        gemm_amx(A.data(), Bv.data(), K, Ca);
        gemm_vdp(A.data(), Bv.data(), K, Cv);
        float Cx[256];
        gemm_vdp_amxorder(A.data(), B.data(), K, Cx);
        for (int e = 0; e < kNumEmu; ++e) gemm_emu((Emu)e, A.data(), Bv.data(), K, Ce[e]);
        for (int i = 0; i < 256; ++i) {
          ++total;
          if (!same(Ca[i], Cv[i])) {
            ++amx_vs_vdp;
            int32_t a = (int32_t)fbits(Ca[i]), v = (int32_t)fbits(Cv[i]);
            if ((a ^ v) < 0 || std::isinf(Ca[i]) || std::isinf(Cv[i]))
              ulp_hist[3]++;
            else {
              long du = labs((long)a - v);
              ulp_hist[du == 1 ? 0 : du < 16 ? 1 : 2]++;
            }
          }
          if (!same(Cv[i], Ce[kChainOddEven][i])) ++vdp_vs_emu;
          if (!same(Ca[i], Cx[i])) ++amx_vs_vdpamx;
          for (int e = 0; e < kNumEmu; ++e)
            if (!same(Ca[i], Ce[e][i])) ++amx_vs_emu[e];
        }
      }
    }
    printf(
        "dist %-32s outputs %7ld | amx!=vdp %6ld (1ulp %ld, 2-15ulp %ld, >=16ulp %ld, sign/inf %ld)"
        " | vdp!=chain-emu %ld\n",
        kDistName[d], total, amx_vs_vdp, ulp_hist[0], ulp_hist[1], ulp_hist[2], ulp_hist[3],
        vdp_vs_emu);
    for (int e = 0; e < kNumEmu; ++e) printf("    amx != %-45s %7ld\n", kEmuName[e], amx_vs_emu[e]);
    printf("    amx != %-45s %7ld\n", "vdpbf16ps in AMX order (repacked pairs)", amx_vs_vdpamx);
    fflush(stdout);
  }
  if (argc > 2) bench();
  _tile_release();
  return 0;
}

// ---- rough throughput: C[16 x 64] = A[16 x 1024] B[1024 x 64], in cache, 1 thread ----
static void bench() {
  const int M = 16, K = 1024, N = 64;
  std::vector<uint16_t> A(M * K), Bv(K * N);  // Bv: 4 panels of [K/2][16][2]
  for (auto& x : A) x = f2bf((float)(rng() % 100) / 50.0f - 1.0f);
  for (auto& x : Bv) x = f2bf((float)(rng() % 100) / 50.0f - 1.0f);
  alignas(64) float C[M * N];
  const double flops = 2.0 * M * N * K;
  auto now = [] { return std::chrono::steady_clock::now(); };
  int reps = 20000;
  // AMX: 4 accumulators tmm0..3, A in tmm4, B in tmm5..
  auto t0 = now();
  for (int r = 0; r < reps; ++r) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int k0 = 0; k0 < K; k0 += 32) {
      _tile_loadd(4, A.data() + k0, K * 2);
      _tile_loadd(5, Bv.data() + 0 * K * 16 + k0 * 16, 64);
      _tile_dpbf16ps(0, 4, 5);
      _tile_loadd(6, Bv.data() + 1 * K * 16 + k0 * 16, 64);
      _tile_dpbf16ps(1, 4, 6);
      _tile_loadd(7, Bv.data() + 2 * K * 16 + k0 * 16, 64);
      _tile_dpbf16ps(2, 4, 7);
      _tile_loadd(5, Bv.data() + 3 * K * 16 + k0 * 16, 64);
      _tile_dpbf16ps(3, 4, 5);
    }
    _tile_stored(0, C + 0, N * 4);
    _tile_stored(1, C + 16, N * 4);
    _tile_stored(2, C + 32, N * 4);
    _tile_stored(3, C + 48, N * 4);
  }
  double ta = std::chrono::duration<double>(now() - t0).count();
  float chk_a = C[5];
  // vdpbf16ps: 4 rows x 4 vectors (16 accumulators) blocks
  reps = 2000;
  t0 = now();
  for (int r = 0; r < reps; ++r) {
    for (int m0 = 0; m0 < M; m0 += 4) {
      __m512 acc[4][4];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
      for (int kp = 0; kp < K / 2; ++kp) {
        __m512i b[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) b[j] = _mm512_loadu_si512(Bv.data() + j * K * 16 + kp * 32);
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          uint32_t pr;
          memcpy(&pr, A.data() + (m0 + i) * K + 2 * kp, 4);
          __m512i a = _mm512_set1_epi32(pr);
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j)
            acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)a, (__m512bh)b[j]);
        }
      }
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) _mm512_storeu_ps(C + (m0 + i) * N + j * 16, acc[i][j]);
    }
  }
  double tv = std::chrono::duration<double>(now() - t0).count();
  // vdpbf16ps in AMX order: 4 rows x 2 vectors, even/odd chains + running c (24 zmm).
  // Timing only: the (pre-repacked) layout has the same size, so the buffers are reused as is.
  t0 = now();
  for (int r = 0; r < reps; ++r) {
    for (int m0 = 0; m0 < M; m0 += 4)
      for (int n0 = 0; n0 < 4; n0 += 2) {
        __m512 c[4][2], e[4][2], o[4][2];
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i)
#pragma GCC unroll 2
          for (int j = 0; j < 2; ++j) c[i][j] = _mm512_setzero_ps();
        for (int k0 = 0; k0 < K; k0 += 32) {
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i)
#pragma GCC unroll 2
            for (int j = 0; j < 2; ++j) e[i][j] = o[i][j] = _mm512_setzero_ps();
          for (int q = 0; q < 16; q += 2) {
            const int kp = k0 / 2 + q;
#pragma GCC unroll 2
            for (int par = 0; par < 2; ++par) {
              __m512i b[2];
#pragma GCC unroll 2
              for (int j = 0; j < 2; ++j)
                b[j] = _mm512_loadu_si512(Bv.data() + (n0 + j) * K * 16 + (kp + par) * 32);
#pragma GCC unroll 4
              for (int i = 0; i < 4; ++i) {
                uint32_t pr;
                memcpy(&pr, A.data() + (m0 + i) * K + 2 * (kp + par), 4);
                __m512i a = _mm512_set1_epi32(pr);
#pragma GCC unroll 2
                for (int j = 0; j < 2; ++j) {
                  if (par == 0)
                    e[i][j] = _mm512_dpbf16_ps(e[i][j], (__m512bh)a, (__m512bh)b[j]);
                  else
                    o[i][j] = _mm512_dpbf16_ps(o[i][j], (__m512bh)a, (__m512bh)b[j]);
                }
              }
            }
          }
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i)
#pragma GCC unroll 2
            for (int j = 0; j < 2; ++j)
              c[i][j] = _mm512_add_ps(c[i][j], _mm512_add_ps(e[i][j], o[i][j]));
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i)
#pragma GCC unroll 2
          for (int j = 0; j < 2; ++j) _mm512_storeu_ps(C + (m0 + i) * N + (n0 + j) * 16, c[i][j]);
      }
  }
  double tx = std::chrono::duration<double>(now() - t0).count();
  printf("      vdpbf16ps in AMX order (even/odd chains, 4x2 tile): %.1f GFLOP/s\n",
         flops * 2000 / tx * 1e-9);
  printf("bench 16x1024x64: AMX %.1f GFLOP/s, vdpbf16ps %.1f GFLOP/s (check %g %g)\n",
         flops * 20000 / ta * 1e-9, flops * 2000 / tv * 1e-9, chk_a, C[5]);
}
