// `wormchat serve`'s /metrics: counters and histograms the HTTP side keeps, with the serving loop's
// status, in Prometheus's text format (version 0.0.4):
//   wormchat_requests_total{status="200"}         counter, every answered request by HTTP status
//   wormchat_tokens_total{kind="prompt"|"generated"|"cached"}
//                                                 counter: prompt tokens fed, tokens sampled,
//                                                 prompt tokens taken from the prefix cache
//   wormchat_choices_total{end="eos"|"stop"|"length"|"context"|"cancelled"|"error"}
//                                                 counter: how each choice ended (StopReasonName)
//   wormchat_rows_busy, wormchat_queue_length, wormchat_kv_blocks_used, wormchat_kv_blocks_total
//                                                 gauges, from ServingLoop::status()
//   wormchat_time_to_first_token_seconds          histogram: request received -> first token
//   wormchat_time_per_token_seconds               histogram: a choice's decode time / its tokens
//                                                 after the first
// Thread safe: the HTTP threads and the loop's thread record, any thread renders.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "serving/serving_loop.h"

namespace wc {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // upper bounds, increasing; +Inf is added
  void Observe(double v);
  // The series NAME_bucket{le=...}, NAME_sum, NAME_count.
  std::string Render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // [bounds + 1], not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  void Answered(int status);
  void Finished(const RequestResult& r);  // a choice ended: tokens and time per token
  void FirstToken(double seconds_since_received);
  std::string Render(const ServingStatus& s) const;

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> by_status_;
  std::map<std::string, uint64_t> by_end_;
  std::atomic<uint64_t> prompt_{0}, generated_{0}, cached_{0};
  Histogram ttft_, tpot_;
};

}  // namespace wc
