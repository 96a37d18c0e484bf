// Graph directories: reading with every field checked, and writing
// (Note [Graphs as data] in gnn/graph_data.h).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "trident/base/files.h"
#include "trident/base/json.h"
#include "trident/formats/file_headers.h"
#include "trident/gnn/graph_data.h"
#include "trident/gnn/rmat.h"

namespace trident::gnn {
namespace {

struct Array {
  std::string path, descr;
  std::vector<std::int64_t> shape;
  std::string bytes;  // the data, header stripped
};

Array read_array(const std::string& dir, const std::string& file) {
  Array a;
  a.path = dir + "/" + file;
  std::string text;
  try {
    text = read_text_file<GraphDataError>(a.path, "graph file (numpy.save writes one)");
    const auto h = formats::parse_npy_header(text, a.path);
    a.descr = h.descr, a.shape = h.shape;
    a.bytes = text.substr(h.data_offset, h.data_bytes);
  } catch (const formats::DataError& e) {
    throw GraphDataError(e.what());
  }
  return a;
}

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

void expect(const Array& a, const std::string& descr, std::vector<std::int64_t> shape, const std::string& what) {
  bool ok = a.descr == descr && a.shape.size() == shape.size();
  for (std::size_t i = 0; ok && i < shape.size(); ++i) ok = shape[i] < 0 || a.shape[i] == shape[i];
  if (ok) return;
  for (auto& s : shape)
    if (s < 0) s = 0;
  throw GraphDataError(a.path + ": holds " + (a.descr == "<f4" ? "float32 " : "int64 ") + shape_text(a.shape) +
                       "; it must be " + what);
}

template <class T>
std::vector<T> values(const Array& a) {
  std::vector<T> v(a.bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), a.bytes.data(), a.bytes.size());
  return v;
}

std::vector<std::uint8_t> read_mask(const std::string& dir, const std::string& name, std::int64_t nodes) {
  const auto a = read_array(dir, name + ".npy");
  expect(a, "<i8", {nodes}, "int64 [" + std::to_string(nodes) + "] of 0 or 1, one per node");
  const auto v = values<std::int64_t>(a);
  std::vector<std::uint8_t> mask(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] != 0 && v[i] != 1)
      throw GraphDataError(a.path + ": node " + std::to_string(i) + " holds " + std::to_string(v[i]) +
                           "; a mask holds 0 or 1");
    mask[i] = static_cast<std::uint8_t>(v[i]);
  }
  return mask;
}

void check_masks(const GraphData& g, const std::string& dir) {
  const std::pair<const char*, const std::vector<std::uint8_t>*> masks[] = {
      {"train_mask", &g.train}, {"val_mask", &g.val}, {"test_mask", &g.test}};
  for (int a = 0; a < 3; ++a)
    for (int b = a + 1; b < 3; ++b)
      for (std::int64_t i = 0; i < g.nodes; ++i)
        if ((*masks[a].second)[i] && (*masks[b].second)[i])
          throw GraphDataError(dir + ": " + masks[a].first + ".npy and " + masks[b].first + ".npy overlap at node " +
                               std::to_string(i) + "; a node is in at most one of train, val and test");
  if (!GraphData::count(g.train))
    throw GraphDataError(dir + "/train_mask.npy: no node is marked for training");
}

// Edges from [2, E]: checked in range, self loops dropped, duplicates
// refused, symmetry checked (or made), sorted by (target, source).
void read_edges(GraphData& g, const std::string& dir, bool symmetric) {
  const auto a = read_array(dir, "edges.npy");
  expect(a, "<i8", {2, -1}, "int64 [2, E]: row 0 the edges' sources, row 1 their targets");
  const auto v = values<std::int64_t>(a);
  const std::size_t e = v.size() / 2;
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;  // (target, source)
  pairs.reserve(e);
  for (std::size_t k = 0; k < e; ++k) {
    const auto s = v[k], t = v[e + k];
    for (auto [end, value] : {std::pair{"source", s}, std::pair{"target", t}})
      if (value < 0 || value >= g.nodes)
        throw GraphDataError(a.path + ": edge " + std::to_string(k) + " has " + end + " " + std::to_string(value) +
                             ", outside 0.." + std::to_string(g.nodes - 1) + " (features.npy has " +
                             std::to_string(g.nodes) + " nodes)");
    if (s != t) pairs.push_back({t, s});
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> sorted = pairs;
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end())
    throw GraphDataError(a.path + ": edge " + std::to_string(dup->second) + " -> " + std::to_string(dup->first) +
                         " is listed twice; list each directed edge once");
  if (symmetric) {
    for (std::size_t k = 0; k < pairs.size(); ++k) {
      const std::pair<std::int64_t, std::int64_t> reverse{pairs[k].second, pairs[k].first};
      if (!std::binary_search(sorted.begin(), sorted.end(), reverse))
        throw GraphDataError(a.path + ": edge " + std::to_string(pairs[k].second) + " -> " +
                             std::to_string(pairs[k].first) + " has no reverse edge, but the graph is declared "
                             "symmetric (graph.json \"symmetric\": true, the default); list both directions or "
                             "declare it false to add them");
    }
  } else {
    for (const auto& [t, s] : pairs) sorted.push_back({s, t});
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  }
  for (const auto& [t, s] : sorted) g.dst.push_back(t), g.src.push_back(s);
}

