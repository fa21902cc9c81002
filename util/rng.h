// The project's own RNG (xoshiro256**, seeded by splitmix64): the same seed gives the same stream
// on every machine and standard library, which std::mt19937 + std distributions do not promise.
#pragma once

#include <array>
#include <cstdint>

namespace wc {

class Rng {
 public:
  // The whole stream position: a copy taken and set back later replays the same draws (a chat's
  // /undo and /retry rewind a conversation's stream with it).
  using State = std::array<uint64_t, 4>;

  explicit Rng(uint64_t seed) {
    for (auto& s : state_) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      s = z ^ (z >> 31);
    }
  }
  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  State state() const { return {state_[0], state_[1], state_[2], state_[3]}; }
  void set_state(const State& s) {
    for (int i = 0; i < 4; ++i) state_[i] = s[i];
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

}  // namespace wc
