// Captured ATen programs are parsed into typed values where a graph enters
// (Note [ATen programs]): a good program reads back as written, and every
// malformed one is a GraphError naming the op, the call and the argument.
#include "trident/graph/aten_program.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "trident/test_paths.h"

namespace trident::graph {
namespace {

using nlohmann::json;
using Kind = AtenArg::Kind;

// The regressor of tools/export/examples, captured (the model fuzzer's seed).
json captured() {
  std::ifstream in(std::string(TRIDENT_SOURCE_DIR) + "/fuzz/corpus/model/regressor-aten.json");
  return json::parse(in);
}

json& op_named(json& doc, const std::string& name) {
  for (auto& op : doc["ops"])
    if (op["name"] == name) return op;
  throw std::runtime_error("no op " + name);
}

// The message of reading `doc` after `edit` of op addmm's attrs; "" if it reads.
std::string refused(const std::function<void(json& attrs)>& edit) {
  auto doc = captured();
  edit(op_named(doc, "addmm")["attrs"]);
  try {
    OpGraph::from_json(doc);
    return "";
  } catch (const GraphError& e) {
    return e.what();
  }
}

TEST(AtenProgram, ACapturedProgramReadsBackTyped) {
  const auto g = OpGraph::from_json(captured());
  const auto p = parse_aten_program(g, g.op(*g.find("addmm")));
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].op, "aten::t");
  ASSERT_EQ(p.calls[0].args.size(), 1u);
  EXPECT_EQ(p.calls[0].args[0].kind, Kind::kParam);
  EXPECT_EQ(p.calls[0].args[0].text, "inp.weight");
  EXPECT_EQ(p.calls[1].args[1].kind, Kind::kInput);
  EXPECT_EQ(p.calls[1].args[2].kind, Kind::kCall);
  EXPECT_EQ(p.calls[1].args[2].index, 0);
  EXPECT_EQ(p.result.kind, Kind::kCall);
  EXPECT_EQ(p.result.index, 1);
}

TEST(AtenProgram, ValuesAndNamedConstantsAreTyped) {
  auto doc = captured();
  op_named(doc, "addmm")["attrs"]["calls"][1]["kwargs"] = {
      {"beta", 2}, {"alpha", 0.5}, {"out_dtype", {{"dtype", "bfloat16"}}}, {"lo", {{"float", "-inf"}}},
      {"dims", json::array({1, {{"batch", 2}, {"plus", -1}}})}, {"flag", true}, {"mode", "x"}};
  const auto g = OpGraph::from_json(doc);
  const auto kw = parse_aten_program(g, g.op(*g.find("addmm"))).calls[1].kwargs;
  EXPECT_EQ(kw.at("beta").kind, Kind::kInt);
  EXPECT_EQ(kw.at("beta").integer, 2);
  EXPECT_EQ(kw.at("alpha").kind, Kind::kFloat);
  EXPECT_EQ(kw.at("out_dtype").kind, Kind::kDtype);
  EXPECT_EQ(kw.at("out_dtype").text, "bfloat16");
  EXPECT_EQ(kw.at("lo").real, -std::numeric_limits<double>::infinity());
  ASSERT_EQ(kw.at("dims").items.size(), 2u);
  EXPECT_EQ(kw.at("dims").items[1].kind, Kind::kBatch);
  EXPECT_EQ(kw.at("dims").items[1].integer, 2);
  EXPECT_EQ(kw.at("dims").items[1].plus, -1);
  EXPECT_TRUE(kw.at("flag").boolean);
  EXPECT_EQ(kw.at("mode").kind, Kind::kString);
}

TEST(AtenProgram, MalformedProgramsAreRefusedNamingTheOpCallAndArgument) {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* needle;
  };
  const Case cases[] = {
      {"a float JSON cannot write, but not inf or nan",
       [](json& a) { a["calls"][1]["args"][0] = {{"float", "x"}}; },
       "op 'addmm' (aten) call 1 argument 0: float \"x\" is not one trident reads"},
      {"an unknown dtype", [](json& a) { a["calls"][1]["args"][0] = {{"dtype", "complex64"}}; }, "dtype \"complex64\""},
      {"an unknown layout", [](json& a) { a["calls"][1]["args"][0] = {{"layout", "sparse_coo"}}; }, "layout"},
      {"an input out of range", [](json& a) { a["calls"][1]["args"][1] = {{"in", 3}}; }, "input 3 is out of range"},
      {"a call before it is made", [](json& a) { a["calls"][0]["args"][0] = {{"call", 1}}; }, "refers to call 1 before"},
      {"a constant the graph lacks", [](json& a) { a["calls"][0]["args"][0] = {{"const", "table"}}; }, "constant 'table'"},
      {"an unknown reference", [](json& a) { a["calls"][0]["args"][0] = {{"tensor", 1}}; }, "cannot read argument"},
      {"two references in one", [](json& a) { a["calls"][0]["args"][0] = {{"in", 0}, {"param", "w"}}; }, "cannot read argument"},
      {"an unknown key of a call", [](json& a) { a["calls"][0]["arg"] = json::array(); }, "unknown key 'arg'"},
      {"an operator that is not text", [](json& a) { a["calls"][0]["op"] = 7; }, "'op' must be a string"},
      {"random that is not a flag", [](json& a) { a["calls"][0]["random"] = "yes"; }, "'random' must be true or false"},
      {"no calls", [](json& a) { a["calls"] = json::array(); }, "attrs 'calls' must be a non-empty list"},
      {"calls that are not a list", [](json& a) { a["calls"] = {{"op", "aten::t"}}; }, "attrs 'calls' must be"},
      {"a result that is a value", [](json& a) { a["result"] = 3; }, "'result' must name a call or an input"},
      {"no result", [](json& a) { a.erase("result"); }, "attrs 'result' is missing"},
      {"a batch without plus", [](json& a) { a["calls"][1]["args"][0] = {{"batch", 1}}; }, "needs both"},
      {"an integer out of range", [](json& a) { a["calls"][1]["args"][1] = {{"in", 1e30}}; }, "input"},
  };
  for (const auto& c : cases) {
    const auto message = refused(c.edit);
    EXPECT_NE(message.find(c.needle), std::string::npos) << c.what << ": " << message;
    EXPECT_NE(message.find("op 'addmm'"), std::string::npos) << c.what << ": " << message;
  }
  EXPECT_EQ(refused([](json&) {}), "");  // the unedited program reads
}

}  // namespace
}  // namespace trident::graph
