// Captured ATen programs as typed, torch-free data: what an op of kind
// "aten" runs, parsed once from its attrs and checked where it enters
// (OpGraph::validate, so `trident plan`, `trident graph`, `trident train`
// and the model fuzzer refuse the same bad input with the same line). The
// nn component then only resolves operators and converts these values by
// their schemas (nn/src/aten_op.cc).
//
// Note [ATen programs]
// ~~~~~~~~~~~~~~~~~~~~
// attrs "calls" is a non-empty list of {"op", "overload", "args", "kwargs",
// "random"}; "result" names the op's output. An argument is a JSON constant
// (number, bool, string, null), a list of arguments, or an object:
//   {"float": "inf" | "-inf" | "nan"}   a float JSON cannot write
//   {"dtype": d}, {"layout": "strided"}, {"memory_format": m}
//   {"in": i}                the op's i-th input (batch on axis 0)
//   {"call": j[, "item": k]} call j's result (its k-th, for a tuple or list); j < this call
//   {"param": name}          a parameter of the model
//   {"const": name}          a graph constant (OpGraph::constants)
//   {"batch": a, "plus": c}  the integer a·B + c, B the rows of input 0
//   {"device": ...}          the device of input 0
// "random": true marks a call that draws random numbers: its operator must
// take a generator, which the runtime seeds (Note [Random ops] in
// nn/random.h). Arguments are converted by the operator's schema, so an
// integer passed where the schema takes a float becomes one, as in Python.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trident/graph/op_graph.h"

namespace trident::graph {

struct AtenArg {
  enum class Kind {
    kNone, kBool, kInt, kFloat, kString, kList,       // values
    kDtype, kLayout, kMemoryFormat,                     // named enums (text)
    kInput, kCall, kParam, kConst, kBatch, kDevice      // references
  };
  Kind kind = Kind::kNone;
  bool boolean = false;
  std::int64_t integer = 0;  // kInt; kBatch: a
  double real = 0;           // kFloat
  std::string text;          // kString, kDtype, kLayout, kMemoryFormat, kParam, kConst
  int index = 0;             // kInput: the input; kCall: the call
  int item = -1;             // kCall: the result's item (-1: the whole result)
  std::int64_t plus = 0;     // kBatch: c
  std::vector<AtenArg> items;  // kList
};

struct AtenCall {
  std::string op, overload;
  std::vector<AtenArg> args;
  std::map<std::string, AtenArg> kwargs;
  bool random = false;
};

struct AtenProgram {
  std::vector<AtenCall> calls;
  AtenArg result;  // kCall or kInput
};

// The dtypes an argument may name (float32, ..., bool).
const std::vector<std::string>& aten_dtype_names();

// Parses and checks the program of `op` (kind "aten") of `graph`: the
// shape above, inputs and calls in range, constants present, names known.
// Throws GraphError "op 'NAME' call K argument A: ..." for the first fault.
AtenProgram parse_aten_program(const OpGraph& graph, const Op& op);

}  // namespace trident::graph
