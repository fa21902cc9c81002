// The rows of a mesh-bench CSV (the committed tables under meshmodel/plots/, the command's output)
// as header -> cell maps, for the meshmodel tests and the mesh-bench command's.
#pragma once

#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace wc::test {

// The cells of one line: comma-separated, a cell in double quotes may hold commas ("" is a quote);
// a trailing comma is one empty last cell.
inline std::vector<std::string> CsvCells(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      cells.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  return cells;
}

// The rows after the header line.
inline std::vector<std::map<std::string, std::string>> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = CsvCells(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = CsvCells(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < f.size(); ++i) row[header[i]] = f[i];
    rows.push_back(row);
  }
  return rows;
}

}  // namespace wc::test
