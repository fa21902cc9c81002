#include "app/serve/server_metrics.h"

#include <cstdio>

#include "util/error.h"

namespace wc {

namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

std::string Histogram::Render(const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = Cat("# HELP ", name, " ", help, "\n# TYPE ", name, " histogram\n");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? Number(bounds_[i]) : "+Inf";
    out += Cat(name, "_bucket{le=\"", le, "\"} ", cumulative, "\n");
  }
  out += Cat(name, "_sum ", Number(sum_), "\n", name, "_count ", count_, "\n");
  return out;
}

ServerMetrics::ServerMetrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}) {}

void ServerMetrics::Answered(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++by_status_[status];
}

void ServerMetrics::Finished(const RequestResult& r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++by_end_[StopReasonName(r.reason)];
  }
  prompt_ += static_cast<uint64_t>(r.prompt_tokens);
  cached_ += static_cast<uint64_t>(r.cached_tokens);
  generated_ += r.tokens.size();
  if (r.tokens.size() > 1 && r.t_first_token > 0 && r.t_finish > r.t_first_token)
    tpot_.Observe((r.t_finish - r.t_first_token) / static_cast<double>(r.tokens.size() - 1));
}

void ServerMetrics::FirstToken(double seconds) {
  ttft_.Observe(seconds);
}

namespace {

// A labelled counter's series: "# HELP", "# TYPE", then NAME{LABEL="key"} n for each key.
template <typename Key>
std::string Counter(const char* name, const char* help, const char* label,
                    const std::map<Key, uint64_t>& counts) {
  std::string out = Cat("# HELP ", name, " ", help, "\n# TYPE ", name, " counter\n");
  for (const auto& [key, n] : counts) out += Cat(name, "{", label, "=\"", key, "\"} ", n, "\n");
  return out;
}

}  // namespace

std::string ServerMetrics::Render(const ServingStatus& s) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out += Counter("wormchat_requests_total", "HTTP requests answered, by status.", "status",
                   by_status_);
    out += Counter("wormchat_choices_total", "Choices (loop requests) ended, by how they ended.",
                   "end", by_end_);
  }
  out +=
      Cat("# HELP wormchat_tokens_total Tokens: prompt tokens fed, tokens generated, prompt tokens "
          "taken from the prefix cache.\n# TYPE wormchat_tokens_total counter\n",
          "wormchat_tokens_total{kind=\"prompt\"} ", prompt_.load(), "\n",
          "wormchat_tokens_total{kind=\"generated\"} ", generated_.load(), "\n",
          "wormchat_tokens_total{kind=\"cached\"} ", cached_.load(), "\n");
  out += Cat("# HELP wormchat_rows_busy User rows running a request.\n",
             "# TYPE wormchat_rows_busy gauge\nwormchat_rows_busy ", s.active_rows, "\n",
             "# HELP wormchat_queue_length Requests waiting for a user row.\n",
             "# TYPE wormchat_queue_length gauge\nwormchat_queue_length ", s.queued, "\n",
             "# HELP wormchat_kv_blocks_used Paged KV blocks held by requests and sessions.\n",
             "# TYPE wormchat_kv_blocks_used gauge\nwormchat_kv_blocks_used ", s.kv_blocks_used,
             "\n", "# HELP wormchat_kv_blocks_total Paged KV blocks in the pool.\n",
             "# TYPE wormchat_kv_blocks_total gauge\nwormchat_kv_blocks_total ", s.kv_blocks_total,
             "\n");
  out += ttft_.Render("wormchat_time_to_first_token_seconds",
                      "From the request's arrival to its first sampled token.");
  out += tpot_.Render("wormchat_time_per_token_seconds",
                      "A choice's decode time per token after its first.");
  return out;
}

}  // namespace wc
