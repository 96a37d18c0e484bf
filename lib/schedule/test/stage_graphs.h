// Stage graphs the schedule tests share.
#pragma once

#include <string>

#include "trident/schedule/stage_graph.h"

namespace trident::schedule::test {

// p stages in a row, each micro-batch's forward f and backward b.
inline StageGraph chain(int p, double f, double b) {
  StageGraph g;
  for (int i = 0; i < p; ++i) g.stages.push_back({"s" + std::to_string(i), 1, f, b});
  for (int i = 0; i + 1 < p; ++i) g.edges.push_back({i, i + 1});
  return g;
}

}  // namespace trident::schedule::test
