// The contextual stochastic block model (Note [Graphs as data] in
// gnn/graph_data.h): a seeded graph whose labels a GNN can learn better than
// an MLP, with no download. Its random numbers are trident's own
// (splitmix64, Box-Muller), so a seed gives the same graph on every machine
// and standard library.
#include <algorithm>
#include <functional>
#include <cmath>
#include <map>
#include <set>

#include "trident/base/text.h"
#include "trident/gnn/graph_data.h"
#include "trident/gnn/rmat.h"

namespace trident::gnn {
namespace {

class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(uniform() * static_cast<double>(n)); }
  double normal() {
    const double u = 1.0 - uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2 * M_PI * v);
  }
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<std::size_t>(below(static_cast<std::int64_t>(i)))]);
  }

 private:
  std::uint64_t state_;
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out(1);
  for (char c : text) {
    if (c == sep) out.emplace_back();
    else out.back() += c;
  }
  return out;
}

[[noreturn]] void bad(const std::string& key, const std::string& value, const std::string& allowed) {
  throw GraphDataError("graph csbm: " + key + " = " + value + ": " + allowed);
}

void check(const CsbmOptions& o) {
  constexpr std::int64_t kMost = std::int64_t{1} << 24;
  if (o.classes < 2 || o.classes > kMost) bad("classes", std::to_string(o.classes), "2 to 2^24");
  if (o.features < 1 || o.features > (1 << 16)) bad("features", std::to_string(o.features), "1 to 65536");
  if (o.train_per_class < 1 || o.train_per_class > kMost)
    bad("train_per_class", std::to_string(o.train_per_class), "1 to 2^24");
  if (o.nodes < o.classes * (o.train_per_class + 2) || o.nodes > kMost)
    bad("nodes", std::to_string(o.nodes), "at least classes x (train_per_class + 2) = " +
                                              std::to_string(o.classes * (o.train_per_class + 2)) + " and at most 2^24");
  if (o.nodes * o.features > (std::int64_t{1} << 28))
    bad("features", std::to_string(o.features), "nodes x features at most 2^28");
  if (!(o.degree > 0) || o.degree > static_cast<double>(o.nodes) / (2 * o.classes) ||
      static_cast<double>(o.nodes) * o.degree > static_cast<double>(std::int64_t{1} << 28))
    bad("degree", format_number("%g", o.degree), "above 0, at most nodes / (2 x classes), and nodes x degree at most 2^28");
  if (!(o.homophily >= 0 && o.homophily <= 1)) bad("homophily", format_number("%g", o.homophily), "between 0 and 1");
  if (!(o.signal >= 0 && o.signal < 1e6)) bad("signal", format_number("%g", o.signal), "0 or more, below 10^6");
  if (o.val < 0 || o.test < 0 || o.val > o.nodes || o.test > o.nodes ||
      o.classes * o.train_per_class + o.val + o.test > o.nodes)
    bad("val", std::to_string(o.val) + " (test " + std::to_string(o.test) + ")",
        "0 or more, with train + val + test at most the nodes");
}

// Both directions of every (smaller, larger) edge, sorted by (target, source).
void add_both_directions(GraphData& g, const std::set<std::pair<std::int64_t, std::int64_t>>& edges) {
  std::vector<std::pair<std::int64_t, std::int64_t>> directed;  // (target, source)
  for (const auto& [a, b] : edges) directed.push_back({a, b}), directed.push_back({b, a});
  std::sort(directed.begin(), directed.end());
  for (const auto& [t, s] : directed) g.dst.push_back(t), g.src.push_back(s);
}

void make_edges(GraphData& g, const CsbmOptions& o, Random& rnd) {
  std::vector<std::vector<std::int64_t>> members(static_cast<std::size_t>(o.classes));
  for (std::int64_t i = 0; i < g.nodes; ++i) members[static_cast<std::size_t>(g.labels[i])].push_back(i);
  const auto wanted = static_cast<std::size_t>(std::llround(static_cast<double>(g.nodes) * o.degree / 2));
  std::set<std::pair<std::int64_t, std::int64_t>> edges;  // (smaller, larger)
  for (std::size_t tries = 0; edges.size() < wanted && tries < 50 * wanted; ++tries) {
    const std::int64_t u = rnd.below(g.nodes);
    std::int64_t v;
    if (rnd.uniform() < o.homophily) {
      const auto& same = members[static_cast<std::size_t>(g.labels[u])];
      v = same[static_cast<std::size_t>(rnd.below(static_cast<std::int64_t>(same.size())))];
    } else {
      do v = rnd.below(g.nodes);
      while (g.labels[v] == g.labels[u]);
    }
    if (u != v) edges.insert({std::min(u, v), std::max(u, v)});
  }
  add_both_directions(g, edges);
}

// See gnn/rmat.h: Graph500's quadrant probabilities, level by level.
void make_rmat_edges(GraphData& g, const CsbmOptions& o, Random& rnd) {
  int scale = 0;
  while ((std::int64_t{1} << scale) < g.nodes) ++scale;
  const auto wanted = static_cast<std::size_t>(std::llround(static_cast<double>(g.nodes) * o.degree / 2));
  std::set<std::pair<std::int64_t, std::int64_t>> edges;  // (smaller, larger)
  for (std::size_t tries = 0; edges.size() < wanted && tries < 50 * wanted; ++tries) {
    std::int64_t u = 0, v = 0;
    for (int level = 0; level < scale; ++level) {
      const double r = rnd.uniform();  // a 0.57, b 0.19 (right), c 0.19 (down), d 0.05 (both)
      u = 2 * u + (r >= 0.76), v = 2 * v + ((r >= 0.57 && r < 0.76) || r >= 0.95);
    }
    if (u < g.nodes && v < g.nodes && u != v) edges.insert({std::min(u, v), std::max(u, v)});
  }
  add_both_directions(g, edges);
}

