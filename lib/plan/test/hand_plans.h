// Hand-written plans on mmt/tiny for the tests of plans (here) and of the
// planner's predictions for them (lib/planner/test/plan_test.cc).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "trident/plan/plan.h"
#include "trident/zoo/zoo.h"

namespace trident::plan::testing {

inline const graph::OpGraph& mmt_tiny() {
  static const graph::OpGraph g = zoo::build_graph({"mmt", "tiny"});
  return g;
}

// Hand-written plans on mmt/tiny: 2 branches feeding a head.
class HandPlan : public ::testing::Test {
 protected:
  const graph::OpGraph& g = mmt_tiny();
  std::vector<std::string> branch(int b, bool early, bool late) {
    std::vector<std::string> out;
    const std::string p = "branch" + std::to_string(b) + ".";
    bool after = false;
    for (const auto& op : g.ops()) {
      const bool mine = op.name.rfind(p, 0) == 0 || op.name == "modality" + std::to_string(b);
      if (!mine) continue;
      if (op.name.find("layer1") != std::string::npos) after = true;
      if ((after && late) || (!after && early)) out.push_back(op.name);
    }
    return out;
  }
  std::vector<std::string> head() {
    std::vector<std::string> out;
    for (const auto& op : g.ops())
      if (op.name.rfind("branch", 0) != 0 && op.name.rfind("modality", 0) != 0) out.push_back(op.name);
    return out;
  }
  Plan make(std::vector<std::vector<std::string>> stages, std::vector<std::vector<int>> devices) {
    Plan p;
    p.model = "mmt", p.preset = "tiny", p.devices = 4, p.mini_batch = 8;
    for (std::size_t i = 0; i < stages.size(); ++i) p.stages.push_back({static_cast<int>(i), stages[i], devices[i], 4});
    return p;
  }
  void expect_error(Plan p, const std::string& needle) {
    try {
      validate_plan(p, g);
      FAIL() << "expected PlanError with " << needle;
    } catch (const PlanError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
};

}  // namespace trident::plan::testing
