#include "app/bench/tokenizer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/bench/bounds.h"
#include "app/model_options.h"
#include "model/model_tokenizer.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

struct BenchTokenizerOptions {
  std::string model_dir;  // default: the default model
  std::string text_path;  // the text to encode
  int repeats = 5;
  std::string json;
};

void RunBenchTokenizer(const BenchTokenizerOptions& o) {
  const std::string dir = o.model_dir.empty() ? DefaultModelDir() : o.model_dir;
  const auto tok = LoadModelTokenizer(dir);
  const std::string text = ReadTextFile(o.text_path);
  if (text.empty()) throw Error(Cat(o.text_path, ": empty; nothing to encode"));
  // The text is encoded line by line, as a corpus is (and as HF's reference script does): one
  // huge string would measure the regex engine on a pathological input instead.
  std::vector<std::string> lines;
  for (size_t p = 0; p < text.size();) {
    size_t q = text.find('\n', p);
    q = q == std::string::npos ? text.size() : q + 1;
    lines.push_back(text.substr(p, q - p));
    p = q;
  }
  std::vector<double> seconds;
  int64_t tokens = 0;
  for (int r = 0; r < o.repeats; ++r) {
    int64_t n = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (const std::string& line : lines) n += static_cast<int64_t>(tok->Encode(line).size());
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    tokens = n;
  }
  std::sort(seconds.begin(), seconds.end());
  const double best = seconds.front(), median = seconds[seconds.size() / 2];
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("tokenizer  %s\n", tok->path().c_str());
  std::printf("text       %s: %.2f MB, %zu lines, %lld tokens (%.2f bytes/token)\n",
              o.text_path.c_str(), mb, lines.size(), static_cast<long long>(tokens),
              static_cast<double>(text.size()) / static_cast<double>(std::max<int64_t>(tokens, 1)));
  std::printf(
      "encode     best %.3f s: %.2f MB/s, %.0f tokens/s (median of %d: %.2f MB/s), 1 thread\n",
      best, mb / best, static_cast<double>(tokens) / best, o.repeats, mb / median);
  if (!o.json.empty()) {
    const nlohmann::json out = {{"tokenizer", tok->path()},
                                {"text", o.text_path},
                                {"bytes", text.size()},
                                {"lines", lines.size()},
                                {"tokens", tokens},
                                {"best_s", best},
                                {"median_s", median},
                                {"mb_per_s", mb / best},
                                {"tokens_per_s", static_cast<double>(tokens) / best}};
    WriteJsonOutput(o.json, out.dump(2));
  }
}

}  // namespace

void RegisterBenchTokenizer(CLI::App* bench) {
  auto o = std::make_shared<BenchTokenizerOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "tokenizer", "Single-thread encoding speed of a model's tokenizer on a text file");
  cmd->add_option("--model", o->model_dir,
                  "Model directory holding tokenizer.model or tokenizer.json [default: the model "
                  "in assets/]")
      ->transform(ModelPathTransform());
  cmd->add_option("--text", o->text_path, "Text file to encode, line by line")->required();
  cmd->add_option("--repeats", o->repeats, "Timed runs (best is reported; 1-1000)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the figures to this JSON file");
  int threads = 0;  // accepted for uniformity; encoding is single-threaded
  cmd->add_option("--threads", threads, "Host threads (unused: encoding is single-threaded)")
      ->check(CLI::Range(0, kMaxThreads));
  cmd->callback([o] { RunBenchTokenizer(*o); });
}

}  // namespace wc