void make_masks(GraphData& g, const CsbmOptions& o, Random& rnd) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(g.nodes));
  for (std::int64_t i = 0; i < g.nodes; ++i) order[static_cast<std::size_t>(i)] = i;
  rnd.shuffle(order);
  g.train.assign(order.size(), 0), g.val.assign(order.size(), 0), g.test.assign(order.size(), 0);
  std::vector<std::int64_t> taken(static_cast<std::size_t>(o.classes), 0), rest;
  for (auto i : order) {
    auto& t = taken[static_cast<std::size_t>(g.labels[i])];
    if (t < o.train_per_class) g.train[static_cast<std::size_t>(i)] = 1, ++t;
    else rest.push_back(i);
  }
  const auto left = static_cast<std::int64_t>(rest.size());
  const std::int64_t val = o.val ? o.val : left / 3, test = o.test ? o.test : left - val;
  for (std::int64_t k = 0; k < left; ++k) {
    if (k < val) g.val[static_cast<std::size_t>(rest[static_cast<std::size_t>(k)])] = 1;
    else if (k < val + test) g.test[static_cast<std::size_t>(rest[static_cast<std::size_t>(k)])] = 1;
  }
}

}  // namespace

CsbmOptions parse_csbm(const std::string& source) {
  CsbmOptions o;
  if (source == "csbm") return o;
  if (source.rfind("csbm:", 0) != 0)
    throw GraphDataError("graph " + source + ": not csbm[:key=value,...]");
  const std::map<std::string, std::function<void(const std::string&)>> keys = {
      {"nodes", [&](const std::string& v) { o.nodes = std::stoll(v); }},
      {"classes", [&](const std::string& v) { o.classes = std::stoll(v); }},
      {"features", [&](const std::string& v) { o.features = std::stoll(v); }},
      {"degree", [&](const std::string& v) { o.degree = std::stod(v); }},
      {"homophily", [&](const std::string& v) { o.homophily = std::stod(v); }},
      {"signal", [&](const std::string& v) { o.signal = std::stod(v); }},
      {"seed", [&](const std::string& v) { o.seed = std::stoll(v); }},
      {"train_per_class", [&](const std::string& v) { o.train_per_class = std::stoll(v); }},
      {"val", [&](const std::string& v) { o.val = std::stoll(v); }},
      {"test", [&](const std::string& v) { o.test = std::stoll(v); }},
      {"ordered", [&](const std::string& v) { o.ordered = std::stoll(v) != 0; }}};
  std::string names;
  for (const auto& [k, f] : keys) names += (names.empty() ? "" : ", ") + k;
  for (const auto& item : split(source.substr(5), ',')) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    const auto it = keys.find(key);
    if (it == keys.end()) bad(key, value, "not a key of csbm; the keys are " + names);
    std::size_t used = 0;
    try {
      (void)std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (value.empty() || used != value.size()) bad(key, "'" + value + "'", "must be a number");
    try {
      it->second(value);
    } catch (const std::exception&) {  // std::stoll's out_of_range, or a fraction where a count goes
      bad(key, "'" + value + "'", "out of range");
    }
  }
  check(o);
  return o;
}

namespace {

// The block model's labels, class means, masks and features around the
// edges `rmat` chooses (the block model's, or R-MAT's).
GraphData generate(const CsbmOptions& o, bool with_features, bool rmat) {
  check(o);
  Random rnd(static_cast<std::uint64_t>(o.seed));
  GraphData g;
  g.name = rmat ? "rmat" : "csbm";
  g.nodes = o.nodes, g.features = o.features, g.classes = o.classes;
  g.labels.resize(static_cast<std::size_t>(o.nodes));
  for (std::int64_t i = 0; i < o.nodes; ++i) g.labels[static_cast<std::size_t>(i)] = i % o.classes;
  rnd.shuffle(g.labels);
  if (o.ordered || rmat) std::sort(g.labels.begin(), g.labels.end());  // communities in node order
  // Class means first and features last, so a run without features draws
  // the same graph and masks.
  std::vector<double> means(static_cast<std::size_t>(o.classes * o.features));
  for (auto& m : means) m = rnd.normal();
  if (rmat) make_rmat_edges(g, o, rnd);
  else make_edges(g, o, rnd);
  make_masks(g, o, rnd);
  if (with_features) {
    Random noise(static_cast<std::uint64_t>(o.seed) ^ 0x5eed5eed5eedull);
    g.x.resize(static_cast<std::size_t>(o.nodes * o.features));
    for (std::int64_t i = 0; i < o.nodes; ++i)
      for (std::int64_t f = 0; f < o.features; ++f)
        g.x[static_cast<std::size_t>(i * o.features + f)] = static_cast<float>(
            o.signal * means[static_cast<std::size_t>(g.labels[static_cast<std::size_t>(i)] * o.features + f)] +
            noise.normal());
  }
  return g;
}

}  // namespace

GraphData generate_csbm(const CsbmOptions& o, bool with_features) { return generate(o, with_features, false); }

GraphData generate_rmat(const CsbmOptions& o, bool with_features) { return generate(o, with_features, true); }

CsbmOptions parse_rmat(const std::string& source) {
  if (source != "rmat" && source.rfind("rmat:", 0) != 0) throw GraphDataError("graph " + source + ": not rmat[:key=value,...]");
  try {
    return parse_csbm("csbm" + source.substr(4));
  } catch (const GraphDataError& e) {
    std::string m = e.what();
    if (const auto at = m.find("graph csbm:"); at != std::string::npos) m.replace(at, 11, "graph rmat:");
    throw GraphDataError(m);
  }
}

}  // namespace trident::gnn
