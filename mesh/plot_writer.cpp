#include "mesh/plot_writer.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "util/error.h"

extern char** environ;

namespace wc {

std::string GnuplotQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}
namespace {

// One line of a panel: (x, y) points in x order.
struct Series {
  std::string title;
  int color = 1;  // gnuplot line color index
  bool dashed = false;
  std::vector<std::pair<double, double>> points;
};

struct Panel {
  std::string title, xlabel, ylabel;
  bool log_x = false;
  std::vector<Series> series;
};

// Figures 3 and 4: two rows of panels (TFLOP/s, GB/s), one column per head_dim.
void AddFig34Panels(const std::vector<MeshBenchRow>& rows, std::vector<std::vector<Panel>>& grid) {
  const int dims[] = {64, 128, 256};
  const int bszs[] = {8, 16, 32};
  for (int metric = 0; metric < 2; ++metric) {
    std::vector<Panel> line;
    for (int hd : dims) {
      Panel p;
      p.title = Cat(metric == 0 ? "Fig 3: TFLOP/s" : "Fig 4: DRAM GB/s", ", head_dim ", hd,
                    ", 8 q / 1 KV head, n150");
      p.xlabel = "kv_len (k tokens)";
      p.ylabel = metric == 0 ? "TFLOP/s" : "GB/s (K+V bytes / time)";
      p.log_x = true;
      for (bool baseline : {false, true}) {
        for (int b = 0; b < 3; ++b) {
          Series s;
          s.title = Cat("bsz ", bszs[b], baseline ? " baseline" : " FlashDecode");
          s.color = b + 1;
          s.dashed = baseline;
          for (const auto& r : rows) {
            const MeshBenchConfig& c = r.config;
            if (c.experiment.rfind("seed-fig3-4", 0) != 0 || c.baseline != baseline ||
                c.head_dim != hd || c.bsz != bszs[b])
              continue;
            s.points.push_back({c.kv_len / 1024.0, metric == 0 ? r.tflops : r.dram_gbps});
          }
          if (!s.points.empty()) p.series.push_back(std::move(s));
        }
      }
      line.push_back(std::move(p));
    }
    grid.push_back(std::move(line));
  }
}

// Figure 5: one panel per mesh, latency against kv_len, one line per max_cores_per_head.
void AddFig5Panels(const std::vector<MeshBenchRow>& rows, std::vector<std::vector<Panel>>& grid) {
  std::vector<Panel> line;
  for (const char* mesh : {"n150", "n300", "n300x2", "t3k"}) {
    Panel p;
    int chips = 1;
    for (const auto& r : rows)
      if (r.config.mesh == mesh) chips = r.chips;
    p.title = Cat("Fig 5: ", mesh, " (", 32 / chips, " q / ", 8 / chips,
                  " KV heads per chip), bsz 1, head_dim 128");
    p.xlabel = "kv_len (k tokens)";
    p.ylabel = "op time (us)";
    const int cores[] = {8, 16, 32, 64};
    for (Reduction red : {Reduction::kFlat, Reduction::kTree}) {
      for (int k = 0; k < 4; ++k) {
        Series s;
        s.title = Cat("max ", cores[k], " cores/head, ", ReductionName(red));
        s.color = k + 1;
        s.dashed = red == Reduction::kTree;
        for (const auto& r : rows) {
          const MeshBenchConfig& c = r.config;
          if (c.experiment.rfind("seed-fig5", 0) != 0 || c.mesh != mesh || c.reduction != red ||
              c.max_cores_per_head != cores[k])
            continue;
          s.points.push_back({c.kv_len / 1024.0, r.emulated_us});
        }
        if (!s.points.empty()) p.series.push_back(std::move(s));
      }
    }
    if (!p.series.empty()) line.push_back(std::move(p));
  }
  if (!line.empty()) grid.push_back(std::move(line));
}

std::string Script(const std::vector<std::vector<Panel>>& grid, const std::string& png) {
  size_t cols = 1;
  for (const auto& line : grid) cols = std::max(cols, line.size());
  const size_t n_rows = grid.size();
  std::ostringstream g;
  // Data blocks first (gnuplot 5), then one multiplot with a panel per grid cell.
  for (size_t r = 0; r < n_rows; ++r) {
    for (size_t c = 0; c < grid[r].size(); ++c) {
      for (size_t s = 0; s < grid[r][c].series.size(); ++s) {
        g << "$d" << r << "_" << c << "_" << s << " << EOD\n";
        for (const auto& [x, y] : grid[r][c].series[s].points) g << x << " " << y << "\n";
        g << "EOD\n";
      }
    }
  }
  g << "set terminal pngcairo size " << 480 * cols << "," << 380 * n_rows << " font ',8'\n";
  g << "set termoption noenhanced\n";
  g << "set output " << GnuplotQuote(png) << "\n";
  g << "set multiplot\n";
  g << "set key top left font ',7' samplen 2 spacing 0.9\n";
  g << "set grid\n";
  for (size_t r = 0; r < n_rows; ++r) {
    for (size_t c = 0; c < grid[r].size(); ++c) {
      const Panel& p = grid[r][c];
      g << "set origin " << static_cast<double>(c) / cols << ","
        << 1.0 - static_cast<double>(r + 1) / n_rows << "\n";
      g << "set size " << 1.0 / cols << "," << 1.0 / n_rows << "\n";
      g << "set title " << GnuplotQuote(p.title) << "\n";
      g << "set xlabel " << GnuplotQuote(p.xlabel) << "\n";
      g << "set ylabel " << GnuplotQuote(p.ylabel) << "\n";
      g << "set yrange [0:*]\n";
      if (p.log_x) {
        g << "set logscale x 2\nset xtics 2\n";
      } else {
        g << "unset logscale x\nset xtics auto\n";
      }
      g << "plot ";
      for (size_t s = 0; s < p.series.size(); ++s) {
        const Series& se = p.series[s];
        g << (s ? ", " : "") << "$d" << r << "_" << c << "_" << s
          << " using 1:2 with linespoints pt 7 ps 0.4 lw 1.5 lc " << se.color << " dt "
          << (se.dashed ? 2 : 1) << " title " << GnuplotQuote(se.title);
      }
      g << "\n";
    }
  }
  g << "unset multiplot\n";
  return g.str();
}

// The gnuplot executable on PATH, or "" if there is none.
std::string FindGnuplot() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string exe = dir + "/gnuplot";
    if (access(exe.c_str(), X_OK) == 0) return exe;
  }
  return "";
}