// numpy's .npy format 1.0: magic, version, header length, a Python dict
// padded with spaces to a multiple of 64 bytes and ended by a newline.
std::string npy(const std::string& descr, const std::vector<std::int64_t>& shape, const void* data, std::size_t bytes) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) dict += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
  dict += "), }";
  while ((10 + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01', out += '\x00';
  out += static_cast<char>(dict.size() & 0xff), out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}

}  // namespace

GraphData read_graph_dir(const std::string& dir, bool with_features) {
  if (!std::filesystem::is_directory(dir))
    throw GraphDataError("graph " + dir + ": not a directory (a graph is a directory of features.npy, labels.npy, "
                         "edges.npy, train_mask.npy, val_mask.npy, test_mask.npy, or csbm[:key=value,...])");
  GraphData g;
  g.name = std::filesystem::path(dir).filename().string();
  bool symmetric = true;
  if (std::filesystem::exists(dir + "/graph.json")) {
    const auto meta = read_json_file<GraphDataError>(dir + "/graph.json", "graph description");
    try {
      symmetric = value_checked<bool>(meta, "symmetric", true);
      g.name = value_checked<std::string>(meta, "name", g.name);
    } catch (const std::exception& e) {
      throw GraphDataError(dir + "/graph.json: " + e.what() + " (keys: symmetric true|false, name a string)");
    }
  }
  const auto features = read_array(dir, "features.npy");
  expect(features, "<f4", {-1, -1}, "float32 [nodes, features]");
  g.nodes = features.shape[0], g.features = features.shape[1];
  if (with_features) g.x = values<float>(features);
  const auto labels = read_array(dir, "labels.npy");
  expect(labels, "<i8", {g.nodes}, "int64 [" + std::to_string(g.nodes) + "], a class id per node");
  g.labels = values<std::int64_t>(labels);
  for (std::int64_t i = 0; i < g.nodes; ++i) {
    if (g.labels[i] < 0)
      throw GraphDataError(labels.path + ": node " + std::to_string(i) + " has class " + std::to_string(g.labels[i]) +
                           "; class ids are 0 or more");
    g.classes = std::max(g.classes, g.labels[i] + 1);
  }
  g.train = read_mask(dir, "train_mask", g.nodes);
  g.val = read_mask(dir, "val_mask", g.nodes);
  g.test = read_mask(dir, "test_mask", g.nodes);
  check_masks(g, dir);
  read_edges(g, dir, symmetric);
  return g;
}

void write_graph_dir(const GraphData& g, const std::string& dir) {
  write_file_atomic(dir + "/features.npy", npy("<f4", {g.nodes, g.features}, g.x.data(), g.x.size() * sizeof(float)));
  write_file_atomic(dir + "/labels.npy", npy("<i8", {g.nodes}, g.labels.data(), g.labels.size() * 8));
  std::vector<std::int64_t> edges(g.src);
  edges.insert(edges.end(), g.dst.begin(), g.dst.end());
  write_file_atomic(dir + "/edges.npy", npy("<i8", {2, g.edges()}, edges.data(), edges.size() * 8));
  for (auto [name, mask] : {std::pair{"train_mask", &g.train}, {"val_mask", &g.val}, {"test_mask", &g.test}}) {
    std::vector<std::int64_t> v(mask->begin(), mask->end());
    write_file_atomic(dir + "/" + name + ".npy", npy("<i8", {g.nodes}, v.data(), v.size() * 8));
  }
  write_file_atomic(dir + "/graph.json", nlohmann::json{{"name", g.name}, {"symmetric", true}}.dump() + "\n");
}

GraphData load_graph(const std::string& source, bool with_features) {
  if (const auto at = source.rfind("@metis="); at != std::string::npos && !std::filesystem::exists(source)) {
    const std::string k = source.substr(at + 7);
    std::size_t used = 0;
    int parts = 0;
    try {
      parts = std::stoi(k, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (k.empty() || used != k.size())
      throw GraphDataError("graph " + source + ": metis = '" + k + "': a number of parts (2 or more)");
    return reorder_by_metis(load_graph(source.substr(0, at), with_features), parts);
  }
  if (source.rfind("csbm", 0) == 0 && !std::filesystem::exists(source))
    return generate_csbm(parse_csbm(source), with_features);
  if (source.rfind("rmat", 0) == 0 && !std::filesystem::exists(source))
    return generate_rmat(parse_rmat(source), with_features);
  return read_graph_dir(source, with_features);
}

std::int64_t GraphData::count(const std::vector<std::uint8_t>& mask) {
  return std::count(mask.begin(), mask.end(), 1);
}

double GraphData::homophily() const {
  std::int64_t same = 0;
  for (std::int64_t k = 0; k < edges(); ++k) same += labels[src[k]] == labels[dst[k]];
  return edges() ? static_cast<double>(same) / static_cast<double>(edges()) : 0;
}

}  // namespace trident::gnn
