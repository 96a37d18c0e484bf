// `trident graph`: a model's operator graph, in one summary line, one line
// per op (--ops) or one line per submodule (--by-module DEPTH, the coarse
// view of a captured model whose ops are ATen calls); --out writes its JSON.
#include "commands.h"

#include <algorithm>
#include <iomanip>
#include <iostream>

#include "trident/base/files.h"
#include "trident/base/text.h"

namespace trident::cli {
namespace {

// The module an op belongs to, cut to `depth` dotted parts: an ATen op's
// recorded submodule path (see Note [ATen capture]), else its name's prefix.
std::string module_of(const graph::Op& op, int depth) {
  std::string path = op.kind == "aten" ? op.attrs.value("module", std::string())
                                       : op.name.substr(0, std::min(op.name.size(), op.name.rfind('.')));
  if (op.is_input() || graph::OpGraph::loss_kinds().count(op.kind)) path = "";
  std::size_t end = 0;
  for (int d = 0; d < depth && end != std::string::npos; ++d) end = path.find('.', end ? end + 1 : 0);
  if (end != std::string::npos) path = path.substr(0, end);
  return path.empty() ? "(top level)" : path;
}

// The kind an op shows: an ATen op names the operator of its result.
std::string shown_kind(const graph::Op& op) {
  if (op.kind != "aten") return op.kind;
  const auto& calls = op.attrs.value("calls", nlohmann::json::array());
  const auto& result = op.attrs.value("result", nlohmann::json::object());
  const auto call = result.value("call", static_cast<int>(calls.size()) - 1);
  if (call < 0 || call >= static_cast<int>(calls.size())) return op.kind;
  return calls[call].value("op", op.kind) + (calls.size() > 1 ? " +" + std::to_string(calls.size() - 1) : "");
}

void show_modules(const graph::OpGraph& g, int depth) {
  struct Row { int ops = 0; std::int64_t params = 0; double fwd = 0; };
  std::vector<std::pair<std::string, Row>> rows;  // in the order modules first appear
  for (const auto& op : g.ops()) {
    const auto name = module_of(op, depth);
    auto it = std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.first == name; });
    if (it == rows.end()) it = rows.insert(rows.end(), {name, Row{}});
    it->second.ops += 1, it->second.params += op.param_bytes(), it->second.fwd += op.forward_flops;
  }
  std::cout << std::left << std::setw(40) << "module" << std::right << std::setw(6) << "ops" << std::setw(12)
            << "params" << std::setw(14) << "fwd MFLOP" << "\n";
  for (const auto& [name, r] : rows)
    std::cout << std::left << std::setw(40) << name << std::right << std::setw(6) << r.ops << std::setw(12)
              << human_bytes(static_cast<double>(r.params)) << std::setw(14) << std::fixed << std::setprecision(3)
              << r.fwd / 1e6 << "\n";
}

struct GraphArgs {
  zoo::ModelSpec model;
  std::string out;
  bool all_ops = false;
  int by_module = 0;
};

}  // namespace

int show_graph(zoo::ModelSpec model, const std::string& out, bool all_ops, int by_module) {
  auto g = model_graph(model);
  double fwd = 0, bwd = 0;
  std::int64_t act = 0;
  for (const auto& op : g.ops()) fwd += op.forward_flops, bwd += op.backward_flops, act += op.activation_bytes;
  std::cout << "model " << (model.file.empty() ? model.name + "/" + model.preset : model.file) << ": " << g.size() << " ops, parameters "
            << human_bytes(static_cast<double>(g.param_bytes())) << ", per sample: forward "
            << fwd / 1e6 << " MFLOP, backward " << bwd / 1e6 << " MFLOP, activations "
            << human_bytes(static_cast<double>(act)) << "\n";
  if (by_module > 0) show_modules(g, by_module);
  if (all_ops) {
    std::cout << std::left << std::setw(34) << "op" << std::setw(28) << "kind" << std::setw(22) << "output"
              << std::right << std::setw(12) << "params" << std::setw(14) << "fwd MFLOP" << "\n";
    for (const auto& op : g.ops()) {
      std::cout << std::left << std::setw(34) << op.name << std::setw(28) << shown_kind(op) << std::setw(22)
                << graph::to_string(op.output) << std::right << std::setw(12)
                << human_bytes(static_cast<double>(op.param_bytes())) << std::setw(14) << std::fixed
                << std::setprecision(3) << op.forward_flops / 1e6 << "\n";
    }
  }
  if (!out.empty()) {
    write_file_atomic(out, g.to_json().dump(1) + "\n");
    std::cout << "wrote " << out << "\n";
  }
  return 0;
}

Command add_graph_command(CLI::App& app) {
  auto a = std::make_shared<GraphArgs>();
  auto* c = app.add_subcommand("graph", "summarise a model's operator graph; --out writes it as JSON");
  cli::add_model_options(c, a->model);
  c->add_option("--out", a->out, "write the graph JSON here");
  c->add_flag("--ops", a->all_ops, "print one line per op");
  c->add_option("--by-module", a->by_module,
                "print one line per submodule, cut to DEPTH dotted parts (a coarse view of a captured model)")
      ->check(CLI::PositiveNumber);
  return {c, [a] { return show_graph(a->model, a->out, a->all_ops, a->by_module); }};
}

}  // namespace trident::cli
