// `wormchat calibrate`: per-layer K and V amax over a text, saved beside the model as
// kv_scales.json for `--kv-scale tensor` (TensorRT-LLM's per-tensor INT8/FP8 KV scales).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "app/commands/commands.h"
#include "app/model_loader.h"
#include "app/model_options.h"
#include "app/progress.h"
#include "kvcache/kv_scales.h"
#include "serving/perplexity.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace wc {
namespace {

struct CalibrateCmdOptions {
  ModelRunOptions run;
  std::string text_file;
  std::string out;  // --out (default: MODEL/kv_scales.json)
  bool force = false;
};

// Before the (long) measurement: the destination must be new (or --force) and writable.
void CheckDestination(const std::string& path, bool force) {
  if (DirExists(path)) throw Error(Cat(path, ": is a directory; --out names the scales file"));
  if (FileExists(path) && !force)
    throw Error(Cat(path, " exists; pass --force to overwrite it, or choose another --out"));
  const std::string probe = path + ".tmp";
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (f == nullptr) throw Error(Cat(path, ": cannot write: ", std::strerror(errno)));
  std::fclose(f);
  std::remove(probe.c_str());
}

void RunCalibrate(const CalibrateCmdOptions& o) {
  const std::string model_dir = o.run.model_dir.empty() ? DefaultModelDir() : o.run.model_dir;
  const std::string out = o.out.empty() ? JoinPath(model_dir, "kv_scales.json") : o.out;
  CheckDestination(out, o.force);
  const std::string text = ReadTextFile(o.text_file);
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw Error(Cat(o.text_file, ": is empty; give calibration text"));
  ModelRunOptions run = o.run;
  run.kv_dtype = "f32";  // measure the values as the model produces them
  run.kv_scale = "token-head";
  LoadedModel m = LoadModel(run, /*need_tokenizer=*/true);
  const ModelConfig& c = m.model->config();
  const std::vector<int> ids =
      EncodePrompt(*m.tokenizer, m.chat_format, text, /*raw=*/true, c.bos_token_id);
  KVCache cache(m.model->CacheShape(1, m.ctx), m.kv);
  Progress progress("calibrate", static_cast<int64_t>(ids.size()) - 1, "tokens");
  const PerplexityResult r = TeacherForcedPerplexity(
      *m.model, ids, cache, [&progress](int64_t done, int64_t) { progress.Update(done); });
  progress.Finish();
  KVScaleFile f;
  f.fingerprint = m.model->Fingerprint();
  f.n_layers = c.n_layers;
  f.calibration_tokens = r.tokens + 1;
  for (int l = 0; l < c.n_layers; ++l) {
    f.k_amax.push_back(cache.amax(l, 0));
    f.v_amax.push_back(cache.amax(l, 1));
  }
  f.SaveFile(out);
  const auto [kmin, kmax] = std::minmax_element(f.k_amax.begin(), f.k_amax.end());
  const auto [vmin, vmax] = std::minmax_element(f.v_amax.begin(), f.v_amax.end());
  std::printf("%s: %lld tokens, %d layers, K amax %.3g..%.3g, V amax %.3g..%.3g\n", out.c_str(),
              static_cast<long long>(f.calibration_tokens), c.n_layers, *kmin, *kmax, *vmin, *vmax);
}

}  // namespace

void RegisterCalibrate(CLI::App& app) {
  auto o = std::make_shared<CalibrateCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Record per-layer K/V amax over a text into kv_scales.json (--kv-scale tensor)");
  AddModelRunOptions(cmd, o->run);
  cmd->add_option("--text", o->text_file, "Calibration text file")->required();
  cmd->add_option("--out", o->out,
                  "Scales file to write [default: MODEL/kv_scales.json, where --kv-scale tensor "
                  "reads it]");
  cmd->add_flag("--force", o->force, "Overwrite an existing scales file");
  cmd->callback([o] { RunCalibrate(*o); });
}

}  // namespace wc