std::string FirstLine(const std::string& text) {
  const size_t end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

}  // namespace

void PlotMeshBench(const std::vector<MeshBenchRow>& rows, const std::string& png_path) {
  if (png_path.size() < 4 || png_path.compare(png_path.size() - 4, 4, ".png") != 0)
    throw Error(Cat("--plot ", png_path, ": the file name must end in .png"));
  std::vector<std::vector<Panel>> grid;
  bool fig34 = false, fig5 = false;
  for (const auto& r : rows) {
    fig34 |= r.config.experiment.rfind("seed-fig3-4", 0) == 0;
    fig5 |= r.config.experiment.rfind("seed-fig5", 0) == 0;
  }
  if (fig34) AddFig34Panels(rows, grid);
  if (fig5) AddFig5Panels(rows, grid);
  if (grid.empty()) throw Error(Cat("--plot ", png_path, ": no rows of a plotted experiment"));

  RunGnuplot(Script(grid, png_path), png_path);
}

void RunGnuplot(const std::string& script_text, const std::string& png_path) {
  const std::string gnuplot = FindGnuplot();
  if (gnuplot.empty())
    throw Error(
        "--plot needs gnuplot, which is not installed; install Debian's gnuplot-nox "
        "(bash tools/install-deps.sh) or leave out --plot");

  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/wormchat-plot-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr)
    throw Error(Cat("--plot: cannot create a temporary directory under ", dir));
  const std::string script = dir + "/plot.gp", log = dir + "/gnuplot.log";
  std::filesystem::remove(png_path);  // so a stale file is never taken for a new plot
  {
    std::ofstream out(script);
    out << script_text;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<std::string> args = {gnuplot, script};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawn_err = posix_spawn(&pid, gnuplot.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  if (spawn_err == 0) waitpid(pid, &status, 0);
  std::string output;
  {
    std::ifstream in(log);
    std::ostringstream ss;
    ss << in.rdbuf();
    output = ss.str();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (spawn_err != 0) throw Error(Cat("--plot: cannot run ", gnuplot, " (errno ", spawn_err, ")"));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(Cat("--plot ", png_path, ": gnuplot failed: ", FirstLine(output)));
  struct stat st;
  if (stat(png_path.c_str(), &st) != 0 || st.st_size == 0)
    throw Error(Cat("--plot ", png_path, ": gnuplot wrote no image: ", FirstLine(output)));
}

}  // namespace wc
