// JSON form of an OpGraph ("format": "trident-graph/1"): a list of ops, each
// with its inputs by producer name, so a file can be read and edited by hand.
#include "trident/graph/op_graph.h"
#include "trident/base/json.h"
#include "trident/graph/constants.h"

namespace trident::graph {
namespace {

using nlohmann::json;

json spec_json(const TensorSpec& s) { return {{"shape", s.shape}, {"dtype", to_string(s.dtype)}}; }

template <typename T>
T field(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw GraphError(where + ": missing field '" + key + "'");
  try {
    return get_checked<T>(j.at(key));
  } catch (const json::exception& e) {
    throw GraphError(where + ": field '" + key + "' has the wrong type (" + e.what() + ")");
  }
}

TensorSpec spec_from(const json& j, const std::string& where) {
  TensorSpec s;
  s.shape = field<std::vector<std::int64_t>>(j, "shape", where);
  check_shape(s.shape, where);
  s.dtype = dtype_from_string(field<std::string>(j, "dtype", where));
  return s;
}

}  // namespace

json OpGraph::to_json() const {
  json ops = json::array();
  for (const auto& o : ops_) {
    json inputs = json::array();
    for (const auto& in : o.inputs) {
      inputs.push_back({{"op", ops_[in.producer].name}, {"expected", spec_json(in.expected)}});
    }
    json params = json::array();
    for (const auto& p : o.params) {
      params.push_back({{"name", p.name}, {"shape", p.shape}, {"dtype", to_string(p.dtype)}});
    }
    ops.push_back({{"name", o.name},
                   {"kind", o.kind},
                   {"attrs", o.attrs},
                   {"inputs", inputs},
                   {"output", spec_json(o.output)},
                   {"params", params},
                   {"forward_flops", o.forward_flops},
                   {"backward_flops", o.backward_flops},
                   {"activation_bytes", o.activation_bytes}});
  }
  json doc = {{"format", "trident-graph/1"}, {"name", name_}, {"ops", ops}};
  if (!capture_.is_null()) doc["capture"] = capture_;
  if (!constants_.is_null()) doc["constants"] = constants_;
  return doc;
}

OpGraph OpGraph::from_json(const json& doc) {
  try {
    if (!has_format(doc, "trident-graph/1")) {
      throw GraphError("graph JSON: field 'format' must be \"trident-graph/1\"");
    }
    OpGraph g(field<std::string>(doc, "name", "graph JSON"));
    if (doc.contains("capture")) {
      const auto& c = doc.at("capture");
      if (!c.is_object() || !c.contains("format") || !c.at("format").is_string())
        throw GraphError("graph JSON: field 'capture' must be an object with a 'format' string (tools/export writes it)");
      g.set_capture(c, doc.value("constants", json::object()));
    } else if (doc.contains("constants")) {  // a zoo GNN's adjacency (Note [Graph ops] in zoo/builder.h)
      g.set_capture(nullptr, doc.at("constants"));
    }
    if (g.constants().is_object())
      for (const auto& [name, j] : g.constants().items()) decode_constant(name, j);  // checked where it enters
    for (const auto& jo : field<json>(doc, "ops", "graph JSON")) {
      Op o;
      o.name = field<std::string>(jo, "name", "graph JSON op");
      const std::string where = "graph JSON op '" + o.name + "'";
      o.kind = field<std::string>(jo, "kind", where);
      o.attrs = jo.value("attrs", json::object());
      for (const auto& ji : field<json>(jo, "inputs", where)) {
        const auto producer = field<std::string>(ji, "op", where);
        auto id = g.find(producer);
        if (!id) throw GraphError(where + ": input '" + producer + "' is not defined before it");
        o.inputs.push_back({*id, spec_from(field<json>(ji, "expected", where), where)});
      }
      o.output = spec_from(field<json>(jo, "output", where), where);
      for (const auto& jp : jo.value("params", json::array())) {
        ParamSpec p;
        p.name = field<std::string>(jp, "name", where);
        p.shape = field<std::vector<std::int64_t>>(jp, "shape", where);
        check_shape(p.shape, where + " parameter '" + p.name + "'");
        p.dtype = dtype_from_string(field<std::string>(jp, "dtype", where));
        o.params.push_back(std::move(p));
      }
      o.forward_flops = jo.value("forward_flops", 0.0);
      o.backward_flops = jo.value("backward_flops", 0.0);
      o.activation_bytes = value_checked(jo, "activation_bytes", std::int64_t{0});
      g.add(std::move(o));
    }
    g.validate();
    return g;
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong kind, e.g. a list where a number goes
    throw GraphError(std::string("graph JSON: ") + e.what());
  }
}

void OpGraph::set_capture(nlohmann::json capture, nlohmann::json constants) {
  if (!constants.is_null() && !constants.is_object())
    throw GraphError("graph JSON: field 'constants' must map names to tensors");
  capture_ = std::move(capture);
  constants_ = std::move(constants);
}

}  // namespace trident::graph
